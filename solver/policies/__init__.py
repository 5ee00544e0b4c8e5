"""Policies: exact models and heuristics behind one interface.

A policy turns an :class:`~solver.data.Instance` into a
:class:`~solver.result.Result`. The registry maps a policy's name to where it is
defined, and imports it only when it is asked for, so a back-end that is not
used is never imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from formulations.budget import Budget
from solver.data import Instance
from solver.errors import InputError
from solver.result import Result, Schedule


@dataclass(frozen=True)
class SolveOptions:
    """Settings every policy accepts; a heuristic ignores what it has no use for.

    ``budget`` is the one budget of the whole solve (made by :func:`solver.solve` from
    ``time_limit_s`` and ``deterministic``; every phase of a policy consults it), ``gap``
    is the relative gap at which a solver may stop, ``warm_start`` a schedule to start
    from.
    """

    backend: str | None = None
    time_limit_s: float | None = None
    #: the time limit counts deterministic work units instead of wall seconds
    deterministic: bool = False
    budget: Budget | None = None
    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    warm_start: Schedule | None = None
    #: deadline model: first objective term, "missed" (count) or "tardiness" (weighted, s)
    deadline_objective: str = "missed"
    #: allox: fraction of users (least attained service first) whose jobs enter a matching
    alpha: float = 1.0
    #: how GPUs inside a node are chosen after the model: "first-fit" (lowest free index)
    #: or "topology" (the exact placement model, see docs/topology.md)
    placement: str = "first-fit"
    #: deadline model: job id -> the only node it may run on (the rolling policy pins the
    #: running jobs to where they run)
    pinned_nodes: Mapping[str, str] | None = None


class Policy(Protocol):
    """A scheduler: exact model or heuristic."""

    name: ClassVar[str]
    #: Back-ends it can run on, the default first; empty for a pure heuristic.
    backends: ClassVar[tuple[str, ...]]
    #: The time limit (s) used when the caller gives none (``None``: no limit).
    default_time_limit_s: ClassVar[float | None]

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job of ``instance``; ``runtime_s`` and metrics are filled in by
        :func:`solver.solve`."""
        ...


#: name -> "module:Class"
REGISTRY: dict[str, str] = {
    "fifo": "solver.policies.fifo:FifoPolicy",
    "deadline": "solver.policies.deadline:DeadlinePolicy",
    "allox": "solver.policies.allox:AlloxPolicy",
    "topology": "solver.policies.topology:TopologyPolicy",
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
