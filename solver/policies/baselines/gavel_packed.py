"""``gavel-packed``: Gavel's max-min fairness with space sharing (its
``max_min_fairness_packed``), realised by Gavel's simulator's rounds; ``fifo-packed``:
its ``fifo_packed`` (FIFO onto the fastest type with room, then the next jobs packed
beside placed ones whose pair's rates add up to more than 1.5) in the same rounds; and
Gavel's other packed allocations in the same rounds: ``ftf-packed``,
``min-total-duration-packed``, ``max-throughput-per-cost-packed`` and
``gavel-water-filling-packed`` (:mod:`hetsched.formulations.gavel.packed_objectives`).

Each solve (:func:`hetsched.formulations.gavel.packed.solve_packed_max_min`, or the
objective's own) gives time fractions to every active job alone and to every pair of
one-GPU jobs packed on one GPU of a type where both directions of the pair are measured
(:class:`hetsched.core.sharing.CoLocationModel`). The rounds are Gavel's
(:mod:`hetsched.policies.baselines.gavel_rounds`) with a pair as one more entry beside
the jobs, as Gavel's scheduler keeps them (``JobIdPair``, ``scheduler.py:2205-2219``):
its own time received (half a round at each reset), deficit and priority
``X / (received / total)``; each type's queue walked by priority, a pair taken when
neither of its jobs is taken yet and the type has a GPU left (``:808-853``). A pair
taken starts both jobs packed on one GPU (``Start.packed``), each at its measured speed
beside the other; a pair still running where it was taken keeps its GPU. Jobs not taken
stop (Gavel's rounds are not work conserving).

Departures from Gavel, on purpose: pairs are of one-GPU jobs only (Gavel pairs any two
jobs of one gang size; hetsched packs one GPU); when one job of a pair ends, the other
runs on alone at full speed until the round ends (in Gavel's simulator it idles at the
pair's speed's end of its micro-task). On traces with gangs of several sizes Gavel's
packed policies do not run at all: the constraint ``sum x <= 1`` per job reshapes the
variables of every job into rows of one length (``policies/policy.py:178-180``,
``policies/max_min_fairness.py:321-324`` at c4fa400), which holds only when every job is
in as many pairs, so a trace mixing 1- and 8-GPU jobs stops with "Invalid reshape
dimensions" at its fourth active job (docs/policies.md).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from hetsched.allocation.layout import Start
from hetsched.core.records import Job, packed_holder
from hetsched.core.sharing import CoLocationModel
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.packed import PackedProblem
from hetsched.formulations.gavel.problem import AllocationProblem, Array
from hetsched.policies.baselines.common import RoundClock, place
from hetsched.policies.baselines.gavel import solve_key
from hetsched.policies.baselines.gavel_family import objective_of
from hetsched.policies.baselines.gavel_params import PackedParams
from hetsched.policies.baselines.gavel_rounds import GavelLedger, arrival_rank, gavel_queue
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks
from hetsched.policies.starting import SpeedBook

log = logging.getLogger(__name__)

#: Between the two job ids of a pair's entry in the ledger.
PAIR_MARK = "\x1f"


class GavelPacked(PolicyHooks):
    """Gavel's packed allocations in Gavel's rounds (module notes): the objective its
    parameters name (``params``: :class:`~hetsched.policies.baselines.gavel_params.
    PackedParams`)."""

    def __init__(self, params: PackedParams | None = None) -> None:
        params = PackedParams() if params is None else params
        #: the policy's parameters (its settings)
        self.params = params
        self.name = params.name
        self.round_s = params.round_s
        #: how the allocation is solved (:mod:`hetsched.policies.baselines.gavel_family`)
        self.objective = objective_of(params)
        self.clock = RoundClock(params.round_s)
        self.speeds = SpeedBook()
        self._ledger: GavelLedger | None = None
        self._last_now: float | None = None
        self._solved_for: tuple[frozenset[str], frozenset[tuple[str, tuple[str, ...] | None]]] \
            | None = None
        self._share: dict[str, list[float]] = {}  # entry (job or pair) -> share per type
        self._entry_of: dict[str, str] = {}  # running job -> the entry it was started as
        self.solves = 0
        self.failed_solves = 0
        self.pairs_started = 0
        self._factors_of: CoLocationModel | None = None
        self._factor_cache: dict[tuple[tuple[str, ...], tuple[str, ...]], Array] = {}

    def quiet_until(self, state: ClusterState) -> float:
        """No promise: every round boundary may move jobs (Gavel's rounds)."""
        return -math.inf

    def on_finished(self, job: Job, now: float) -> None:
        """Forget the entry the job ran as."""
        self._entry_of.pop(job.id, None)

    def figures(self) -> dict[str, object]:
        """Solves, failed solves (the previous allocation kept) and pairs started."""
        return {"gavel_packed_solves": self.solves,
                "gavel_packed_failed_solves": self.failed_solves,
                "gavel_packed_pairs_started": self.pairs_started}

    def decide(self, state: ClusterState) -> Decision:
        """Count the time each entry ran since the last decision; at a round boundary,
        solve again if the jobs changed (and a reset is due) and realise the round."""
        now = state.now
        elapsed = 0.0 if self._last_now is None else now - self._last_now
        self._last_now = now
        types = state.cluster.type_names
        if self._ledger is None:
            self._ledger = GavelLedger(len(types), self.round_s)
        counted: set[str] = set()
        for run in state.running:
            entry = self._entry_of.get(run.job.id, run.job.id)
            if entry not in counted:  # (a pair's time once, as Gavel counts it)
                counted.add(entry)
                self._ledger.ran(entry, types.index(run.gpu_type), elapsed)
        if not self.clock.boundary(now):
            return Decision()
        return self._round(state)

    def on_stall(self, state: ClusterState) -> Decision:
        """Jobs wait on an idle cluster and none will arrive: a round now."""
        return self._round(state)

    # -- a round -------------------------------------------------------------------------
    def _round(self, state: ClusterState) -> Decision:
        jobs = sorted([*state.pending, *(r.job for r in state.running)],
                      key=lambda j: (j.arrival, j.id))
        if not jobs:
            return Decision()
        assert self._ledger is not None
        ledger = self._ledger
        types = state.cluster.type_names
        speeds = np.array([[self.speeds.speeds(state, job, job.num_gpus).get(t, 0.0)
                            for t in types] for job in jobs], dtype=np.float64)
        colocation = state.colocation
        if colocation is not self._factors_of:
            self._factors_of, self._factor_cache = colocation, {}
        first, second, first_speed, second_speed = _pairs(state, jobs, speeds, colocation,
                                                          self._factor_cache)
        ids = [job.id for job in jobs]
        entries = ids + [ids[a] + PAIR_MARK + ids[b] for a, b in zip(first, second,
                                                                      strict=True)]
        active = frozenset(entries)
        ledger.keep(active)
        key = (active, solve_key(jobs))  # (a job shown with other types: solved again)
        if key != self._solved_for and ledger.due(state.now):
            ledger.reset(state.now, lambda entry: self._share.get(entry, []))
            self._solve(state, jobs, speeds, (first, second, first_speed, second_speed),
                        entries)
            self._solved_for = key
        share = np.array([self._share.get(e, [0.0] * len(types)) for e in entries],
                         dtype=np.float64).reshape(len(entries), len(types))
        priority, deficit = ledger.priorities(entries, share)
        gangs = np.array([job.num_gpus for job in jobs], dtype=np.int64)
        capacity = np.array([state.cluster.num_gpus(t) for t in types], dtype=np.int64)
        usable = np.vstack([(speeds > 0) & (gangs[:, np.newaxis] <= capacity),
                            (first_speed > 0) & (second_speed > 0)])
        rank = arrival_rank(jobs)
        pair_rank = len(jobs) + np.arange(len(first), dtype=np.int64)
        rows, columns = gavel_queue(priority, deficit, share, usable,
                                    np.concatenate([rank, pair_rank]))
        left = capacity.copy()
        taken: set[int] = set()
        chosen: list[tuple[int, int]] = []
        for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
            members = (row,) if row < len(jobs) else \
                (int(first[row - len(jobs)]), int(second[row - len(jobs)]))
            size = gangs[row] if row < len(jobs) else 1
            if left[column] < size or any(m in taken for m in members) or \
                    (not self.objective.walks_zero_priority and priority[row, column] <= 0):
                continue
            left[column] -= size
            taken.update(members)
            chosen.append((row, column))
        return self._realise(state, jobs, chosen, first, second)

    def _solve(self, state: ClusterState, jobs: list[Job], speeds: Array,
               pairs: tuple[np.ndarray, np.ndarray, Array, Array], entries: list[str]) -> None:
        """The packed LP over the active jobs; the shares of the last solve are kept if it
        fails (counted in ``figures``)."""
        types = state.cluster.type_names
        alone = AllocationProblem(
            tuple(job.id for job in jobs), types, speeds,
            np.array([float(job.num_gpus) for job in jobs]),
            np.array([float(state.cluster.num_gpus(t)) for t in types]),
            np.array([job.weight for job in jobs]))
        problem = PackedProblem(alone, *pairs)
        answer = self.objective.packed(state, jobs, problem, Budget(
            self.params.time_limit_s, deterministic=self.params.deterministic))
        self.solves += 1
        if answer is None:
            self.failed_solves += 1
            log.warning("t=%g: %s's LP gave no allocation; the last one is kept", state.now,
                        self.name)
            return
        fractions = np.vstack([answer[0], answer[1]])
        digits = self.params.share_digits
        self._share = {entry: [float(x) if digits is None else round(float(x), digits)
                               for x in row]
                       for entry, row in zip(entries, fractions, strict=True)}

    def _realise(self, state: ClusterState, jobs: list[Job], chosen: list[tuple[int, int]],
                 first: np.ndarray, second: np.ndarray) -> Decision:
        """Starts and preemptions for the entries a round took (module notes)."""
        types = state.cluster.type_names
        running = {r.job.id: r for r in state.running}
        keep: set[str] = set()
        wanted: list[tuple[tuple[Job, ...], str]] = []
        for row, column in chosen:
            gpu_type = types[column]
            if row < len(jobs):
                job = jobs[row]
                run = running.get(job.id)
                if run is not None and not run.packed and run.gpu_type == gpu_type:
                    keep.add(job.id)
                else:
                    wanted.append(((job,), gpu_type))
                continue
            a, b = jobs[int(first[row - len(jobs)])], jobs[int(second[row - len(jobs)])]
            one, two = running.get(a.id), running.get(b.id)
            if one is not None and two is not None and one.packed and two.packed and \
                    one.gpus == two.gpus and one.gpu_type == gpu_type:
                keep.update((a.id, b.id))
            else:
                wanted.append(((a, b), gpu_type))
        preempt = [job_id for job_id in running if job_id not in keep]
        pool = state.pool()
        for job_id in preempt:
            pool.release(running[job_id].gpus, running[job_id].holder)
            self._entry_of.pop(job_id, None)
        starts: list[Start] = []
        wanted.sort(key=lambda w: -sum(job.num_gpus for job in w[0]))  # largest gangs first
        for members, gpu_type in wanted:
            if len(members) == 1:
                start = place(state, members[0], [gpu_type], members[0].num_gpus, pool)
                if start is not None:
                    starts.append(start)
                continue
            gpus = pool.best_fit(members[0], gpu_type, 1, state.throughput, False)
            if gpus is None:
                continue
            entry = members[0].id + PAIR_MARK + members[1].id
            for job in members:
                pool.take(gpus, packed_holder(job))
                starts.append(Start(job.id, gpu_type, gpus, packed=True))
                self._entry_of[job.id] = entry
            self.pairs_started += 1
        return Decision(tuple(starts), tuple(preempt))


def _pairs(state: ClusterState, jobs: list[Job], speeds: Array,
           colocation: CoLocationModel | None,
           cache: dict[tuple[tuple[str, ...], tuple[str, ...]], Array]
           ) -> tuple[np.ndarray, np.ndarray, Array, Array]:
    """Every pair of one-GPU jobs (rows of ``jobs``, ``first < second``) and each one's
    steps/s beside the other per type: its speed alone times its measured factor beside
    the other (0 where either direction is not measured). ``cache``: the factors of
    ``colocation`` by (types, job kinds), kept from round to round."""
    one = np.array([i for i, job in enumerate(jobs)
                    if job.num_gpus == 1 and job.gpu_counts == (1,) and job.gpu_share is None],
                   dtype=np.int64)
    types = state.cluster.type_names
    if colocation is None or not colocation.pairs or len(one) < 2:
        empty = np.zeros((0, len(types)))
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), empty, empty.copy()
    kinds = sorted({jobs[i].job_type for i in one})
    kind_of = {kind: k for k, kind in enumerate(kinds)}
    key = (types, tuple(kinds))
    factor = cache.get(key)
    if factor is None:  # (the same kinds round after round: built once)
        factor = cache[key] = _factors(colocation, types, tuple(kinds))
    left, right = np.triu_indices(len(one), 1)
    first, second = one[left], one[right]
    kind_at = np.full(len(jobs), -1, dtype=np.int64)
    kind_at[one] = [kind_of[jobs[i].job_type] for i in one.tolist()]
    ka, kb = kind_at[first], kind_at[second]
    first_factor = factor[:, ka, kb].T  # pairs x types
    second_factor = factor[:, kb, ka].T
    measured = (first_factor > 0) & (second_factor > 0)
    first_speed = np.where(measured, speeds[first] * first_factor, 0.0)
    second_speed = np.where(measured, speeds[second] * second_factor, 0.0)
    some = measured.any(axis=1)  # (a pair measured on no type is no entry)
    return (first[some].astype(np.int64), second[some].astype(np.int64),
            first_speed[some], second_speed[some])


def _factors(colocation: CoLocationModel, types: tuple[str, ...], kinds: tuple[str, ...]
             ) -> Array:
    """``factor[t, a, b]``: a job of kind ``kinds[a]`` beside one of ``kinds[b]`` on a GPU
    of ``types[t]`` (0: not measured)."""
    kind_of = {kind: k for k, kind in enumerate(kinds)}
    factor = np.zeros((len(types), len(kinds), len(kinds)))
    for (gpu_type, kind, other), value in colocation.pairs.items():
        if gpu_type in types and kind in kind_of and other in kind_of:
            factor[types.index(gpu_type), kind_of[kind], kind_of[other]] = value
    return factor
