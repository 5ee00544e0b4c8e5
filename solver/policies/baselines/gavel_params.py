"""The parameters of Gavel's family (:mod:`hetsched.policies.baselines.gavel`: an
allocation realised in rounds; :mod:`hetsched.policies.baselines.gavel_packed`: packed,
in Gavel's own rounds), one frozen record per registered policy, each with its defaults
and cross-checks. Light: the registry holds them; the solvers are imported only by the
policies (:mod:`hetsched.policies.baselines.gavel_family` maps a record to its
objective)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, TypeAlias

from hetsched.core.errors import InputError
from hetsched.core.prices import check_prices
from hetsched.core.settings import DECISION_LIMIT
from hetsched.policies.backends import DEFAULT_BACKEND, HIGHS_ONLY, MIP
from hetsched.policies.params import (
    ROUND_S,
    check_backend,
    check_choice,
    check_flag,
    check_positive,
)

__all__ = ["MAX_PARTITIONS", "OBJECTIVE_NAMES", "PACKED_NAMES", "ROUNDS", "ROUND_S",
           "STARVATION_ROUNDS", "CostParams", "DurationParams", "FifoFastestParams",
           "FinishTimeParams", "GavelParams", "IsolatedParams", "PackedParams",
           "RoundsParams"]

#: The starvation guard: a job waiting this many rounds since it last ran goes first.
STARVATION_ROUNDS = 20.0
#: The most POP partitions (``--partitions``).
MAX_PARTITIONS = 256
#: Gavel's ``minimum_time_between_allocation_resets`` (s): with ``rounds="gavel"``, the
#: least time between two resets of the time received (and solves of the LP).
GAVEL_RESET_INTERVAL_S = 1920.0
#: Whose rounds realise an allocation (``rounds``).
ROUNDS = ("hetsched", "gavel")
#: ``gavel``'s objectives (``objective``) and the policy's name for each.
OBJECTIVE_NAMES = MappingProxyType({"max-min": "gavel", "max-sum": "gavel-max-sum",
                                    "max-sum-raw": "gavel-max-sum-raw"})
#: The packed allocations (``PackedParams.objective``) and the policy's name for each.
PACKED_NAMES = MappingProxyType({
    "max-min": "gavel-packed", "fifo": "fifo-packed", "finish-time": "ftf-packed",
    "min-total-duration": "min-total-duration-packed",
    "cost": "max-throughput-per-cost-packed", "water-filling": "gavel-water-filling-packed"})
#: ``spare`` of ``ftf``: how the allocation gives out what the worst job does not need.
FINISH_TIME_SPARE = ("auto", "greedy", "central", "lp")
#: ``spare`` of ``min-total-duration``: which allocation of least makespan.
DURATION_SPARE = ("two-stage", "central", "gavel")


def _check_rounds(round_s: float, starvation_rounds: float, work_conserving: bool,
                  rounds: str, reset_interval_s: float) -> None:
    """The settings of the rounds that realise an allocation."""
    check_positive(round_s, "round_s", "a number of seconds")
    check_positive(reset_interval_s, "reset_interval_s", "a number of seconds")
    check_positive(starvation_rounds, "starvation_rounds", "a number of rounds", finite=False)
    check_flag(work_conserving, "work_conserving")
    check_choice(rounds, "rounds", ROUNDS)


def _prices(prices: Mapping[str, float] | None) -> Mapping[str, float]:
    """Prices given (USD per GPU-hour by GPU type), checked and read-only."""
    return MappingProxyType(check_prices(prices or {}))


@dataclass(frozen=True)
class GavelParams:
    """``gavel`` and its variants (:class:`~hetsched.policies.baselines.gavel.Gavel`'s
    notes): ``objective`` max-min fairness (``max-min``), max-sum throughput relative to
    each job's equal share (``max-sum``) or Gavel's raw steps/s (``max-sum-raw``); the
    rounds: ``round_s`` long, a job waiting ``starvation_rounds`` rounds since it last
    ran first, GPUs left over to waiting jobs (``work_conserving``), hetsched's or
    Gavel's simulator's (``rounds``; in Gavel's, the LP solved again and the time
    received reset at most every ``reset_interval_s``); ``partitions``: POP's number of
    sub-problems (1: the monolithic LP); ``water_filling``: max-min by water-filling of
    normalised rates (``True``) or of GPUs held (``"gpus"``), over tenants then their jobs
    (``hierarchical``; off: every job keeps the weight it is shown with); ``spare``:
    max-min's slack above the floor by the greatest sum of rho (``two-stage``) or an
    interior optimum as ECOS returns for Gavel (``central``); ``keep_whole``: hetsched's
    rounds take the jobs whose allocation is all of their time first, each kept on the
    type it runs on while it has had no more than its share there; ``backend``,
    ``time_limit_s`` (per solve), ``deterministic`` (work units): the LP's solver."""

    objective: str = "max-min"
    round_s: float = ROUND_S
    backend: str = DEFAULT_BACKEND
    time_limit_s: float | None = DECISION_LIMIT
    deterministic: bool = True
    starvation_rounds: float = STARVATION_ROUNDS
    partitions: int = 1
    work_conserving: bool = True
    rounds: str = "hetsched"
    reset_interval_s: float = GAVEL_RESET_INTERVAL_S
    water_filling: bool | str = False
    hierarchical: bool = True
    spare: str = "two-stage"
    keep_whole: bool = False

    def __post_init__(self) -> None:
        _check_rounds(self.round_s, self.starvation_rounds, self.work_conserving,
                      self.rounds, self.reset_interval_s)
        check_choice(self.objective, "objective", OBJECTIVE_NAMES)
        check_choice(self.water_filling, "water_filling", (False, True, "gpus"),
                     expected="true, false or \"gpus\"")
        check_backend(self, self.backend)
        if isinstance(self.partitions, bool) or not isinstance(self.partitions, int) or not (
                1 <= self.partitions <= MAX_PARTITIONS):
            raise InputError("bad number of partitions", path="partitions",
                             value=self.partitions,
                             expected=f"an integer from 1 to {MAX_PARTITIONS}")
        if self.partitions > 1 and self.backend not in HIGHS_ONLY:
            raise InputError("POP partitions run on highs only", path="partitions",
                             value=self.partitions, expected=f"1 with backend {self.backend}")
        if self.water_filling and (self.objective != "max-min" or self.partitions > 1):
            raise InputError("water-filling is max-min's, monolithic, on highs",
                             path="water_filling", value=self.water_filling,
                             expected="objective max-min, 1 partition, backend highs")
        check_flag(self.hierarchical, "hierarchical")
        if self.spare not in ("two-stage", "central") or (
                self.spare == "central" and (self.objective != "max-min" or self.water_filling
                                             or self.backend not in HIGHS_ONLY)):
            raise InputError("unknown spare", path="spare", value=self.spare,
                             expected="two-stage, or central (max-min on highs)")
        check_flag(self.keep_whole, "keep_whole")

    @property
    def name(self) -> str:
        """``gavel``, ``gavel-max-sum``, ``gavel-max-sum-raw``, ``gavel-water-filling`` or
        ``gavel-water-filling-gpus``."""
        if self.water_filling:
            return "gavel-water-filling" + ("-gpus" if self.water_filling == "gpus" else "")
        return OBJECTIVE_NAMES[self.objective]

    @property
    def backends(self) -> tuple[str, ...]:
        """Any MILP engine for the LP; HiGHS alone for water-filling."""
        return HIGHS_ONLY if self.water_filling else MIP


