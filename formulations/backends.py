"""MILP back-ends behind one call: CBC (the ``cbc`` executable of the ``cbcbox`` package,
through PuLP's ``COIN_CMD``) and HiGHS (``highspy``, in process)."""

from __future__ import annotations

from typing import Any

import pulp

MILP_BACKENDS = ("cbc", "highs")


def milp_solver(backend: str, *, time_limit_s: float | None = None, threads: int = 1,
                gap: float = 0.0, warm_start: bool = False, msg: bool = False) -> Any:
    """A PuLP solver object for ``backend`` with a time limit (s), threads, relative gap and,
    for CBC, a warm start from the variables' initial values."""
    if backend == "cbc":
        solver = pulp.COIN_CMD(msg=msg, timeLimit=time_limit_s, threads=threads, gapRel=gap,
                               warmStart=warm_start)
        if not solver.available():
            raise RuntimeError("the CBC executable was not found: install hetsched's "
                               "dependencies (pulp[cbc] brings it)")
        return solver
    if backend == "highs":
        return pulp.HiGHS(msg=msg, timeLimit=time_limit_s, threads=threads, gapRel=gap)
    raise ValueError(f"unknown MILP back-end {backend!r}; expected one of {MILP_BACKENDS}")
