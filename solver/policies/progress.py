"""``progress``: a preemptive rolling policy that re-solves one allocation MILP over every
active job at each decision.

At every arrival and completion while jobs wait, and at the boundaries of its round, it
weighs every way each active job (running or waiting; no window) could run next: a GPU
type and a gang size, worth the share of the job's remaining work it would finish per
second,

    value(j, t, s) = w_j * speed(j, t, s) / remaining_work_j
                     * (1 - restart_s / horizon_s   if the option restarts the job),

so short jobs and jobs on the type where they gain most come first (on one GPU type it is
shortest-remaining-area first; across types it puts each job where its speed-up counts
most), and a migration or a restart must win the restart penalty back within the horizon
(the anti-thrashing term). Deadlines are handled as Hydra does: a job that can still meet
its deadline on some option is *urgent* once its slack is down to ``urgent_slack``
times its remaining time plus a round: its options that meet the deadline are worth more
per GPU than any non-urgent option, twice as much when their slack is under
``critical_rounds`` rounds, so urgent jobs are served first, the most critical first; a
job that provably cannot meet its deadline is served best-effort, like a job without one;
a job that meets its deadline where it runs is never moved. The MILP
(:mod:`hetsched.formulations.progress`) picks at most one option per job under the GPUs of
each type and the servers that hold large packed gangs; it starts from the previous
round's choice.

The chosen options become GPUs, urgent and large gangs first: a running job whose option
is where it runs keeps its GPUs; a job to start (or migrate) gets a gang by best fit, at
the full speed of its option, on free GPUs, else on the GPUs of running jobs the MILP
dropped (lowest value first); a dropped job whose GPUs nobody took keeps running. A running
job given another GPU count (an elastic job, ``Job.allowed_gpu_counts``) may also take its
own GPUs for its new gang (docs/elastic.md). Free GPUs
left over go to waiting jobs by value, on a type where starting now beats waiting for a
faster one (work conservation).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable

import numpy as np

from hetsched.allocation.layout import layout
from hetsched.core.fairness import isolated_speed
from hetsched.core.records import Job
from hetsched.core.throughput import speed_change_after
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import call_word
from hetsched.formulations.progress import RoundPlan, RoundProblem, solve_round
from hetsched.policies.contention import ContentionClock
from hetsched.policies.pairing import lone_packed, pair_options
from hetsched.policies.progress_gangs import Gangs, Option, spreadable
from hetsched.policies.progress_params import ProgressParams, hesrpt_weight
from hetsched.policies.progress_rates import RatesAhead
from hetsched.policies.progress_waiting import Valued, WaitingOptions
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RunningJob
from hetsched.policies.starting import SpeedBook, types_worth_starting

log = logging.getLogger(__name__)

#: Urgent options are worth this many times the best non-urgent value per GPU, per GPU.
URGENT_FACTOR = 4.0


class Progress(PolicyHooks):
    """The ``progress`` rolling policy (see the module docstring), with its settings
    (``params``: :class:`~hetsched.policies.progress_params.ProgressParams`)."""

    def __init__(self, params: ProgressParams | None = None) -> None:
        params = ProgressParams() if params is None else params
        #: the policy's parameters (its settings)
        self.params = params
        self.name = params.name
        self.round_s = params.round_s
        # With gpu_price or speedup_exponent: job id -> active jobs with more time left.
        self._behind: dict[str, int] = {}
        self._fewest: dict[str, float] = {}  # with speedup_exponent: its speed on fewest GPUs
        self._parked: set[str] = set()  # with speedup_exponent: jobs a heSRPT round stopped
        self._shares = False  # with speedup_exponent: this round is heSRPT's
        self._type_gpus: dict[str, int] = {}
        self.speeds = SpeedBook()
        #: elastic jobs' rates ahead, kept for the next decision
        self._aheads = RatesAhead()
        self._last: dict[str, tuple[str, int]] = {}  # job id -> chosen (type, size)
        self._rounds = 0
        self._from_milp = 0
        self._clock = ContentionClock()  # with rho_bound: the contention each job saw
        self._fair_urgent = 0  # decisions x jobs made urgent by rho_bound
        self._packed_starts = 0  # with pairing: jobs started packed
        self._waiting = WaitingOptions()  # the plain policy's waiting jobs, kept

    # -- hooks ---------------------------------------------------------------------------
    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event when nobody waits: each running job's options all grow by
        the same factor as its work shrinks, so whether it should move to a free GPU does
        not change. While jobs wait, boundaries matter: a running job's growing value may
        win it a faster type, and a type not worth starting on (a faster one was predicted
        to free) becomes worth it when the prediction was wrong. Likewise while GPUs are free
        and a running job may take more GPUs than it has (an elastic job,
        ``Job.allowed_gpu_counts``): it may grow into them; and with ``speedup_exponent``
        while an elastic job runs (:meth:`_every_round`)."""
        if state.pending or self._every_round(state):
            return -math.inf
        if state.has_free() and any(len(run.gpus) < max(run.job.gpu_counts)
                                    for run in state.running):
            return -math.inf
        return math.inf

    def _every_round(self, state: ClusterState) -> bool:
        """With ``speedup_exponent``, while an elastic job runs, every round boundary is a
        decision: heSRPT's round then comes at the first boundary nobody waits (not when a
        GPU next frees), and follows the jobs' rates as their epochs change them."""
        return self.params.speedup_exponent is not None and \
            any(len(run.job.gpu_counts) > 1 for run in state.running)

    def on_finished(self, job: Job, now: float) -> None:
        """Forget the job's last option."""
        self._last.pop(job.id, None)
        self._parked.discard(job.id)
        if self.params.rho_bound is not None:
            self._clock.finished(job.id, now)

    def figures(self) -> dict[str, object]:
        """Rounds solved, how many the MILP improved on its start (and with ``pairing``
        the jobs started packed)."""
        figures: dict[str, object] = {"progress_rounds": self._rounds,
                                      "progress_rounds_improved": self._from_milp}
        if self.params.rho_bound is not None:
            figures["progress_fair_urgent"] = self._fair_urgent
        if self.params.pairing:
            figures["progress_packed_starts"] = self._packed_starts
        if self._waiting.left_out_total:
            figures["progress_waiting_left_out"] = self._waiting.left_out_total
        return figures

    # -- deciding ------------------------------------------------------------------------
    def decide(self, state: ClusterState) -> Decision:
        """Solve the round's allocation and realise it on GPUs."""
        if self.params.rho_bound is not None:
            active = [*(r.job for r in state.running), *state.pending]
            self._clock.seen(state.now, (job.id for job in active))
            self._clock.forget_before(min((job.arrival for job in active), default=state.now))
        if not state.pending and not state.has_free() and not self._every_round(state):
            return Decision()
        bounded = self._bounded(state)
        options, value = bounded if bounded is not None else (self.options(state), None)
        if not options:
            return Decision()
        problem = self.problem(state, options, value)
        budget = Budget(self.params.time_limit_s, deterministic=self.params.deterministic)
        plan = solve_round(problem, budget, self.params.backend, self.params.gap)
        self._rounds += 1
        self._from_milp += plan.source == "milp"
        chosen = [options[k] for k in np.flatnonzero(plan.chosen)]
        picked = {o.job.id for o in chosen} | {o.partner.id for o in chosen if o.partner}
        if self._shares:
            self._parked |= {run.job.id for run in state.running if run.job.id not in picked}
        self._parked -= picked
        self._last = {o.job.id: (o.gpu_type, o.size) for o in chosen if o.partner is None}
        decision = self.realise(state, chosen, options, problem.value,
                                self._waiting.left_out if bounded is not None else None)
        self._packed_starts += sum(start.packed for start in decision.start)
        return Decision(decision.start, decision.preempt, False, note=_note(plan))

    def options(self, state: ClusterState) -> list[Option]:
        """Every (job, type, size) with positive predicted speed, for every active job
        (a packed run is *here* only alone on its GPU, where it runs at full speed); with
        ``pairing``, the pairs (:func:`~hetsched.policies.pairing.pair_options`)."""
        return self._options_for(state, None)

    def _options_for(self, state: ClusterState, pending: list[Job] | None) -> list[Option]:
        """:meth:`options` for the running jobs and ``pending`` (``None``: every waiting
        job)."""
        running = {r.job.id: r for r in state.running}
        lone = {r.job.id for r in lone_packed(state)}
        self._fewest = {}
        self._aheads.decision(state.throughput)
        # heSRPT's round while nobody waits but the jobs an earlier one stopped (it parks
        # the longest): valuing such a round by the waiting rule would undo it next round.
        self._shares = self.params.speedup_exponent is not None and \
            all(job.id in self._parked for job in state.pending)
        found: list[Option] = []
        alone: dict[str, float] = {}  # job id -> its time left on its fastest option
        waiting = state.pending if pending is None else pending
        for job in [*(r.job for r in running.values()), *waiting]:
            found.extend(self._job_options(state, job, running.get(job.id), lone, alone))
        if self.params.gpu_price > 0 or self.params.speedup_exponent is not None:
            # Shortest time left first: the jobs after each, whom its GPU time delays.
            order = sorted(alone, key=lambda j: (alone[j], j))
            self._behind = {j: len(order) - k - 1 for k, j in enumerate(order)}
            self._type_gpus = dict(layout(state.cluster).type_gpus)
        if self.params.pairing and state.colocation is not None and state.colocation.pairs:
            def rate(o: Option) -> float:
                return self._worth(state, o)

            def speed_of(job: Job, gpu_type: str) -> float:
                return self.speeds.speeds(state, job, 1).get(gpu_type, 0.0)

            found += pair_options(state, found, state.colocation, rate, speed_of)
        return found

    def _job_options(self, state: ClusterState, job: Job, run: RunningJob | None,
                     lone: set[str], alone: dict[str, float]) -> list[Option]:
        """One active job's options (:meth:`options`); ``run``: its run, if it runs;
        ``alone[job.id]`` is set to its time left on its fastest option."""
        remaining = run.remaining if run is not None else \
            state.remaining.get(job.id, job.work)
        if remaining <= 0:
            return []
        by_size = {size: self.speeds.speeds(state, job, size) for size in job.gpu_counts}
        if not any(by_size.values()):
            return []
        restarted = run is not None or job.id in state.attained
        # With plan_ahead, a job whose speed changes with its progress (an elastic
        # job's epochs) is planned with its rate over the next horizon on each option.
        varies = self.params.plan_ahead and \
            speed_change_after(state.throughput, job.job_type, 0.0) is not None
        fair = self._fair_deadline(state, job)
        mine, fair_slack = [], []
        for size, speeds in by_size.items():
            for gpu_type, speed in speeds.items():
                here = run is not None and run.gpu_type == gpu_type and \
                    len(run.gpus) == size and (not run.packed or job.id in lone)
                ahead = self._aheads.rate(state, job, gpu_type, size, speed,
                                          job.work - remaining, self.params.horizon_s) \
                    if varies else None
                end = state.now + (0.0 if here or not restarted else
                                   self.params.restart_penalty_s) + remaining / (ahead or speed)
                slack = math.inf if job.deadline is None else job.deadline - end
                fair_slack.append(fair - end)
                mine.append(Option(job, gpu_type, size, speed, remaining,
                                   job.deadline is not None and slack >= 0, here, slack,
                                   rate=ahead))
        fastest = remaining / max(o.planned for o in mine)
        alone[job.id] = fastest
        if self.params.speedup_exponent is not None:
            fewest = min(o.size for o in mine)
            self._fewest[job.id] = max(o.planned for o in mine if o.size == fewest)
        if job.deadline is not None and any(o.urgent for o in mine):
            slack = job.deadline - state.now - fastest
            if slack > self.params.urgent_slack * fastest + self.round_s:
                mine = [dataclasses.replace(o, urgent=False) for o in mine]
        if math.isfinite(fair) and \
                fair - state.now - fastest <= self.params.urgent_slack * fastest + self.round_s:
            # Its rho may pass the bound (or has): urgent on every option, as for a
            # deadline, and still urgent past it.
            self._fair_urgent += 1
            mine = [dataclasses.replace(o, urgent=True,
                                        slack=o.slack if o.urgent else math.inf,
                                        fair_slack=late)
                    for o, late in zip(mine, fair_slack, strict=True)]
        # A job that meets its deadline (and its rho bound) where it runs stays there or
        # stops: moving it would only risk the deadline for a restart.
        kept = [o for o in mine if o.running_here and o.urgent and o.slack >= 0
                and o.fair_slack >= 0]
        return kept or mine

    def _fair_deadline(self, state: ClusterState, job: Job) -> float:
        """With ``rho_bound``: when the job must finish for its rho to stay within it,
        ``arrival + rho_bound * work / isolated speed`` (its speed on 1/N of the cluster,
        N the average number of active jobs since its arrival, as
        :mod:`hetsched.core.fairness` counts rho); ``inf`` without."""
        bound = self.params.rho_bound
        if bound is None:
            return math.inf
        contention = self._clock.average(job.arrival, state.now)
        speeds = self.speeds.speeds(state, job, job.num_gpus)
        isolated = isolated_speed(job, state.cluster, speeds, contention)
        return job.arrival + bound * job.work / isolated if isolated > 0 else math.inf

    def _worth(self, state: ClusterState, option: Option) -> float:
        """A job's option alone: the weighted share of its remaining work it finishes per
        second, discounted where it restarts the job (it must win the penalty back within
        the horizon). A pair's value adds its two jobs' (:mod:`hetsched.policies.pairing`)."""
        job = option.job
        if self._shares and self.params.speedup_exponent is not None:
            rank = len(self._behind) - self._behind.get(job.id, 0)  # 1: the shortest
            value = job.weight * hesrpt_weight(rank, len(self._behind),
                                               self.params.speedup_exponent) * \
                option.planned / self._fewest[job.id]
        else:
            value = job.weight * option.planned / option.remaining
            if self.params.gpu_price > 0:
                value /= 1.0 + self.params.gpu_price * self._behind.get(job.id, 0) * \
                    option.size / self._type_gpus[option.gpu_type]
        if not option.running_here and job.id in state.attained:
            value *= max(0.0, 1.0 - self.params.restart_penalty_s / self.params.horizon_s)
        return value

    @property
    def plain(self) -> bool:
        """Whether a waiting job's options and their values are fixed while it waits
        (no ``gpu_price``, ``speedup_exponent``, ``rho_bound``, ``plan_ahead`` or
        ``pairing``): then the MILP may leave out waiting jobs that cannot be chosen
        (:mod:`hetsched.policies.progress_waiting`)."""
        p = self.params
        return p.gpu_price == 0 and p.speedup_exponent is None and p.rho_bound is None \
            and not p.plan_ahead and not p.pairing

    def _bounded(self, state: ClusterState) -> tuple[list[Option], np.ndarray] | None:
        """The round's options and values without the waiting jobs that cannot be chosen
        (:mod:`hetsched.policies.progress_waiting`); ``None`` when that does not apply
        (not :attr:`plain`, or a state without a queue feed)."""
        if not self.plain:
            return None
        where = layout(state.cluster)
        types = list(state.cluster.type_names)

        def big(option: Option) -> bool:
            return option.size > where.largest[option.gpu_type] / 2 and \
                not spreadable(state, option)

        def make(job: Job) -> list[Valued]:
            return [(o, self._worth(state, o), big(o))
                    for o in self._job_options(state, job, None, set(), {})]

        def candidate(job: Job) -> bool:
            return job.deadline is None and len(job.gpu_counts) == 1

        key = (id(self.speeds.view(state)), id(state.cluster))
        if not self._waiting.follow(state, key, types, candidate, make):
            return None
        fixed = self._options_for(state, self._waiting.always())
        value = self.values(state, fixed, self._waiting.best_per_gpu)
        self._waiting.choose(sum(where.type_gpus.values()),
                             ((o.gpu_type, float(v)) for o, v in zip(fixed, value, strict=True)
                              if o.size == 1 and not big(o)))
        running = {r.job.id for r in state.running}
        ran = [k for k, o in enumerate(fixed) if o.job.id in running]
        always: dict[str, list[Valued]] = {}
        for k, o in enumerate(fixed):
            if o.job.id not in running:
                always.setdefault(o.job.id, []).append((o, float(value[k]), False))
        waiting = self._waiting.in_round(always)
        options = [fixed[k] for k in ran] + [o for o, _, _ in waiting]
        return options, np.concatenate([value[ran], np.array([v for _, v, _ in waiting],
                                                             dtype=np.float64)])

    def values(self, state: ClusterState, options: list[Option],
               floor: Callable[[], float] | None = None) -> np.ndarray:
        """Each option's worth (:meth:`_worth`; a pair's, its two jobs'), urgent options
        lifted above every other option per GPU; ``floor()``: the best value per GPU of
        the options left out of ``options`` (none are urgent), which the lift clears too."""
        sizes = np.array([o.size for o in options], dtype=np.int64)
        urgent = np.array([o.urgent for o in options], dtype=np.bool_)
        value = np.array([o.pair_value if o.partner is not None else self._worth(state, o)
                          for o in options], dtype=np.float64)
        if urgent.any():
            per_gpu = float((value / np.maximum(sizes, 1))[~urgent].max(initial=0.0))
            if floor is not None:
                per_gpu = max(per_gpu, floor())
            per_gpu = per_gpu or float((value / np.maximum(sizes, 1)).max())
            lift = URGENT_FACTOR * per_gpu * sizes
            # Twice the lift when critical: under critical_rounds rounds of slack to the
            # deadline or to the rho bound (or past the bound).
            critical = self.params.critical_rounds * self.round_s
            factor = np.array([2.0 if min(o.slack, o.fair_slack) <= critical else 1.0
                               for o in options])
            value[urgent] += lift[urgent] * factor[urgent]
        return value

    def problem(self, state: ClusterState, options: list[Option],
                value: np.ndarray | None = None) -> RoundProblem:
        """The round's :class:`RoundProblem` (``value``: the options' :meth:`values`)."""
        cluster = state.cluster
        types = list(cluster.type_names)
        type_index = {t: i for i, t in enumerate(types)}
        jobs: dict[str, int] = {}
        job_of = np.array([jobs.setdefault(o.job.id, len(jobs)) for o in options],
                          dtype=np.int64)
        partner = np.array([-1 if o.partner is None else jobs.setdefault(o.partner.id, len(jobs))
                            for o in options], dtype=np.int64)
        paired = partner >= 0
        sizes = np.array([o.size for o in options], dtype=np.int64)
        if value is None:
            value = self.values(state, options)
        where = layout(cluster)  # per type: GPUs, largest node, nodes over half of it
        capacity = np.array([where.type_gpus[t] for t in types], dtype=np.int64)
        server = np.array([where.largest[t] for t in types], dtype=np.int64)
        packed = np.array([not spreadable(state, o) for o in options], dtype=np.bool_)
        over_half = np.array([where.over_half[t] for t in types], dtype=np.int64)
        start = np.array([o.partner is None and self._last.get(o.job.id) == (o.gpu_type, o.size)
                          for o in options], dtype=np.bool_)
        return RoundProblem(len(jobs), job_of, np.array([type_index[o.gpu_type]
                                                         for o in options], dtype=np.int64),
                            sizes, value, capacity, packed, server, over_half, start,
                            partner if paired.any() else None)

    def realise(self, state: ClusterState, chosen: list[Option], options: list[Option],
                value: np.ndarray, more: Callable[[], list[Valued]] | None = None) -> Decision:
        """GPUs for the chosen options (see the module docstring); ``more()``: the
        waiting jobs' options left out of ``options``, which the fill sees too."""
        running = {r.job.id: r for r in state.running}
        worth = {id(o): float(v) for o, v in zip(options, value, strict=True)}
        picked = {o.job.id for o in chosen} | {o.partner.id for o in chosen if o.partner}
        here = {o.job.id: worth[id(o)] for o in options if o.running_here}
        dropped = sorted((r for r in state.running if r.job.id not in picked),
                         key=lambda r: (here.get(r.job.id, 0.0), r.job.id))
        gangs = Gangs(state, dropped)
        # Largest gangs first (they need whole servers), urgent ones before them all.
        order = sorted((o for o in chosen if not o.running_here and o.partner is None),
                       key=lambda o: (not o.urgent, -o.size, -worth[id(o)] / o.size,
                                      o.job.arrival, o.job.id))
        # Passes until nothing more is placed: a migration frees GPUs another option
        # of the same round may need.
        while order:
            left = []
            for option in order:
                gpus = gangs.full_speed(option, with_victims=False) or \
                    gangs.full_speed(option, with_victims=True)
                run = running.get(option.job.id)
                if gpus is None and run is not None and option.size != len(run.gpus):
                    if not gangs.resize(option, run):  # (it may take its own GPUs)
                        left.append(option)
                elif gpus is None:
                    left.append(option)
                else:
                    gangs.start(option, gpus, running.get(option.job.id))
            if len(left) == len(order):
                break
            order = left
        # Pairs, on a free GPU (else a dropped job's), or joining a packed job alone.
        for option in sorted((o for o in chosen if o.partner is not None),
                             key=lambda o: (-worth[id(o)], o.job.arrival, o.job.id)):
            gangs.pair(option)
        # A gang the free and dropped GPUs cannot hold (its type's free GPUs are scattered
        # over servers, which the MILP does not see) may take the GPUs of running jobs
        # worth less per GPU than it is, lowest first: otherwise the MILP would choose it
        # round after round and it would never start.
        for option in order:
            if option.job.id in running:
                continue
            per_gpu = worth[id(option)] / option.size
            cheaper = sorted((r for r in state.running if r.job.id in picked
                              and here.get(r.job.id, 0.0) / len(r.gpus) < per_gpu),
                             key=lambda r: (here.get(r.job.id, 0.0) / len(r.gpus), r.job.id))
            gangs.widen(cheaper)
            gpus = gangs.full_speed(option, with_victims=True)
            if gpus is not None:
                gangs.start(option, gpus, None)
        self._fill(state, options, worth, gangs, more)
        return Decision(tuple(gangs.starts), tuple(dict.fromkeys(gangs.preempt)))

    def _fill(self, state: ClusterState, options: list[Option], worth: dict[int, float],
              gangs: Gangs, more: Callable[[], list[Valued]] | None = None) -> None:
        """Start waiting jobs on GPUs still free, by value per GPU, on a type where starting
        now finishes no later than waiting for a faster one
        (:func:`~hetsched.policies.baselines.common.types_worth_starting`), at the full speed of
        the option; an urgent job only where it still meets its deadline."""
        if not gangs.pool.has_free():
            return
        if more is not None:
            extra = more()
            options = [*options, *(o for o, _, _ in extra)]
            worth.update((id(o), v) for o, v, _ in extra)
        started = {s.job for s in gangs.starts}
        pending = {job.id for job in state.pending} - started
        rest = sorted((o for o in options if o.job.id in pending and o.partner is None),
                      key=lambda o: (not o.urgent, -worth[id(o)] / o.size, o.job.arrival,
                                     o.job.id))
        urgent_jobs = {o.job.id for o in options if o.urgent}
        choice = types_worth_starting(state, self.speeds)
        worth_it: dict[str, list[str]] = {}
        for option in rest:
            if not gangs.pool.has_free():
                break
            job = option.job
            if job.id in started or (job.id in urgent_jobs and not option.urgent):
                continue
            if option.size == job.num_gpus:
                types = worth_it.setdefault(job.id, choice(job))
                if option.gpu_type not in types:
                    continue
            gpus = gangs.full_speed(option, with_victims=False)
            if gpus is None:
                continue
            gangs.start(option, gpus, None)
            started.add(job.id)
            self._last[job.id] = (option.gpu_type, option.size)


def _note(plan: RoundPlan) -> str:
    """The round's line in decisions.csv."""
    bound = "" if plan.bound is None else f" bound {plan.bound:.6g}"
    return f"progress: {plan.source} value {plan.value:.6g}{bound} ({call_word(plan.outcome)})"
