"""The back-ends of the models policies solve, by the kind of model, the default first: the
registry's entries (and the parameters records of the rolling policies that solve a
model), the planners' ``backends``, the command's ``--backend`` choices and the tests'
back-end option read these tuples; a policy's name is written in the registry only.
The engines themselves are the formulations' (:data:`hetsched.formulations.mip.ENGINES`
for the MILPs, CP-SAT for the constraint models, ``matching`` for AlloX's assignment)."""

from __future__ import annotations

from hetsched.core.errors import InputError
from hetsched.formulations.mip import ENGINES as MIP
from hetsched.formulations.mip import available_engines

__all__ = ["BACKENDS", "CPSAT_OR_MIP", "DEFAULT_BACKEND", "EXTRA_OF", "HIGHS_ONLY",
           "MATCHING_OR_MIP", "MIP", "check_installed"]

#: The back-end of a policy's model unless told otherwise: HiGHS, in the lean install.
DEFAULT_BACKEND = "highs"
#: The LPs built as arrays for HiGHS alone (no PuLP model).
HIGHS_ONLY: tuple[str, ...] = (DEFAULT_BACKEND,)
#: A constraint model (``deadline``, ``topology``): CP-SAT, or its MILP on a MILP engine.
CPSAT_OR_MIP: tuple[str, ...] = ("cpsat", *MIP)
#: AlloX's assignment: a min-cost matching, or its MILP on a MILP engine.
MATCHING_OR_MIP: tuple[str, ...] = ("matching", *MIP)
#: Every back-end, each once.
BACKENDS: tuple[str, ...] = tuple(dict.fromkeys((*CPSAT_OR_MIP, *MATCHING_OR_MIP, *MIP,
                                                  *HIGHS_ONLY)))
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
