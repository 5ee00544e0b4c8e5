"""``hetsched slurm submit``: a trace's jobs submitted to Slurm at their arrival times,
time compressed by a speedup X, each running the training emulator
(:mod:`hetsched.slurm.emulator`; docs/slurm.md, "Submitting a trace"), or a training
script of the user's that reports through :mod:`hetsched.job` (``--script``; docs/slurm.md,
"Real jobs: hetsched.job").

The jobs are read as ``hetsched replay`` reads them on the local cluster's GPUs
(:func:`hetsched.files.replay_inputs.trace_jobs`: the same throughput source, reference
GPU, ``--limit-jobs``); trace time 0 is ``origin``, a couple of seconds after the
command starts, and job ``j`` is submitted at ``origin + arrival_j / X``:

* for the agent: held (``sbatch -H``) and asking for no GPU (the agent pins and releases
  it), its comment ``hetsched {...}``;
* with ``slurm_schedules``: not held, asking for its GPU count of any type, on one node
  (``--nodes=1 --gres=gpu:N``) if a node has that many GPUs, else over the fewest nodes
  that can hold it (``--nodes=ceil(N/P) --gpus=N``, P the largest node's GPUs: exactly N
  GPUs, as Slurm spreads them); its comment ``hetsched-slurm {...}`` (an agent leaves it
  alone).

Every submission is appended to ``submitted.csv`` at once (flushed), so an interrupt
loses none.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.interrupts import deferred_interrupts
from hetsched.core.ranges import in_range
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.settings import ReplaySettings
from hetsched.files.generate import GPU_TYPES
from hetsched.job import FOLDER_VARIABLE, JOB_VARIABLE, LAUNCHED_VARIABLE, WORK_VARIABLE
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.metadata import MAX_SPEEDUP, JobMeta
from hetsched.slurm.processes import program

log = logging.getLogger(__name__)

#: Seconds between the command's start and trace time 0 (reading done, first sbatch ready).
LEAD_S = 2.0
#: The columns of ``submitted.csv``.
SUBMITTED_COLUMNS = ("job", "slurm_job_id", "planned_unix_s", "submitted_unix_s")
#: What the emulator's batch script is named in Slurm: ``hetsched-<job id>``.
JOB_NAME_PREFIX = "hetsched-"


@dataclass(frozen=True)
class Submission:
    """What ``submit`` will do: each job's metadata (by arrival), the folders of its
    checkpoints and logs, the batch script and the throughput file the emulator reads
    (``None``: the built-in catalogue); with a user's ``command`` (``--script``), the
    batch script runs it instead, and ``script`` is without each job's own lines
    (:meth:`script_of`)."""

    metas: tuple[JobMeta, ...]
    state_dir: Path
    throughput_path: Path | None
    script: str
    partition: str
    gpus_per_node: int
    command: tuple[str, ...] = ()

    def script_of(self, meta: JobMeta) -> str:
        """The batch script of the job of ``meta`` (a job whose comment leaves its work
        out is told its steps in its environment, ``HETSCHED_WORK``: the job knows how
        long it trains, the agent does not)."""
        if self.command:
            return command_script(self.command, self.checkpoints, meta.job)
        if not meta.work_hidden:
            return self.script
        return batch_script(self.checkpoints, self.throughput_path, work=meta.job.work)

    @property
    def checkpoints(self) -> Path:
        """The emulator's checkpoints: ``STATE/checkpoints/JOBID.json``."""
        return self.state_dir / "checkpoints"

    @property
    def logs(self) -> Path:
        """The jobs' output (the emulator's log): ``STATE/logs/JOBID.out``."""
        return self.state_dir / "logs"

    @property
    def submitted_csv(self) -> Path:
        """``STATE/submitted.csv``: one row per job submitted."""
        return self.state_dir / "submitted.csv"


@dataclass(frozen=True)
class Submitted:
    """What a ``submit`` did: the Slurm job id of each hetsched job submitted, in order,
    and whether an interrupt stopped it early."""

    slurm_ids: Mapping[str, str]
    total: int
    interrupted: bool


def hetsched_cluster(cluster: LocalCluster) -> Cluster:
    """The hetsched cluster of a local Slurm cluster's nodes (what ``hetsched replay
    --cluster`` takes for the same spec: names, GPU types and counts; CPUs and memory
    unlimited, as jobs ask Slurm for none)."""
    names = list(dict.fromkeys(node.gpu_type for node in cluster.nodes))
    return Cluster(tuple(GPU_TYPES.get(name, GpuType(name)) for name in names),
                   tuple(Node(node.name, node.gpu_type, node.gpus) for node in cluster.nodes))


