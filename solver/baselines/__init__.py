"""Heuristic baseline policies of the field, as rolling policies (``decide(state)``).

``sjf``, ``srtf`` (predicted durations), ``edf``, ``tiresias`` (NSDI 2019), ``gandiva``
(OSDI 2018), ``gavel`` and ``gavel-max-sum`` (OSDI 2020; its LP is
``hetsched.formulations.gavel``), ``optimus`` (EuroSys 2018); any policy name with ``-agnostic``
sees every GPU type as fast as the slowest (:mod:`hetsched.baselines.agnostic`). Each is
described in docs/policies.md: source, simplifications, starvation guard, parameters.
"""

from __future__ import annotations

import importlib
from typing import Any

from hetsched.baselines.agnostic import AGNOSTIC_SUFFIX, AgnosticView, HeterogeneityAgnostic
from hetsched.rolling import RollingPolicy

#: name -> ("module:Class", keyword arguments)
BASELINES: dict[str, tuple[str, dict[str, Any]]] = {
    "sjf": ("hetsched.baselines.duration:ShortestJobFirst", {}),
    "srtf": ("hetsched.baselines.duration:ShortestRemainingTimeFirst", {}),
    "edf": ("hetsched.baselines.deadline_first:EarliestDeadlineFirst", {}),
    "tiresias": ("hetsched.baselines.tiresias:Tiresias", {}),
    "gandiva": ("hetsched.baselines.gandiva:Gandiva", {}),
    "gavel": ("hetsched.baselines.gavel:Gavel", {"objective": "max-min"}),
    "gavel-max-sum": ("hetsched.baselines.gavel:Gavel", {"objective": "max-sum"}),
    "optimus": ("hetsched.baselines.optimus:Optimus", {}),
}

__all__ = ["AGNOSTIC_SUFFIX", "BASELINES", "AgnosticView", "HeterogeneityAgnostic",
           "make_baseline"]


def make_baseline(name: str, *, backend: str | None = None,
                  time_limit_s: float | None = None, deterministic: bool = False,
                  **options: Any) -> RollingPolicy:
    """A fresh baseline policy called ``name`` (a key of :data:`BASELINES`); ``backend``,
    ``time_limit_s`` and ``deterministic`` (the limit counts work units) reach the
    policies that solve a model (``gavel``: ``highs``, ``cbc`` or ``scip``), ``options``
    override the policy's parameters."""
    target, preset = BASELINES[name]
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    kwargs = {**preset, **options}
    if class_name == "Gavel":
        kwargs.setdefault("backend", backend if backend in ("highs", "cbc", "scip")
                          else "highs")
        kwargs.setdefault("time_limit_s", time_limit_s)
        kwargs.setdefault("deterministic", deterministic)
    policy: RollingPolicy = cls(**kwargs)
    return policy
