"""The SCIP engine: ``pyscipopt`` in-process, reading the model from an MPS file.

The model is written with :func:`~hetsched.formulations.mip.mps.write_mps` and read with
``readProblem`` (one Python object per variable is made by ``getVars`` to read values
back, none per nonzero). A start is a solution created in the problem stage
(``createSol``/``setSolVal``) and handed over with ``addSol``; SCIP checks it when the
solve begins and drops it if it is infeasible. The outcome is ``getStatus()``; the bound
``getDualbound()`` (plus the model's offset, which is not in the file); the node count
``getNTotalNodes()``.

Limits: ``limits/time`` (wall clock, ``timing/clocktype`` 2) or ``limits/totalnodes``
(and ``limits/nodes``); ``limits/gap``; ``randomization/randomseedshift``. SCIP solves with
one thread. Interrupts: ``misc/catchctrlc`` is off (SCIP would otherwise install its own
SIGINT handler during the solve); ``optimizeNogil`` runs in a worker thread and
``interruptSolve`` stops it.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyscipopt

from hetsched.formulations.mip.engine import EngineRun, Limits, RunKind, Stopper, run_in_thread
from hetsched.formulations.mip.model import MatrixModel, Vector
from hetsched.formulations.mip.mps import column_index, write_mps
from hetsched.formulations.mip.result import MipSettings

log = logging.getLogger(__name__)

_KINDS = {
    "optimal": RunKind.OPTIMAL,
    "gaplimit": RunKind.OPTIMAL,  # stopped within limits/gap: checked against the bound
    "infeasible": RunKind.INFEASIBLE,
    "unbounded": RunKind.UNBOUNDED,
    "inforunbd": RunKind.UNBOUNDED,
    "timelimit": RunKind.LIMIT,
    "nodelimit": RunKind.LIMIT,
    "totalnodelimit": RunKind.LIMIT,
    "stallnodelimit": RunKind.LIMIT,
    "userinterrupt": RunKind.LIMIT,  # only the watchdog (Ctrl-C propagates)
    "sollimit": RunKind.LIMIT,
    "bestsollimit": RunKind.LIMIT,
    "restartlimit": RunKind.LIMIT,
    "memlimit": RunKind.LIMIT,
}


def _parameters(scip: pyscipopt.Model, limits: Limits, settings: MipSettings) -> None:
    scip.setParam("misc/catchctrlc", False)
    scip.setParam("timing/clocktype", 2)
    scip.setParam("limits/gap", float(settings.gap))
    scip.setParam("limits/absgap", 0.0)
    scip.setParam("randomization/randomseedshift", int(settings.seed))
    time_s = limits.time_s()
    if time_s is not None:
        # SCIP reads its clock between presolve rounds and nodes: it overshot its limit by
        # up to 10% + 0.1 s on the models of benchmarks/time_limits.py, so it is given less.
        scip.setParam("limits/time", max(0.01, 0.9 * float(time_s) - 0.1))
    if limits.nodes is not None:
        scip.setParam("limits/totalnodes", int(limits.nodes))
        scip.setParam("limits/nodes", int(limits.nodes))


def _give_start(scip: pyscipopt.Model, variables: list[Any], order: np.ndarray,
                start: Vector) -> str:
    solution = scip.createSol()
    for position, var in enumerate(variables):
        scip.setSolVal(solution, var, float(start[order[position]]))
    return "given" if scip.addSol(solution, free=True) else "rejected"


def solve(model: MatrixModel, limits: Limits, settings: MipSettings,
          start: Vector | None) -> EngineRun:
    """One SCIP run of ``model`` (see the module's notes)."""
    scip = pyscipopt.Model()
    scip.hideOutput()
    with tempfile.TemporaryDirectory(prefix="hetsched-scip-") as folder:
        path = Path(folder) / "model.mps"
        write_mps(model, path)
        scip.readProblem(str(path))
    variables = scip.getVars()
    order = np.array([column_index(v.name) for v in variables], dtype=np.int64)
    if len(order) != model.num_cols or sorted(order.tolist()) != list(range(model.num_cols)):
        raise RuntimeError("SCIP read other columns than were written")
    _parameters(scip, limits, settings)
    detail: dict[str, Any] = {"threads_used": 1}
    if start is not None:
        detail["start"] = _give_start(scip, variables, order, start)
    stopper = Stopper()
    run_in_thread(scip.optimizeNogil, scip.interruptSolve, stopper, limits.kill_at(), "scip")
    status = str(scip.getStatus())
    kind = _KINDS.get(status, RunKind.ERROR)
    values = None
    if scip.getNSols() > 0:
        best = scip.getBestSol()
        values = np.zeros(model.num_cols)
        values[order] = [scip.getSolVal(best, var) for var in variables]
    bound: float | None = None
    if kind in (RunKind.OPTIMAL, RunKind.LIMIT):
        raw = float(scip.getDualbound())
        bound = raw + model.offset if np.isfinite(raw) and abs(raw) < 1e19 else None
    if stopper.by_watchdog:
        detail["watchdog"] = True
    return EngineRun(kind, status, values, bound, float(scip.getNTotalNodes()),
                     message="" if kind is not RunKind.ERROR else f"SCIP: {status}",
                     detail=detail)