def batch_script(checkpoints: Path, throughput_path: Path | None,
                 python: str = sys.executable, work: float | None = None) -> str:
    """The batch script of every job: the emulator under ``python`` (the interpreter
    that submits, so the same hetsched), told when the script started, and with ``work``
    its job's steps (``HETSCHED_WORK``: a job whose comment leaves them out)."""
    command = [python, "-m", "hetsched.slurm.emulator", "--checkpoints",
               str(Path(checkpoints).absolute())]
    if throughput_path is not None:
        command += ["--throughput", str(Path(throughput_path).absolute())]
    return ("#!/bin/sh\n# hetsched's training emulator (hetsched slurm submit; "
            "docs/slurm.md)\n"
            + ("" if work is None else f"export {WORK_VARIABLE}={work!r}\n")
            + f'exec {" ".join(shlex.quote(part) for part in command)} '
            '--launched "$(date +%s.%N)"\n')


def script_command(text: str, python: str = sys.executable) -> tuple[str, ...]:
    """The command line of ``--script FILE [ARGS...]`` (shell words): FILE made absolute,
    run by ``python`` if it ends in ``.py``, else run itself (it must be executable). An
    InputError if FILE is missing or cannot run."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise InputError(f"unbalanced quotes ({exc})", path="--script", value=text,
                         expected="FILE [ARGS...] in shell words") from None
    if not words:
        raise InputError("no training script", path="--script", value=text,
                         expected="FILE [ARGS...]")
    file = Path(words[0]).absolute()
    if not file.is_file():
        raise InputError("no such file", path="--script", value=words[0],
                         expected="a training script that reports through hetsched.job")
    if file.suffix == ".py":
        return (python, str(file), *words[1:])
    if not os.access(file, os.X_OK):
        raise InputError("not executable", path="--script", value=words[0],
                         expected="an executable file, or a Python file ending in .py")
    return (str(file), *words[1:])


def command_script(command: Sequence[str], checkpoints: Path, job: Job | None = None) -> str:
    """The batch script that runs a user's ``command`` as a managed job: it exports where
    the job reports (:mod:`hetsched.job`: ``HETSCHED_CHECKPOINTS``) and when the script
    started, and with ``job`` the job's id and work (steps: how far to train)."""
    exports = {FOLDER_VARIABLE: shlex.quote(str(Path(checkpoints).absolute())),
               LAUNCHED_VARIABLE: '"$(date +%s.%N)"'}
    if job is not None:
        exports |= {JOB_VARIABLE: shlex.quote(job.id), WORK_VARIABLE: repr(job.work)}
    return ("#!/bin/sh\n# a training script run as a managed job (hetsched slurm submit "
            "--script; docs/slurm.md)\n"
            + "".join(f"export {name}={value}\n" for name, value in exports.items())
            + f'exec {" ".join(shlex.quote(part) for part in command)}\n')


def gpu_request(job: Job, gpus_per_node: int) -> list[str]:
    """The sbatch options of a job Slurm's own scheduler places: its ``num_gpus`` on one
    node if a node holds them, else over ``ceil(N / gpus_per_node)`` nodes; typed when
    the job may use one GPU type only."""
    count = job.num_gpus
    types = job.allowed_gpu_types or ()
    typed = f"{types[0]}:" if len(types) == 1 else ""
    if count <= gpus_per_node:
        return ["--nodes=1", f"--gres=gpu:{typed}{count}"]
    return [f"--nodes={math.ceil(count / gpus_per_node)}", f"--gpus={typed}{count}"]


def sbatch_arguments(meta: JobMeta, submission: Submission) -> list[str]:
    """The sbatch command line of one job (its script comes on stdin)."""
    arguments = [program("sbatch") or "sbatch", "--parsable",
                 f"--partition={submission.partition}",
                 f"--job-name={JOB_NAME_PREFIX}{meta.job.id}",
                 f"--comment={meta.to_comment()}",
                 f"--output={submission.logs}/%j.out", "--requeue", "--open-mode=append"]
    if meta.slurm_schedules:
        return arguments + gpu_request(meta.job, submission.gpus_per_node)
    return [*arguments[:1], "-H", *arguments[1:]]


