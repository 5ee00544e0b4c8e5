"""The one table of back-ends: which solvers each built-in policy that solves a model runs
on, its default first. The registry's entries, the planners' ``backends``, the command's
``--backend`` choices and the tests' back-end option all read it (docs/architecture.md).
The engines themselves are the formulations' (:data:`hetsched.formulations.mip.ENGINES`
for the MILPs, CP-SAT for the constraint models, ``matching`` for AlloX's assignment)."""

from __future__ import annotations

from hetsched.core.errors import InputError
from hetsched.formulations.mip import ENGINES as MIP
from hetsched.formulations.mip import available_engines

__all__ = ["BACKENDS", "BACKENDS_OF", "EXTRA_OF", "MIP", "check_installed"]

#: Each policy's back-ends, the default first.
BACKENDS_OF: dict[str, tuple[str, ...]] = {
    "deadline": ("cpsat", *MIP),
    "allox": ("matching", *MIP),
    "topology": ("cpsat", *MIP),
    "gavel": MIP,
    "gavel-water-filling": ("highs",),
    "gavel-water-filling-gpus": ("highs",),
    "gavel-max-sum": MIP,
    "gavel-max-sum-raw": MIP,
    "ftf": ("highs",),
    "min-total-duration": ("highs",),
    "max-throughput-per-cost": ("highs",),
    "max-throughput-per-cost-raw": ("highs",),
    "progress": MIP,
    "progress-packed": MIP,
    "progress-elastic": MIP,
    "gavel-packed": ("highs",),
    "ftf-packed": ("highs",),
    "min-total-duration-packed": ("highs",),
    "max-throughput-per-cost-packed": ("highs",),
    "gavel-water-filling-packed": ("highs",),
}
#: Every back-end of the table, each once.
BACKENDS: tuple[str, ...] = tuple(dict.fromkeys(
    backend for backends in BACKENDS_OF.values() for backend in backends))
#: The back-ends that come with an extra of the distribution, not with the lean install.
EXTRA_OF = {"cbc": "cbc", "scip": "scip"}


def check_installed(backend: str | None, path: str = "backend") -> None:
    """An :class:`InputError` naming the extra to install when ``backend`` is an engine
    whose package is missing (``pip install 'hetsched[cbc]'``); nothing is imported."""
    if backend in EXTRA_OF and backend not in available_engines():
        raise InputError(f"the {backend} back-end is not installed", path=path, value=backend,
                         expected=f"pip install 'hetsched[{EXTRA_OF[backend]}]' (or -e "
                         f"\".[{EXTRA_OF[backend]}]\" in a checkout), or another back-end: "
                         + ", ".join(b for b in BACKENDS if b not in EXTRA_OF
                                     or b in available_engines()))
