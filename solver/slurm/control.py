"""Talking to a live Slurm controller with Slurm's own commands: what the agent reads
(``sinfo --json``, ``squeue --json``, openapi v0.0.38 in Slurm 22.05) and what it does
(``scontrol update`` / ``release`` / ``requeuehold``).

:class:`SlurmControl` runs every command with the cluster's environment (``SLURM_CONF``)
and retries with exponential backoff while slurmctld does not answer, saying so in the
log once per outage; a command Slurm refuses (a bad job id, a job already gone) raises
:class:`SlurmRefusedError` at once, with Slurm's own message.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)

#: How Slurm's client commands say that slurmctld does not answer (the controller is
#: down, restarting or overloaded): retried, never taken for an answer.
UNREACHABLE = re.compile(r"Unable to contact slurm controller|Socket timed out|"
                         r"Connection refused|Zero Bytes were transmitted|"
                         r"Communication connection failure|slurm_load_.*error|"
                         r"Unexpected message received", re.I)
#: A GPU GRES with its indices in ``squeue --json``'s ``gres_detail``:
#: ``gpu:k80:2(IDX:0-1)``, ``gpu:v100:3(IDX:0,2-3)``, ``gpu:2(IDX:1,3)``.
GRES_DETAIL = re.compile(r"^gpu(?::(?P<type>[^:(]+))?(?::(?P<count>\d+))?\(IDX:(?P<idx>[^)]*)\)")


_Answer = TypeVar("_Answer")


class _NoAnswerError(Exception):
    """A command exited 0 with an answer that says slurmctld was not reached."""


def _json_answer(text: str) -> dict[str, Any]:
    """A ``--json`` answer; :class:`_NoAnswerError` if it carries ``errors``."""
    try:
        answer = json.loads(text)
    except ValueError as exc:
        raise SlurmRefusedError(f"no JSON in Slurm's answer: {text[:200]}") from exc
    if not isinstance(answer, dict):
        raise SlurmRefusedError(f"Slurm's JSON answer is a {type(answer).__name__}")
    errors = answer.get("errors") or []
    if errors:
        first = errors[0] if isinstance(errors[0], dict) else {"error": str(errors[0])}
        raise _NoAnswerError("; ".join(str(first.get(k)) for k in ("source", "error",
                                                                    "description")
                                       if first.get(k)) or "errors in the answer")
    return answer


class SlurmRefusedError(RuntimeError):
    """Slurm answered a command with an error (not an outage): its message."""


class SlurmUnreachableError(RuntimeError):
    """slurmctld did not answer within the retry budget."""


def gpu_indices(detail: str) -> list[int]:
    """The GPU indices of one ``gres_detail`` entry (``gpu:k80:2(IDX:0-1)`` -> [0, 1]);
    [] for an entry with no GPUs."""
    found = GRES_DETAIL.match(detail.strip())
    if found is None:
        return []
    indices: list[int] = []
    for part in found.group("idx").split(","):
        part = part.strip()
        if not part or part == "N/A":
            continue
        low, _, high = part.partition("-")
        indices.extend(range(int(low), int(high or low) + 1))
    return indices


def expand_nodes(text: str) -> list[str]:
    """Slurm's host list syntax expanded (``v100-[0-1],k80-0`` -> three names), without
    calling ``scontrol show hostnames``."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]*)\[([^\]]*)\]|([^,\[\]]+)", text):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{width}d}")
    return names


