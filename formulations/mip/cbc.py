"""The CBC engine: the ``cbcbox`` binary (CBC's maintained ``next`` branch) as a child
process, given an MPS file and, for a start, a solution file (``-mipStart``).

Status. Through PuLP's ``COIN_CMD`` a cbcbox solve stopped by its time limit comes back
with status "Optimal" (only PuLP's solution status says "integer feasible"), and this
build's own summary line prints "Optimal" with the objective as its bound when it stops
within ``-ratioGap``. So the status is read here from the first line of CBC's solution
file (``-solution``), which this build writes as:

==============================================  ====================================
first line starts with                          run kind
==============================================  ====================================
``Optimal``                                     optimal (``(within gap tolerance)``:
                                                within ``-ratioGap``, bound from the log)
``Infeasible``, ``Integer infeasible``          infeasible
``Unbounded``                                   unbounded
``Stopped on time``/``iterations`` (= nodes)    limit; ``no integer solution`` in the line:
                                                no solution
``Status unknown``                              infeasible if the log says its bound
                                                tightening proved infeasibility (this
                                                build skips the solve then), else error
==============================================  ====================================

The best bound is the last ``Lower bound:`` line of the log, printed with six
significant digits: it is lowered by one unit of its last digit so that it stays a
bound. The node count is the log's ``Enumerated nodes:``. The exit status comes first: a
process killed by a signal (CBC 2.10's segfault while reading a start) is an ERROR, and
the solve is not repeated.

Limits: ``-seconds`` with ``-timeMode elapsed`` (wall clock) and a watchdog that kills
the process :data:`~hetsched.formulations.mip.engine.KILL_GRACE_S` (+5 %) after the limit, or
``-maxNodes`` (deterministic mode). The child runs in its own session (a Ctrl-C at the
terminal reaches only Python), is killed when the waiting thread gets any exception
(KeyboardInterrupt), and on Linux gets SIGKILL if this process dies
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import logging
import math
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.formulations.mip.engine import POLL_S, EngineRun, Limits, RunKind
from hetsched.formulations.mip.model import MatrixModel, Vector
from hetsched.formulations.mip.mps import column_index, write_cbc_start, write_mps
from hetsched.formulations.mip.result import MipSettings

log = logging.getLogger(__name__)

#: Lines of CBC's log kept in ``detail`` after an error.
LOG_TAIL_LINES = 20

_PR_SET_PDEATHSIG = 1


def _parent_death_hook() -> Any:
    """A function that makes the calling (child) process receive SIGKILL when its parent
    dies (Linux), resolved here in the parent so that the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))

    return hook


_DIE_WITH_PARENT = _parent_death_hook()


def binary() -> str:
    """The path of cbcbox's CBC binary (its AVX2 build when the CPU has AVX2)."""
    import cbcbox

    return str(cbcbox.cbc_bin_path())


def command(folder: Path, limits: Limits, settings: MipSettings, with_start: bool
            ) -> list[str]:
    """CBC's command line (the limit is read now: call it just before starting)."""
    args = [binary(), "model.mps"]
    if with_start:
        args += ["-mipStart", "start.sol"]
    if settings.threads > 1:
        args += ["-threads", str(settings.threads)]
    args += ["-randomCbcSeed", str(settings.seed + 1),  # 0 would mean "time of day"
             "-ratioGap", repr(float(settings.gap))]
    time_s = limits.time_s()
    if time_s is not None:
        args += ["-timeMode", "elapsed", "-seconds", f"{time_s:.3f}"]
    if limits.nodes is not None:
        args += ["-maxNodes", str(limits.nodes)]
    return [*args, "-solve", "-solution", "solution.txt", "-quit"]


