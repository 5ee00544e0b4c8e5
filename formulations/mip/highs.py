"""The HiGHS engine: ``highspy`` in-process, no files, status and bound from its API.

The model goes in with one ``passModel`` call from CSC arrays (offset included, so HiGHS's
objective and ``mip_dual_bound`` include it). A start goes in with ``setSolution``; HiGHS
checks it and ignores it if it is infeasible. The outcome is read from
``getModelStatus()`` and ``getInfo()`` (``primal_solution_status``, ``mip_dual_bound``,
``mip_node_count``), never from a log.

Interrupts: ``Highs.run`` releases the GIL but does not return before the solve ends, so
Python's SIGINT handler could only run after it. ``highspy``'s ``Highs.solve`` (with
``HandleKeyboardInterrupt``) runs in a thread but swallows the KeyboardInterrupt, prints,
and calls ``exit(1)`` after five. Here ``run`` goes in a worker thread
(:func:`~hetsched.formulations.mip.engine.run_in_thread`) and the three interrupt callbacks
(simplex, IPM, MIP) stop it when asked; the KeyboardInterrupt then propagates.
"""

from __future__ import annotations

import logging
from typing import Any

import highspy
import numpy as np

from hetsched.formulations.mip.engine import EngineRun, Limits, RunKind, Stopper, run_in_thread
from hetsched.formulations.mip.model import MatrixModel, Vector
from hetsched.formulations.mip.result import MipSettings

log = logging.getLogger(__name__)

_Status = highspy.HighsModelStatus
_KINDS = {
    _Status.kOptimal: RunKind.OPTIMAL,
    _Status.kInfeasible: RunKind.INFEASIBLE,
    _Status.kUnbounded: RunKind.UNBOUNDED,
    _Status.kUnboundedOrInfeasible: RunKind.UNBOUNDED,
    _Status.kTimeLimit: RunKind.LIMIT,
    _Status.kIterationLimit: RunKind.LIMIT,
    _Status.kSolutionLimit: RunKind.LIMIT,  # also what mip_max_nodes ends in
    _Status.kInterrupt: RunKind.LIMIT,  # only the watchdog (Ctrl-C propagates)
    _Status.kObjectiveBound: RunKind.LIMIT,
    _Status.kObjectiveTarget: RunKind.LIMIT,
}
#: HiGHS's ``primal_solution_status`` of a feasible point.
_FEASIBLE = 2


def load_model(highs: highspy.Highs, model: MatrixModel) -> None:
    """Pass ``model`` to ``highs`` in one ``passModel`` call (CSC arrays)."""
    csc = model.matrix.tocsc()
    csc.sort_indices()
    status = highs.passModel(
        model.num_cols, model.num_rows, int(csc.nnz), int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMinimize), float(model.offset), model.cost, model.col_lower,
        model.col_upper, model.row_lower, model.row_upper, csc.indptr.astype(np.int32),
        csc.indices.astype(np.int32), csc.data, model.integer.astype(np.int32))
    if status == highspy.HighsStatus.kError:
        raise RuntimeError("HiGHS rejected the model (passModel)")


def _options(highs: highspy.Highs, limits: Limits, settings: MipSettings) -> None:
    options: dict[str, Any] = {
        "output_flag": False,
        "mip_rel_gap": float(settings.gap),
        "mip_abs_gap": 0.0,
        "threads": int(settings.threads),
        "random_seed": int(settings.seed),
    }
    if not settings.presolve:
        options["presolve"] = "off"
    time_s = limits.time_s()
    if time_s is not None:
        options["time_limit"] = float(time_s)
    if limits.nodes is not None:
        options["mip_max_nodes"] = int(limits.nodes)
    for name, value in options.items():
        if highs.setOptionValue(name, value) == highspy.HighsStatus.kError:
            raise RuntimeError(f"HiGHS rejected the option {name}={value!r}")


def _give_start(highs: highspy.Highs, start: Vector) -> str:
    solution = highspy.HighsSolution()
    solution.col_value = start.tolist()
    solution.value_valid = True
    status = highs.setSolution(solution)
    return "given" if status != highspy.HighsStatus.kError else "rejected"


def solve(model: MatrixModel, limits: Limits, settings: MipSettings,
          start: Vector | None) -> EngineRun:
    """One HiGHS run of ``model`` (see the module's notes)."""
    highs = highspy.Highs()
    _options(highs, limits, settings)
    load_model(highs, model)
    detail: dict[str, Any] = {}
    if start is not None:
        detail["start"] = _give_start(highs, start)
    stopper = Stopper()

    def interrupt(event: Any) -> None:
        if stopper.requested.is_set():
            event.interrupt()

    highs.cbSimplexInterrupt += interrupt
    highs.cbIpmInterrupt += interrupt
    highs.cbMipInterrupt += interrupt

    def work() -> Any:
        try:
            return highs.run()
        finally:
            # What highspy's own threaded solve does after each run in a thread.
            highspy.Highs.resetGlobalScheduler(False)

    run_in_thread(work, lambda: None, stopper, limits.kill_at(), "highs")
    status = highs.getModelStatus()
    info = highs.getInfo()
    kind = _KINDS.get(status, RunKind.ERROR)
    text = highs.modelStatusToString(status)
    values = None
    if info.primal_solution_status == _FEASIBLE:
        values = np.asarray(highs.getSolution().col_value, dtype=np.float64)
    is_mip = bool(model.integer.any())
    bound: float | None = None
    if is_mip:
        bound = float(info.mip_dual_bound)
    elif kind is RunKind.OPTIMAL:
        bound = float(info.objective_function_value)
    nodes = float(max(0, int(info.mip_node_count))) if is_mip else 0.0
    if stopper.by_watchdog:
        detail["watchdog"] = True
    return EngineRun(kind, text, values, bound, nodes,
                     message="" if kind is not RunKind.ERROR else f"HiGHS: {text}",
                     detail=detail)