@dataclass(frozen=True)
class _LpRoundsParams:
    """What the LP policies in Gavel's rounds share: the rounds as :class:`GavelParams`',
    the LP's ``backend``, ``time_limit_s`` (per solve) and ``deterministic``."""

    name: ClassVar[str]
    backends: ClassVar[tuple[str, ...]]

    round_s: float = ROUND_S
    backend: str = DEFAULT_BACKEND
    time_limit_s: float | None = DECISION_LIMIT
    deterministic: bool = True
    starvation_rounds: float = STARVATION_ROUNDS
    work_conserving: bool = True
    rounds: str = "hetsched"
    reset_interval_s: float = GAVEL_RESET_INTERVAL_S

    def __post_init__(self) -> None:
        _check_rounds(self.round_s, self.starvation_rounds, self.work_conserving,
                      self.rounds, self.reset_interval_s)
        check_backend(self, self.backend)


@dataclass(frozen=True)
class FinishTimeParams(_LpRoundsParams):
    """``ftf`` (:mod:`hetsched.policies.baselines.finish_time`): the rounds as
    :class:`GavelParams`'; ``spare``: how the allocation gives out what the worst job
    does not need: ``lp`` (the LP iteration, whose last solve maximises the sum of
    normalised rates with every job within the optimum: exact, 3 or more LPs of a row per
    job), ``greedy`` (the optimum through capacity prices, then the pairs of most
    normalised rate per GPU first: 10 times faster at 2,000 jobs), ``auto`` (``lp`` up to
    500 active jobs, ``greedy`` above), or ``central`` (an interior optimum, as Gavel's
    conic solver returns, after the prices). All reach the same worst ratio."""

    spare: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.spare, "spare", FINISH_TIME_SPARE)

    name = "ftf"
    backends = HIGHS_ONLY