@dataclass
class SlurmControl:
    """Slurm's commands for one cluster: ``env`` is their environment (``SLURM_CONF``);
    an outage is retried for ``patience_s`` seconds, waiting 0.5 s, 1 s, 2 s ... up to
    ``max_backoff_s`` between tries (``sleep`` waits, ``run`` runs: both replaceable
    for an interrupt handler)."""

    env: Mapping[str, str] | None = None
    patience_s: float = 600.0
    max_backoff_s: float = 15.0
    timeout_s: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    outages: int = field(default=0, init=False)

    def run(self, *command: str) -> str:
        """Run one Slurm command; its stdout. Retries an outage with backoff (logged);
        :class:`SlurmRefusedError` for an error Slurm answered, :class:`SlurmUnreachableError`
        when the controller stayed silent for ``patience_s``."""
        return self._retrying(command, str)

    def json(self, *command: str) -> dict[str, Any]:
        """A command's JSON answer (``--json`` is added). An answer with ``errors`` is no
        answer: with slurmctld down, Slurm 22.05's ``sinfo --json`` and ``squeue --json``
        exit 0 after about 9 s with ``"errors": [...]`` and no nodes or jobs, which taken
        for the cluster's state would end every job; it is retried as an outage."""
        return self._retrying((*command, "--json"), _json_answer)

    def _retrying(self, command: Sequence[str], read: Callable[[str], _Answer]) -> _Answer:
        began = time.monotonic()
        wait = 0.5
        warned = False
        while True:
            try:
                done = subprocess.run(command, env=None if self.env is None else dict(self.env),
                                      capture_output=True, text=True, timeout=self.timeout_s,
                                      check=False)
                problem = done.stderr.strip()
                if done.returncode == 0:
                    answer = read(done.stdout)
                    if warned:
                        log.warning("slurmctld answers again (%s)", command[0])
                    return answer
                if not UNREACHABLE.search(problem):
                    raise SlurmRefusedError(f"{' '.join(command[:3])}: {problem or 'failed'}")
            except subprocess.TimeoutExpired:
                problem = f"no answer within {self.timeout_s:g} s"
            except _NoAnswerError as exc:
                problem = str(exc)
            spent = time.monotonic() - began
            if spent >= self.patience_s:
                raise SlurmUnreachableError(f"slurmctld did not answer for {spent:.0f} s "
                                            f"({command[0]}: {problem})")
            if not warned:
                self.outages += 1
                log.warning("slurmctld does not answer (%s: %s); retrying with backoff",
                            command[0], problem.splitlines()[-1] if problem else "?")
                warned = True
            else:
                log.info("still no answer from slurmctld; next try in %.1f s", wait)
            self.sleep(wait)
            wait = min(wait * 2, self.max_backoff_s)

    def nodes(self, partition: str | None = None) -> list[dict[str, Any]]:
        """``sinfo --json``'s nodes (of ``partition`` if given)."""
        nodes = self.json("sinfo")["nodes"]
        return [n for n in nodes if partition is None or partition in n.get("partitions", [])]

    def jobs(self, partition: str | None = None) -> list[dict[str, Any]]:
        """``squeue --json``'s jobs (of ``partition`` if given), finished ones included
        for ``MinJobAge``."""
        jobs = self.json("squeue", "--all")["jobs"]
        return [j for j in jobs if partition is None or j.get("partition") == partition]

    def start(self, job_id: int, nodes: Sequence[str], gpus: Sequence[int], *,
              requeued: bool = False, same_second: bool = True) -> None:
        """Pin a held job to ``nodes`` with ``gpus[i]`` GPUs on ``nodes[i]`` (untyped: a
        node has one GPU type, and a typed request could never move to another type) and
        release it. The same count on every node is ``TresPerNode``; uneven counts
        (3 + 1) are ``TresPerJob`` over those nodes, which Slurm splits itself
        (:func:`hetsched.slurm.state.slurm_split`); the other field is cleared. A requeued
        job's begin time (Slurm sets it 120 s ahead) is moved to now, or, released within
        the second of its requeue (``same_second``), to the next second: started in that
        second, Slurm kills it ("Job credential revoked") and it ends FAILED."""
        when = [f"StartTime={'now+1' if same_second else 'now'}"] if requeued else []
        even = len(set(gpus)) == 1
        tres = [f"TresPerNode=gres:gpu:{gpus[0]}", "TresPerJob="] if even else \
            ["TresPerNode=", f"TresPerJob=gres:gpu:{sum(gpus)}"]
        self.run("scontrol", "update", f"JobId={job_id}", f"NumNodes={len(nodes)}",
                 f"NodeList={','.join(nodes)}", *tres, *when)
        self.run("scontrol", "release", str(job_id))

    def preempt(self, job_id: int) -> None:
        """Requeue a running job held (it stays pending, held, until the agent starts it
        again; Slurm sends it SIGTERM, then SIGKILL after ``KillWait``)."""
        self.run("scontrol", "requeuehold", str(job_id))

    def job_state(self, job_id: int) -> str:
        """One job's state now (``squeue``'s: RUNNING, COMPLETING, COMPLETED ...); "" for a
        job Slurm no longer lists."""
        try:
            answer = self.run("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T")
        except SlurmRefusedError:  # "Invalid job id specified": gone
            return ""
        return answer.strip().split("\n")[0].strip()

    def hold(self, job_id: int) -> None:
        """Hold a pending job again (a job released that has not started)."""
        self.run("scontrol", "hold", str(job_id))