def solve(model: MatrixModel, limits: Limits, settings: MipSettings,
          start: Vector | None) -> EngineRun:
    """One CBC run of ``model`` (see the module's notes)."""
    with tempfile.TemporaryDirectory(prefix="hetsched-cbc-") as name:
        folder = Path(name)
        write_mps(model, folder / "model.mps")
        if start is not None:
            write_cbc_start(start, folder / "start.sol")
        args = command(folder, limits, settings, start is not None)
        returncode, killed = _run(args, folder, limits)
        text = (folder / "cbc.log").read_text(encoding="utf-8", errors="replace")
        solution = folder / "solution.txt"
        lines = solution.read_text(encoding="ascii", errors="replace").splitlines() \
            if solution.exists() else []
    detail: dict[str, Any] = {"returncode": returncode}
    if start is not None:
        detail["start"] = _start_note(text)
    nodes = _last_number(r"Enumerated nodes:\s*(\d+)", text) or 0.0
    if killed:
        detail["watchdog"] = True
        return EngineRun(RunKind.LIMIT, "killed after its time limit", nodes=nodes,
                         detail=detail)
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() \
            else str(-returncode)
        detail["signal"] = name
        detail["log_tail"] = _tail(text)
        return EngineRun(RunKind.ERROR, f"died from {name}", nodes=nodes,
                         message=f"CBC died from signal {name}", detail=detail)
    if returncode != 0 or not lines:
        detail["log_tail"] = _tail(text)
        return EngineRun(RunKind.ERROR, f"exit status {returncode}", nodes=nodes,
                         message=f"CBC ended with exit status {returncode} and "
                                 f"{'a' if lines else 'no'} solution file", detail=detail)
    header = lines[0].strip()
    kind, has_values = _kind(header, text)
    values = _values(lines[1:], model.num_cols) if has_values else None
    bound = _bound(text, header, values, model)
    if kind is RunKind.ERROR:
        detail["log_tail"] = _tail(text)
    return EngineRun(kind, header.split(" - ")[0], values, bound, nodes,
                     message="" if kind is not RunKind.ERROR else f"CBC: {header}",
                     detail=detail)


def _run(args: list[str], folder: Path, limits: Limits) -> tuple[int, bool]:
    """Run CBC; its exit status and whether the watchdog killed it."""
    kill_at = limits.kill_at()
    with (folder / "cbc.log").open("wb") as output:
        process = subprocess.Popen(args, cwd=folder, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=_DIE_WITH_PARENT)
        log.debug("cbc started: pid %d", process.pid)
        killed = False
        try:
            while True:
                try:
                    return process.wait(timeout=POLL_S), killed
                except subprocess.TimeoutExpired:
                    if not killed and kill_at is not None and time.monotonic() > kill_at:
                        log.warning("cbc: still running past its time limit; killing it")
                        process.kill()
                        killed = True
        except BaseException:
            process.kill()
            process.wait()
            raise


def _kind(header: str, text: str) -> tuple[RunKind, bool]:
    """The run kind of a solution file's first line, and whether values follow."""
    if header.startswith("Optimal"):
        return RunKind.OPTIMAL, True
    if header.startswith(("Infeasible", "Integer infeasible")):
        return RunKind.INFEASIBLE, False
    if header.startswith("Unbounded"):
        return RunKind.UNBOUNDED, False
    if header.startswith("Stopped on"):
        return RunKind.LIMIT, "no integer solution" not in header
    if header.startswith("Status unknown") and "infeasibility proved" in text:
        return RunKind.INFEASIBLE, False
    return RunKind.ERROR, False


def _values(lines: list[str], count: int) -> Vector:
    """``index name value reduced-cost`` lines (``**`` marks an infeasible one; columns
    not listed are 0)."""
    values = np.zeros(count)
    for line in lines:
        fields = line.replace("**", " ").split()
        if len(fields) < 3:
            continue
        index = column_index(fields[1])
        if index is not None and index < count:
            values[index] = float(fields[2])
    return values


def _bound(text: str, header: str, values: Vector | None,
           model: MatrixModel) -> float | None:
    """The best bound (with the offset): the objective when proven optimal (a plain
    ``Optimal``: ``Optimal (within gap tolerance)`` is not a proof, and this build's
    summary line then shows the objective as its bound), else the last ``Lower bound:``
    lowered by one unit of its last printed digit."""
    if header.startswith("Optimal -") and values is not None:
        return model.objective(values)
    found = re.findall(r"Lower bound:\s*([-+0-9.eE]+|-?inf)", text)
    if not found:
        return None
    try:
        value = float(found[-1])
    except ValueError:
        return None
    if not math.isfinite(value) or abs(value) >= 1e30:
        return None
    return value - _last_digit(found[-1]) + model.offset


def _last_digit(text: str) -> float:
    """One unit in the sixth significant digit of the number ``text`` (CBC prints its
    bound with ``%g``: six significant digits, trailing zeros dropped)."""
    value = abs(float(text))
    if value == 0.0:
        return 0.0
    return float(10.0 ** (math.floor(math.log10(value)) - 5))


def _last_number(pattern: str, text: str) -> float | None:
    found = re.findall(pattern, text)
    return float(found[-1]) if found else None


def _start_note(text: str) -> str:
    """What CBC's log says about the start."""
    if "MIPStart provided solution" in text:
        return "accepted"
    if "MIPStart values read" in text:
        return "read"
    return "not read"


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])
