"""The one table of back-ends: which solvers each built-in policy that solves a model runs
on, its default first. The registry's entries, the planners' ``backends``, the command's
``--backend`` choices and the tests' back-end option all read it (docs/architecture.md).
The engines themselves are the formulations' (:data:`hetsched.formulations.mip.ENGINES`
for the MILPs, CP-SAT for the constraint models, ``matching`` for AlloX's assignment)."""

from __future__ import annotations

from hetsched.formulations.mip import ENGINES as MIP

__all__ = ["BACKENDS", "BACKENDS_OF", "MIP"]

#: Each policy's back-ends, the default first.
BACKENDS_OF: dict[str, tuple[str, ...]] = {
    "deadline": ("cpsat", *MIP),
    "allox": ("matching", *MIP),
    "topology": ("cpsat", *MIP),
    "gavel": MIP,
    "gavel-max-sum": MIP,
    "progress": MIP,
}
#: Every back-end of the table, each once.
BACKENDS: tuple[str, ...] = tuple(dict.fromkeys(
    backend for backends in BACKENDS_OF.values() for backend in backends))