def prepare(trace: Path, trace_format: str, cluster: LocalCluster, *, speedup: float,
            settings: ReplaySettings | None = None, throughput_path: Path | None = None,
            partition: str | None = None, state_dir: Path | None = None,
            slurm_schedules: bool = False, origin: float | None = None,
            command: Sequence[str] = (), hide_work: bool = False) -> Submission:
    """The submission of ``trace`` to ``cluster`` (module docstring): the jobs read as a
    replay on its GPUs reads them with ``settings`` (``limit_jobs``, ``restart_penalty_s``,
    ...), every comment checked; ``origin`` (Unix s of trace time 0) defaults to
    :data:`LEAD_S` from now. Each job runs the emulator, or ``command``
    (:func:`script_command`) if given. ``hide_work``: the comments leave the jobs' work
    out (the jobs are told it in their environment; the agent guesses it)."""
    from hetsched.files.replay_inputs import trace_jobs

    if not in_range(speedup, 0, MAX_SPEEDUP, strict_low=True):
        raise InputError("bad speedup", path="speedup", value=speedup,
                         expected=f"trace seconds per wall second, > 0 and at most "
                         f"{MAX_SPEEDUP:g}")
    settings = settings or ReplaySettings()
    jobs = trace_jobs(trace, trace_format, hetsched_cluster(cluster),
                      throughput_path=throughput_path, settings=settings)
    origin = time.time() + LEAD_S if origin is None else origin
    metas = tuple(JobMeta(job, origin, speedup, settings.restart_penalty_s, slurm_schedules,
                          trace=trace.name, work_hidden=hide_work)
                  for job in sorted(jobs.jobs, key=lambda job: job.arrival))
    for meta in metas:
        meta.to_comment()  # too long: an error now, before any job is submitted
    if slurm_schedules:
        narrow = [m.job.id for m in metas if m.job.allowed_gpu_types is not None
                  and len(m.job.allowed_gpu_types) > 1]
        if narrow:
            log.warning("%d jobs may use only some GPU types, which --gres cannot say (the "
                        "first: %s): Slurm may place them on another type, where their "
                        "emulator fails (exit 3)", len(narrow), narrow[0])
    state_dir = Path(state_dir or cluster.state_dir).absolute()
    checkpoints = state_dir / "checkpoints"
    script = command_script(command, checkpoints) if command else \
        batch_script(checkpoints, jobs.source)
    return Submission(metas, state_dir, jobs.source, script, partition or cluster.partition,
                      max(node.gpus for node in cluster.nodes), tuple(command))


def check_partition(cluster: LocalCluster, partition: str) -> None:
    """An InputError unless the cluster runs and has ``partition``."""
    try:
        done = subprocess.run([program("sinfo") or "sinfo", "--json"], env=cluster.env(),
                              capture_output=True, text=True, timeout=30, check=True)
        nodes = json.loads(done.stdout).get("nodes", [])
    except (OSError, subprocess.SubprocessError, ValueError):
        raise InputError("the local Slurm cluster does not answer", path="--cluster-dir",
                         value=str(cluster.state_dir), expected="a running cluster "
                         "(hetsched slurm cluster start)") from None
    partitions = sorted({name for node in nodes for name in node.get("partitions") or []})
    if partition not in partitions:
        raise InputError("no such partition", path="--partition", value=partition,
                         expected="one of " + ", ".join(partitions))


def submit_one(meta: JobMeta, submission: Submission, environment: Mapping[str, str]) -> str:
    """sbatch one job (its own session, so a Ctrl-C at the terminal reaches this process
    only); its Slurm job id. A RuntimeError with sbatch's message if it fails."""
    done = subprocess.run(sbatch_arguments(meta, submission), input=submission.script_of(meta),
                          env=dict(environment), capture_output=True, text=True, timeout=60,
                          check=False, start_new_session=True)
    job_id = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job_id.isdigit():
        raise RuntimeError(f"sbatch of job {meta.job.id} failed: "
                           f"{(done.stderr or done.stdout).strip()}")
    return job_id


Progress = Callable[[int, int, float], None]


def submit(submission: Submission, environment: Mapping[str, str], *,
           progress: Progress | None = None,
           clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep) -> Submitted:
    """Submit every job at its time (``origin + arrival / X``), sleeping in between;
    write ``submitted.csv`` as it goes. ``progress(done, total, next Unix s)`` after each
    job. Ctrl-C (or SIGTERM) stops it: what was submitted is kept and said."""
    for folder in (submission.checkpoints, submission.logs):
        folder.mkdir(parents=True, exist_ok=True)
    total, slurm_ids = len(submission.metas), {}
    with submission.submitted_csv.open("w", encoding="utf-8", newline="") as file:
        rows = csv.writer(file)
        rows.writerow(SUBMITTED_COLUMNS)
        file.flush()
        try:
            for meta in submission.metas:
                planned = meta.unix_time(meta.job.arrival)
                while (wait := planned - clock()) > 0:
                    sleep(min(wait, 1.0))
                with deferred_interrupts():  # a job sbatch made is always written down
                    slurm_id = submit_one(meta, submission, environment)
                    submitted = clock()
                    rows.writerow((meta.job.id, slurm_id, repr(planned), repr(submitted)))
                    file.flush()
                slurm_ids[meta.job.id] = slurm_id
                log.info("job %s: Slurm job %s, %+.3f s from its time (trace %.6g s)",
                         meta.job.id, slurm_id, submitted - planned, meta.job.arrival)
                if progress is not None:
                    following = submission.metas[len(slurm_ids):]
                    progress(len(slurm_ids), total, following[0].unix_time(
                        following[0].job.arrival) if following else math.inf)
        except KeyboardInterrupt:
            return Submitted(slurm_ids, total, interrupted=True)
    return Submitted(slurm_ids, total, interrupted=False)


def submitted_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a ``submitted.csv``."""
    with Path(path).open(encoding="utf-8", newline="") as file:
        return list(csv.DictReader(file))

