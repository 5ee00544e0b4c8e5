"""Policies: exact models and heuristics behind one interface.

A policy turns an :class:`~hetsched.data.Instance` into a
:class:`~hetsched.result.Result`. The registry maps a policy's name to where it is
defined, and imports it only when it is asked for, so a back-end that is not
used is never imported.
"""

from __future__ import annotations

import importlib
from typing import ClassVar, Protocol

from hetsched.data import Instance
from hetsched.errors import InputError
from hetsched.formulations.options import MAX_SEED, MAX_THREADS, SolveOptions
from hetsched.result import Result

__all__ = ["MAX_SEED", "MAX_THREADS", "REGISTRY", "Policy", "SolveOptions", "available",
           "get_policy"]

class Policy(Protocol):
    """A scheduler: exact model or heuristic."""

    name: ClassVar[str]
    #: Back-ends it can run on, the default first; empty for a pure heuristic.
    backends: ClassVar[tuple[str, ...]]
    #: The time limit (s) used when the caller gives none (``None``: no limit).
    default_time_limit_s: ClassVar[float | None]

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job of ``instance``; ``runtime_s`` and metrics are filled in by
        :func:`hetsched.solve`."""
        ...


#: name -> "module:Class"
REGISTRY: dict[str, str] = {
    "fifo": "hetsched.policies.fifo:FifoPolicy",
    "deadline": "hetsched.policies.deadline:DeadlinePolicy",
    "allox": "hetsched.policies.allox:AlloxPolicy",
    "topology": "hetsched.policies.topology:TopologyPolicy",
}


def available() -> list[str]:
    """Names of every registered policy."""
    return sorted(REGISTRY)


def get_policy(name: str) -> Policy:
    """A fresh policy object for ``name``; an unknown name lists the available ones."""
    if name not in REGISTRY:
        raise InputError("unknown model", path="--model", value=name,
                         expected="one of " + ", ".join(available()))
    module_name, _, class_name = REGISTRY[name].partition(":")
    policy: Policy = getattr(importlib.import_module(module_name), class_name)()
    return policy