@dataclass(frozen=True)
class DurationParams(_LpRoundsParams):
    """``min-total-duration`` (:mod:`hetsched.policies.baselines.min_total_duration`): the
    rounds as :class:`GavelParams`'; ``spare``: of the allocations of least makespan, the
    second stage's (``two-stage``: the most total relative throughput), an interior one
    (``central``), or the one Gavel's bisection returns (``gavel``)."""

    spare: str = "two-stage"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.spare, "spare", DURATION_SPARE,
                     expected="two-stage, central or gavel")

    name = "min-total-duration"
    backends = HIGHS_ONLY


@dataclass(frozen=True)
class CostParams:
    """``max-throughput-per-cost`` (:mod:`hetsched.policies.baselines.throughput_per_cost`):
    ``prices``, USD per GPU-hour by GPU type over the cluster's own; ``meet_deadlines``:
    each job with a deadline gets the speed that meets it (Gavel's SLOs); ``normalized``:
    each job's throughput over its equal share (off: Gavel's raw steps/s,
    ``max-throughput-per-cost-raw``); the rounds as :class:`GavelParams`'."""

    prices: Mapping[str, float] | None = None
    meet_deadlines: bool = False
    normalized: bool = True
    round_s: float = ROUND_S
    backend: str = DEFAULT_BACKEND
    time_limit_s: float | None = DECISION_LIMIT
    deterministic: bool = True
    starvation_rounds: float = STARVATION_ROUNDS
    work_conserving: bool = True
    rounds: str = "hetsched"
    reset_interval_s: float = GAVEL_RESET_INTERVAL_S

    def __post_init__(self) -> None:
        check_backend(self, self.backend)
        _check_rounds(self.round_s, self.starvation_rounds, self.work_conserving,
                      self.rounds, self.reset_interval_s)
        object.__setattr__(self, "prices", _prices(self.prices))

    @property
    def name(self) -> str:
        """``max-throughput-per-cost``, or ``-raw`` when not ``normalized``."""
        return "max-throughput-per-cost" + ("" if self.normalized else "-raw")

    backends = HIGHS_ONLY


class _SolvesNothing:
    """A closed-form allocation: no model, so no solver settings."""

    backends: tuple[str, ...] = ()

    @property
    def time_limit_s(self) -> float | None:
        """A replay's limit per decision: nothing is solved, so nothing is limited."""
        return DECISION_LIMIT

    @property
    def deterministic(self) -> bool:
        """A replay's default: nothing is solved."""
        return True


@dataclass(frozen=True)
class IsolatedParams(_SolvesNothing):
    """``isolated`` (:mod:`hetsched.policies.baselines.isolated`): the rounds as
    :class:`GavelParams`'."""

    round_s: float = ROUND_S
    starvation_rounds: float = STARVATION_ROUNDS
    work_conserving: bool = True
    rounds: str = "hetsched"
    reset_interval_s: float = GAVEL_RESET_INTERVAL_S

    def __post_init__(self) -> None:
        _check_rounds(self.round_s, self.starvation_rounds, self.work_conserving,
                      self.rounds, self.reset_interval_s)

    name = "isolated"


