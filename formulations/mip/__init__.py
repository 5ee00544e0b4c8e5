"""MILPs as arrays, solved by HiGHS, CBC or SCIP under one budget, with one reading of
the outcome.

:func:`solve_mip` hands a :class:`MatrixModel` to an engine:

- ``"highs"``: ``highspy`` in-process (``passModel`` from CSC arrays, ``setSolution``);
- ``"cbc"``: the ``cbcbox`` CBC binary as a child process (an MPS file, ``-mipStart``);
- ``"scip"``: ``pyscipopt`` in-process (an MPS file, ``createSol``/``addSol``).

Each engine module is imported only when that engine is asked for. The limits come from
the :class:`~hetsched.formulations.budget.Budget`: in wall mode the engine's time limit is
``budget.for_solver()``; in deterministic mode only node limits are used
(``for_solver()`` x :data:`~hetsched.formulations.budget.HIGHS_NODES_PER_UNIT` nodes; an LP has no
limit) and the budget is charged ``nodes / HIGHS_NODES_PER_UNIT`` units. Every engine is
called once per solve: a start that the engine rejects, a crash or a limit never leads to
a second solve.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import time
from importlib import metadata
from types import ModuleType

import numpy as np

from hetsched.core.log_levels import solve_log_level
from hetsched.core.result import Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import SolverResult, call_word
from hetsched.formulations.mip.engine import EngineRun, Limits, RunKind, finish
from hetsched.formulations.mip.model import MatrixBuilder, MatrixModel, Vector
from hetsched.formulations.mip.result import MipSettings

log = logging.getLogger(__name__)

#: The engines, in the order they are preferred.
ENGINES = ("highs", "cbc", "scip")
#: The module and the distribution (for its version) behind each engine.
_MODULES = {"highs": "hetsched.formulations.mip.highs", "cbc": "hetsched.formulations.mip.cbc",
            "scip": "hetsched.formulations.mip.scip"}
_IMPORTS = {"highs": "highspy", "cbc": "cbcbox", "scip": "pyscipopt"}
_DISTRIBUTIONS = {"highs": "highspy", "cbc": "cbcbox", "scip": "PySCIPOpt"}
#: Exact optimum, one thread, seed 0.
DEFAULT_SETTINGS = MipSettings()
#: Wall seconds an engine needs before it does anything useful (CBC: start a process and
#: read an MPS file; SCIP: write and read one). A wall-clock budget with less left is not
#: handed to the engine: the start (if any) is returned, as after a time limit.
STARTUP_S = {"highs": 0.01, "cbc": 0.2, "scip": 0.2}


class EngineUnavailableError(RuntimeError):
    """The engine's package is not installed."""


def available_engines() -> tuple[str, ...]:
    """The engines whose package is installed (nothing is imported)."""
    return tuple(e for e in ENGINES if importlib.util.find_spec(_IMPORTS[e]) is not None)


@functools.cache
def engine_version(engine: str) -> str | None:
    """The installed version of ``engine``'s package, ``None`` if it is not installed
    (looked up once per process: reading package metadata costs a millisecond, and a
    rolling policy solves thousands of models)."""
    try:
        return metadata.version(_DISTRIBUTIONS[engine])
    except metadata.PackageNotFoundError:
        return None


def _engine_module(engine: str) -> ModuleType:
    if engine not in _MODULES:
        raise ValueError(f"unknown MILP engine {engine!r} (expected one of {', '.join(ENGINES)})")
    if importlib.util.find_spec(_IMPORTS[engine]) is None:
        raise EngineUnavailableError(f"the {engine} engine needs the {_DISTRIBUTIONS[engine]} "
                                     f"package, which is not installed (pip install "
                                     f"'hetsched[{engine}]')")
    return importlib.import_module(_MODULES[engine])


def _checked_start(model: MatrixModel, start: Vector | None) -> Vector | None:
    if start is None:
        return None
    values = np.asarray(start, dtype=np.float64)
    if values.shape != (model.num_cols,):
        raise ValueError(f"a start must give all {model.num_cols} columns, got shape "
                         f"{values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("a start must be finite")
    return values


def solve_mip(model: MatrixModel, engine: str, budget: Budget,
              settings: MipSettings = DEFAULT_SETTINGS, start: Vector | None = None
              ) -> SolverResult:
    """Minimise ``model`` on ``engine`` within ``budget``, from ``start`` (a full vector
    of values, or ``None``). Raises ValueError (unknown engine, start of the wrong length
    or not finite) or :class:`EngineUnavailableError` before solving; every other failure is
    an ERROR outcome with the message in ``detail``."""
    module = _engine_module(engine)
    checked = _checked_start(model, start)
    began = time.monotonic()
    if model.num_cols == 0:
        return _without_columns(model, engine, began)
    limits = Limits.from_budget(budget, model)
    detail = {"engine": engine, "version": engine_version(engine), "budget": budget.kind,
              **limits.describe()}
    left = None if budget.deterministic else budget.for_solver()
    try:
        if left is not None and left < STARTUP_S[engine]:
            run: EngineRun = EngineRun(RunKind.LIMIT, "not started", message=(
                f"{left:.3f} s left, less than {engine} needs to start"))
        else:
            run = module.solve(model, limits, settings, checked)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except Exception as exc:
        log.exception("%s failed", engine)
        run = EngineRun(RunKind.ERROR, "exception", message=f"{type(exc).__name__}: {exc}")
    run.detail = {**detail, **run.detail}
    result = finish(model, run, settings, checked, began)
    budget.charge(result.work)
    log.log(solve_log_level(), "%s: %s objective %s bound %s in %.2f s (%s nodes)",
            engine, call_word(result.outcome), result.objective, result.bound, result.wall_s,
            result.detail.get("nodes"))
    return result


def _without_columns(model: MatrixModel, engine: str, began: float) -> SolverResult:
    """A model without columns: every row's activity is 0 (no engine is called)."""
    feasible = bool(np.all(model.row_lower <= 0.0) and np.all(model.row_upper >= 0.0))
    detail = {"engine": engine, "engine_status": "no columns", "nodes": 0}
    if not feasible:
        return SolverResult(Status.INFEASIBLE, wall_s=time.monotonic() - began, detail=detail)
    return SolverResult(Status.OPTIMAL, model.offset, model.offset, np.zeros(0),
                     time.monotonic() - began, detail=detail)


__all__ = [
    "DEFAULT_SETTINGS",
    "ENGINES",
    "EngineUnavailableError",
    "MatrixBuilder",
    "MatrixModel",
    "MipSettings",
    "SolverResult",
    "Status",
    "available_engines",
    "engine_version",
    "solve_mip",
]
