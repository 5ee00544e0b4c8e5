"""The versions of the solvers and numerical libraries a result was computed with."""

from __future__ import annotations

from functools import cache
from importlib import metadata

#: Distributions whose version can change a result (solvers, then numerics).
DISTRIBUTIONS = ("hetsched", "ortools", "highspy", "cbcbox", "pyscipopt", "pulp", "numpy",
                 "scipy")


@cache
def solver_versions() -> dict[str, str]:
    """``{distribution: version}`` of every installed distribution of
    :data:`DISTRIBUTIONS` (recorded in ``summary.json`` and ``bench.json``)."""
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
