"""The parameters of ``progress`` (:mod:`hetsched.policies.progress`) and its variants, with
the settings tuned for ``progress-elastic``. Light: the registry holds them."""

from __future__ import annotations

from dataclasses import dataclass

from hetsched.core.errors import InputError
from hetsched.core.settings import DECISION_LIMIT, RESTART_PENALTY_S
from hetsched.policies.backends import DEFAULT_BACKEND, MIP
from hetsched.policies.params import (
    check_backend,
    check_flag,
    check_non_negative,
    check_positive,
)

__all__ = ["ELASTIC", "ELASTIC_GPU_PRICE", "ELASTIC_SPEEDUP_EXPONENT", "ProgressParams",
           "hesrpt_weight"]


@dataclass(frozen=True)
class ProgressParams:
    """``progress``'s settings (the policy's notes: :mod:`hetsched.policies.progress`).

    ``round_s``: the round (s); ``horizon_s``: the time (s) over which a restart must pay
    back its penalty; ``restart_penalty_s``: the penalty a restart or migration costs (the
    simulator's); ``urgent_slack``: a deadline job is urgent once its slack is at most
    this many times its remaining time plus a round (``inf``: as soon as it arrives);
    ``critical_rounds``: an urgent option whose slack is under this many rounds gets
    twice the lift (it must run now);
    ``rho_bound``: finish-time fairness kept as a deadline: a job must finish by
    ``arrival + rho_bound * work / isolated speed`` (its speed with 1/N of the cluster, N
    the average number of active jobs since it arrived: rho as
    :func:`hetsched.core.fairness.finish_time_fairness` counts it). Once that is near as
    ``urgent_slack`` says, its options are urgent, and critical when under
    ``critical_rounds`` rounds or past; unlike a deadline, a bound already missed keeps
    the job urgent, as it is the one max rho counts (None: no bound);
    ``backend``, ``time_limit_s``, ``deterministic``: the MILP engine and its budget per
    decision (work units when deterministic); ``gap``: the relative gap at which a
    round's MILP may stop (``None``: the model's,
    :data:`hetsched.formulations.progress.milp.ROUND_GAP`, 1e-6; docs/scale.md measures
    1e-4); ``pairing``: two whole jobs of one GPU may
    also run packed on one GPU, at their measured co-location speeds, when the MILP
    finds the pair worth more than the two apart (``progress-packed``,
    :mod:`hetsched.policies.pairing`);
    ``plan_ahead``: a job whose speed changes as it progresses (an elastic job's epochs,
    docs/elastic.md) is planned with its rate over the next ``horizon_s`` from where it is
    instead of its whole-life rate; ``gpu_price``: the value of an option on ``n`` GPUs of
    a type with ``G`` is divided by ``1 + gpu_price * behind * n / G``, ``behind`` the
    active jobs with more time left (on their fastest options) than this one: GPU time a
    job takes delays each of them by ``1 / G`` of it, so a job grows only while its
    speed-up is worth that (at ``gpu_price`` 1, with a power-law speed-up ``n^p``, close to
    the share heSRPT gives the shortest job, Berg et al. 2020; docs/elastic.md); 0: off.
    ``speedup_exponent``: while nobody waits, the round is valued as heSRPT shares the
    cluster among jobs whose speed-up is ``n ** speedup_exponent`` (Berg et al. 2020,
    optimal for average JCT when no job arrives): of the ``m`` active jobs, the one with
    ``i - 1`` jobs of more time left than it (the shortest: ``i = m``) has the share
    ``theta_i = (i/m)^c - ((i-1)/m)^c``, ``c = 1 / (1 - p)``, and an option is worth
    ``w_j * theta_i^(1-p) * speed / (its speed on its fewest GPUs)``, so that the MILP's
    optimum over continuous counts with that speed-up is heSRPT's shares
    (:func:`hesrpt_weight`; ``gpu_price`` then does not apply;
    jobs such a round stopped do not count as waiting); while an elastic job runs every
    round boundary is then a decision, so heSRPT's round follows the last waiting job's
    start even when no GPU is free; None: off (docs/elastic.md).
    ``plan_ahead`` changes nothing for jobs at a fixed speed; ``gpu_price`` and
    ``speedup_exponent`` reorder any jobs, hence off by default (:data:`ELASTIC` sets all
    three, with 120 s rounds and horizon)."""

    round_s: float = 1800.0
    horizon_s: float = 360.0
    restart_penalty_s: float = RESTART_PENALTY_S
    urgent_slack: float = 0.5
    critical_rounds: float = 2.0
    rho_bound: float | None = None
    backend: str = DEFAULT_BACKEND
    time_limit_s: float | None = DECISION_LIMIT
    deterministic: bool = True
    gap: float | None = None
    pairing: bool = False
    plan_ahead: bool = False
    gpu_price: float = 0.0
    speedup_exponent: float | None = None

    def __post_init__(self) -> None:
        check_positive(self.round_s, "round_s", "a number of seconds")
        check_positive(self.horizon_s, "horizon_s", "a number of seconds")
        check_non_negative(self.restart_penalty_s, "restart_penalty_s", "a number of seconds")
        check_non_negative(self.urgent_slack, "urgent_slack", "a multiple of the time left",
                           finite=False)
        check_non_negative(self.critical_rounds, "critical_rounds", "a number of rounds",
                           finite=False)
        if self.rho_bound is not None:
            check_positive(self.rho_bound, "rho_bound", "a finish-time fairness ratio")
        check_backend(self, self.backend)
        if self.gap is not None and (isinstance(self.gap, bool)
                                     or not isinstance(self.gap, int | float)
                                     or not 0 <= self.gap < 1):
            raise InputError("bad gap", path="gap", value=self.gap,
                             expected="a relative gap in [0, 1)")
        check_flag(self.pairing, "pairing")
        check_flag(self.plan_ahead, "plan_ahead")
        check_non_negative(self.gpu_price, "gpu_price", "a price per GPU share")
        if self.speedup_exponent is not None and (
                isinstance(self.speedup_exponent, bool)
                or not isinstance(self.speedup_exponent, int | float)
                or not 0 < self.speedup_exponent < 1):
            raise InputError("bad speedup_exponent", path="speedup_exponent",
                             value=self.speedup_exponent,
                             expected="a number between 0 and 1 (exclusive), or none")

    @property
    def name(self) -> str:
        """``progress-packed`` with pairing, ``progress-elastic`` with any of the elastic
        settings, else ``progress``."""
        if self.pairing:
            return "progress-packed"
        if self.plan_ahead or self.gpu_price > 0 or self.speedup_exponent is not None:
            return "progress-elastic"
        return "progress"

    backends = MIP


