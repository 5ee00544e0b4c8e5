"""Gavel's family: each policy's parameters record
(:mod:`hetsched.policies.baselines.gavel_params`) mapped, in one place, to the objective
its allocation is solved by (:mod:`hetsched.policies.baselines.gavel_objectives`), alone
in :class:`~hetsched.policies.baselines.gavel.Gavel`'s rounds or packed in
:class:`~hetsched.policies.baselines.gavel_packed.GavelPacked`'s."""

from __future__ import annotations

from concurrent.futures import Executor

from hetsched.policies.baselines.fifo_fastest import FifoFastest
from hetsched.policies.baselines.finish_time import FinishTime
from hetsched.policies.baselines.gavel_objectives import (
    GavelObjective,
    MaxMinOrSum,
    WaterFilling,
)
from hetsched.policies.baselines.gavel_params import (
    CostParams,
    DurationParams,
    FifoFastestParams,
    FinishTimeParams,
    GavelParams,
    IsolatedParams,
    PackedParams,
    RoundsParams,
)
from hetsched.policies.baselines.isolated import Isolated
from hetsched.policies.baselines.min_total_duration import MinTotalDuration
from hetsched.policies.baselines.throughput_per_cost import ThroughputPerCost


def objective_of(params: RoundsParams | PackedParams, executor: Executor | None = None
                 ) -> GavelObjective:
    """The objective of the policy ``params`` make (``executor``: POP's sub-problems side by
    side, for ``gavel`` with partitions)."""
    match params:
        case GavelParams(water_filling=False):
            return MaxMinOrSum(params.objective, backend=params.backend,
                               partitions=params.partitions, spare=params.spare,
                               executor=executor)
        case GavelParams():
            return WaterFilling("gpus" if params.water_filling == "gpus" else "throughput",
                                hierarchical=params.hierarchical)
        case FinishTimeParams():
            return FinishTime(params.spare)
        case DurationParams():
            return MinTotalDuration(params.spare)
        case CostParams():
            return ThroughputPerCost(params.prices or {}, meet_deadlines=params.meet_deadlines,
                                     normalized=params.normalized)
        case IsolatedParams():
            return Isolated()
        case FifoFastestParams():
            return FifoFastest()
        case PackedParams(objective="max-min"):
            return MaxMinOrSum("max-min", spare=params.spare)
        case PackedParams(objective="fifo"):
            return FifoFastest(params.packing_threshold)
        case PackedParams(objective="finish-time"):
            return FinishTime()
        case PackedParams(objective="min-total-duration"):
            return MinTotalDuration(params.spare)
        case PackedParams(objective="cost"):
            return ThroughputPerCost(params.prices or {}, meet_deadlines=params.meet_deadlines,
                                     normalized=params.normalized)
        case PackedParams(objective="water-filling"):
            return WaterFilling()
    raise AssertionError(f"no objective for {params!r}")  # (the records check theirs)