@dataclass(frozen=True)
class FifoFastestParams(_SolvesNothing):
    """``fifo-fastest`` (:mod:`hetsched.policies.baselines.fifo_fastest`): the rounds as
    :class:`GavelParams`', without a starvation guard by default (FIFO has none)."""

    round_s: float = ROUND_S
    starvation_rounds: float = math.inf
    work_conserving: bool = True
    rounds: str = "hetsched"
    reset_interval_s: float = GAVEL_RESET_INTERVAL_S

    def __post_init__(self) -> None:
        _check_rounds(self.round_s, self.starvation_rounds, self.work_conserving,
                      self.rounds, self.reset_interval_s)

    name = "fifo-fastest"


#: The parameters of a policy of :class:`~hetsched.policies.baselines.gavel.Gavel`'s rounds.
RoundsParams: TypeAlias = (GavelParams | FinishTimeParams | DurationParams | CostParams
                            | IsolatedParams | FifoFastestParams)


@dataclass(frozen=True)
class PackedParams:
    """The packed policies (:mod:`hetsched.policies.baselines.gavel_packed`):
    ``objective`` (the allocation, :data:`PACKED_NAMES`): ``max-min`` (Gavel's
    ``max_min_fairness_packed``), ``fifo`` (``fifo_packed``, pairs whose rates add up to
    more than ``packing_threshold``), ``finish-time``, ``min-total-duration``, ``cost``
    (``prices``, ``normalized``, ``meet_deadlines`` as :class:`CostParams`') or
    ``water-filling``; ``spare``: for ``min-total-duration``, the interior allocation of
    least makespan (``central``) or, as Gavel's code, a point inside the allocations of
    makespan at most the one its bisection stops at (``gavel``); for ``max-min``, the
    interior optimum as Gavel's ECOS (``central``) or the floor then the greatest sum of
    normalised rates (``two-stage``); ``share_digits``: the allocation's time fractions
    are rounded to this many decimals so that the solver's noise does not decide the
    rounds' ties (``None`` keeps the LP's values, as Gavel's code does, where an entry
    the LP gives no time but for the solver's noise still gets a priority above 0);
    ``round_s``: Gavel's round; ``backend``, ``time_limit_s``, ``deterministic``: the
    LP's solver."""

    objective: str = "max-min"
    packing_threshold: float = 1.5
    prices: Mapping[str, float] | None = None
    normalized: bool = True
    meet_deadlines: bool = False
    spare: str = "central"
    share_digits: int | None = 6
    round_s: float = ROUND_S
    backend: str = DEFAULT_BACKEND
    time_limit_s: float | None = DECISION_LIMIT
    deterministic: bool = True

    def __post_init__(self) -> None:
        check_choice(self.objective, "objective", PACKED_NAMES,
                     expected="one of " + ", ".join(PACKED_NAMES))
        object.__setattr__(self, "prices", _prices(self.prices))
        if self.spare not in ("central", "gavel", "two-stage") or (
                self.spare == "two-stage" and self.objective != "max-min"):
            raise InputError("unknown spare", path="spare", value=self.spare,
                             expected="central or gavel (two-stage: objective max-min)")
        check_positive(self.round_s, "round_s", "a number of seconds")
        check_choice(self.backend, "backend", HIGHS_ONLY,
                     problem=f"policy {self.name} has no such back-end")

    @property
    def name(self) -> str:
        """The packed policy's name (:data:`PACKED_NAMES`; ``-raw`` for ``cost`` not
        ``normalized``)."""
        raw = self.objective == "cost" and not self.normalized
        return PACKED_NAMES[self.objective] + ("-raw" if raw else "")

    @property
    def backends(self) -> tuple[str, ...]:
        """HiGHS, for the LPs; none for ``fifo``, which solves nothing."""
        return () if self.objective == "fifo" else HIGHS_ONLY
