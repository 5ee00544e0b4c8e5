"""Heuristic baseline policies of the field, as rolling policies (``decide(state)``).

``sjf``, ``qssf`` (Helios, SC'21), ``srtf`` (predicted durations), ``edf``, ``tiresias``
(NSDI 2019), ``gandiva`` (OSDI 2018), ``gavel`` and ``gavel-max-sum`` (OSDI 2020; its LP is
``hetsched.formulations.gavel``) and Gavel's other policies (``fifo-fastest``,
``min-total-duration``, ``max-throughput-per-cost``, ``isolated``), ``optimus`` (EuroSys
2018); any policy name with
``-agnostic`` sees every GPU type as fast as the slowest
(:mod:`hetsched.policies.baselines.agnostic`). They are found by name in :mod:`hetsched.registry`;
each is described in docs/policies.md: source, simplifications, starvation guard,
parameters.
"""

from __future__ import annotations

from hetsched.policies.baselines.agnostic import (
    AGNOSTIC_SUFFIX,
    AgnosticView,
    HeterogeneityAgnostic,
)

__all__ = ["AGNOSTIC_SUFFIX", "AgnosticView", "HeterogeneityAgnostic"]