#: ``progress-elastic``'s GPU price (``gpu_price``, docs/elastic.md): of 0.125 to 2, the
#: one with the least average JCT on Pollux's 8 workloads at load 1.0
#: (benchmarks/history/elastic.md).
ELASTIC_GPU_PRICE = 0.25
#: ``progress-elastic``'s speed-up exponent (``speedup_exponent``, the heSRPT shares while
#: nobody waits, docs/elastic.md): imagenet's, which makes most of the average JCT, 4 to
#: 64 GPUs late in training (x 13.3 for 16 times the GPUs, 0.93); the other exponents
#: measured are in benchmarks/history/elastic.md.
ELASTIC_SPEEDUP_EXPONENT = 0.9
#: ``progress-elastic``: 120 s rounds and horizon, each job planned with its rate over the
#: horizon, GPU time priced by the jobs it delays, heSRPT's shares while nobody waits.
ELASTIC = ProgressParams(round_s=120.0, horizon_s=120.0, plan_ahead=True,
                         gpu_price=ELASTIC_GPU_PRICE,
                         speedup_exponent=ELASTIC_SPEEDUP_EXPONENT)


def hesrpt_weight(rank: int, jobs: int, exponent: float) -> float:
    """The worth per unit of speed-up of the ``rank``-th shortest of ``jobs`` active jobs
    (1: the shortest) under :class:`Progress`'s ``speedup_exponent`` ``p``:
    ``theta^(1-p)`` of heSRPT's share ``theta = (i/m)^c - ((i-1)/m)^c`` of the job with
    ``i - 1 = jobs - rank`` jobs of more time left, ``c = 1 / (1 - p)`` (Berg,
    Harchol-Balter et al., "heSRPT", 2020). Maximising ``sum_j a_j n_j^p`` under ``sum_j
    n_j = G`` gives ``n_j`` proportional to ``a_j^c``: with ``a = theta^(1-p)``, heSRPT's
    shares. Computed as ``(i/m) * (1 - (1 - 1/i)^c)^(1-p)``, the same since ``c (1-p) =
    1``, without underflow for the longest jobs."""
    i = jobs - rank + 1
    c = 1.0 / (1.0 - exponent)
    return float(i / jobs * (1.0 - (1.0 - 1.0 / i) ** c) ** (1.0 - exponent))
