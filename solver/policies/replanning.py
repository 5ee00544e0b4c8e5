"""Replanning: a static planner (``deadline``, ``allox``, ``topology``, ``fifo``: a
:class:`~hetsched.policies.planner.Planner`) used as a rolling policy, re-solved at every decision
point (:class:`Replanning`)."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TYPE_CHECKING

from hetsched.allocation.layout import SpeedView, Start
from hetsched.core.records import Cluster, Instance, Job
from hetsched.core.settings import DECISION_LIMIT
from hetsched.core.throughput import Placement
from hetsched.policies.planner import Planner, SolveOptions, run_planner
from hetsched.policies.rolling import (
    ClusterState,
    Decision,
    PolicyHooks,
    RollingFifo,
    first_fit_gpus,
)

if TYPE_CHECKING:
    from hetsched.core.result import Result

log = logging.getLogger(__name__)


#: A plan's start this close to ``now`` counts as now: the exact models work on a time grid
#: (1 ms) and round releases up, so "now" comes back as up to one tick later.
START_TOLERANCE_S = 0.01


def _on(job: Job, nodes: set[str] | dict[str, list[str]]) -> Job:
    """``job`` with its allowed nodes cut to ``nodes`` (the nodes of a model's cluster,
    one of which it may use): the model cannot name a node its cluster lacks."""
    if job.allowed_nodes is None:
        return job
    return dataclasses.replace(job, allowed_nodes=tuple(n for n in job.allowed_nodes
                                                        if n in nodes))


class Replanning(PolicyHooks):
    """A static planner (``deadline``, ``allox``, ``topology``, ``fifo``) driven at every
    decision point.

    *Which jobs the model sees.* At most ``window`` pending jobs, by priority: first those
    that have waited more than ``STARVATION_FACTOR`` times their best isolated duration (and
    at least ``STARVATION_MIN_S``), oldest first (the starvation guard); then, by shortest
    best isolated remaining time per unit weight; a quarter of the window is kept for the
    jobs with a deadline they can still meet, least slack first. Jobs that no node can hold
    packed are started by first fit before the solve (the models place gangs packed).

    *Non-preemptive* (``preemptive=False``): the instance is the free GPUs now (each node
    shrunk to its free GPUs); the plan's jobs that start now are committed.

    *Preemptive* (the default for a planner that declares ``replan_preemptive``:
    ``deadline``, the model that can pin a job to a node): the
    instance is the whole cluster with the running jobs in it (remaining work, pinned to
    their node and gang size; spread gangs and first-fit starts hold their GPUs outside it),
    so the model weighs waiting for a fast GPU against starting now on a slow one, and
    may put a running job after others. A running job the plan starts ``preempt_after_s``
    or more after now is preempted (the hysteresis pays for the restart penalty); the
    others keep their GPUs. Pending jobs the plan starts now get free GPUs of the planned
    type, on the planned node if it has them, else on another node packed; those that find
    none wait. If the solve fails or starts nothing on an idle cluster, first fit decides
    and the decision is marked as a fallback.
    """

    #: No rounds: decisions at arrivals and completions while jobs wait.
    round_s: float | None = None
    #: Waiting this many times its best isolated duration puts a job first (starvation guard).
    STARVATION_FACTOR = 10.0
    #: ... but only after waiting at least this long (s).
    STARVATION_MIN_S = 6 * 3600.0

    def __init__(self, planner: Planner, *, backend: str | None = None,
                 time_limit_s: float | None = DECISION_LIMIT, window: int = 48,
                 preemptive: bool | None = None, preempt_after_s: float = 600.0,
                 deterministic: bool = True, seed: int = 0) -> None:
        self.planner = planner
        self.model = planner.name
        self.window = window
        self.name = planner.name
        self.backend = backend
        self.time_limit_s = time_limit_s
        self.preemptive = planner.replan_preemptive if preemptive is None else preemptive
        self.preempt_after_s = preempt_after_s
        #: ``deterministic``: ``time_limit_s`` counts work units per
        #: decision (the same decisions on any machine), else wall seconds
        self.deterministic = deterministic
        self.seed = seed
        self._speeds: SpeedView | None = None
        #: each job's (best throughput, packable) under the view: a queue of thousands is
        #: asked about at every decision (keyed by id, the job record checked)
        self._known: dict[str, tuple[Job, float, bool]] = {}
        self._warned = False

    def _packable(self, state: ClusterState, job: Job) -> bool:
        return self._of(state, job)[1]

    def _of(self, state: ClusterState, job: Job) -> tuple[float, bool]:
        """The job's best throughput anywhere on the cluster (every allowed gang size), and
        whether a node can hold it packed."""
        view = self._view(state)
        found = self._known.get(job.id)
        if found is None or found[0] is not job:
            if len(self._known) > 1 << 17:
                self._known.clear()
            found = self._known[job.id] = (job, view.best(job), view.packable(job))
        return found[1], found[2]

    def _view(self, state: ClusterState) -> SpeedView:
        view = self._speeds
        if view is None or view.model is not state.throughput or view.cluster is not state.cluster:
            view = self._speeds = SpeedView(state.cluster, state.throughput)
            self._known.clear()
        return view

    def _window(self, state: ClusterState, candidates: list[Job]) -> list[Job]:
        """The jobs the model sees (see the class docstring)."""
        remaining = state.remaining
        times = {}  # each job's best isolated remaining time
        for job in candidates:
            speed = self._of(state, job)[0]
            times[job.id] = remaining[job.id] / speed if speed > 0 else math.inf
        starving = [j for j in candidates if state.now - j.arrival > max(
            self.STARVATION_MIN_S, self.STARVATION_FACTOR * times[j.id])]
        chosen = starving[: self.window]
        taken = {j.id for j in chosen}
        urgent = sorted((j for j in candidates if j.id not in taken and j.deadline is not None
                         and j.deadline - state.now - times[j.id] >= 0),
                        key=lambda j: (j.deadline or 0) - state.now - times[j.id])
        for job in urgent[: max(0, min(self.window // 4, self.window - len(chosen)))]:
            chosen.append(job)
            taken.add(job.id)
        rest = sorted((j for j in candidates if j.id not in taken),
                      key=lambda j: (times[j.id] / j.weight, j.arrival, j.id))
        chosen += rest[: max(0, self.window - len(chosen))]
        return chosen

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event when nobody waits (:meth:`decide` returns at once)."""
        return -math.inf if state.pending else math.inf

    def decide(self, state: ClusterState) -> Decision:
        """Solve; commit what starts now (and, preemptive, what stops), less the starts
        whose GPU shares or node CPUs and memory do not fit (:meth:`_fit_resources`)."""
        return self._fit_resources(state, self._decide(state))

    def _fit_resources(self, state: ClusterState, decision: Decision) -> Decision:
        """The static models plan whole GPUs and know nothing of node CPUs and memory: a
        job asking for a share of a GPU gets a whole free GPU (its share rounded up), and
        a start the nodes' CPUs or memory cannot hold is dropped (the job waits). Said
        once in the log."""
        jobs = {job.id: job for job in state.pending}
        if not any(j.gpu_share is not None or j.needs_node_resources for j in jobs.values()):
            return decision
        if not self._warned:
            self._warned = True
            log.warning("%s plans whole GPUs without CPUs and memory: GPU shares are rounded "
                        "up, and starts that a node's CPUs or memory cannot hold are dropped",
                        self.name)
        running = {r.job.id: r for r in state.running}
        pool = state.pool()
        for job_id in decision.preempt:
            run = running[job_id]
            pool.release(run.gpus, run.job)
            jobs[job_id] = run.job
        kept = []
        for start in decision.start:
            job = jobs[start.job]
            if pool.can_hold(start.gpus, job):
                pool.take(start.gpus, job)
                kept.append(start)
        return Decision(tuple(kept), decision.preempt, decision.fallback, decision.note)

    def _decide(self, state: ClusterState) -> Decision:
        """The decision of the model (before :meth:`_fit_resources`)."""
        if not state.pending or (not (self.preemptive and state.running)
                                 and not state.has_free()):
            return Decision()
        # Gangs that no node of the whole cluster can hold packed run spread; models that
        # reason about packed gangs cannot place them, so first fit starts them (in arrival
        # order) before the solve, and the model plans the rest on what is left.
        early: list[Start] = []
        free = set(state.free)
        packable = {job.id: self._packable(state, job) for job in state.pending}
        spread = [job for job in state.pending if not packable[job.id]]
        if spread:
            # ... on a GPU type where it ends no later than by waiting for a faster type to
            # free a gang (the baselines' rule; a spread gang on K80s can run for weeks).
            from hetsched.policies.baselines.common import ReleaseTimes, SpeedBook, worth_starting

            book = SpeedBook()
            releases: ReleaseTimes | None = None
            pool = state.pool()
            idle = {t: state.free_gpus(t) for t in state.cluster.type_names}
            for job in spread:
                if job.gpu_share is None and not any(
                        count >= job.num_gpus for t, count in idle.items() if job.may_use(t)):
                    continue  # (first fit cannot find its gang: nothing to weigh)
                if releases is None:
                    releases = ReleaseTimes(state, book)
                types = worth_starting(state, job, book.speeds(state, job), releases)
                view = dataclasses.replace(job, allowed_gpu_types=tuple(types)) if types \
                    else None
                chosen = None if view is None else first_fit_gpus(state, view, pool)
                if chosen is not None:
                    early.append(chosen)
                    pool.take(chosen.gpus, job)
                    free.difference_update(chosen.gpus)
                    idle[chosen.gpu_type] -= len(chosen.gpus)
        started = {s.job for s in early}
        candidates = [j for j in state.pending if j.id not in started and packable[j.id]]
        if not candidates:
            return Decision(tuple(early))
        if self.preemptive:
            return self._decide_whole(state, early, free, candidates)
        return self._decide_free(state, early, free, candidates)

    def _solve(self, instance: Instance) -> Result:
        result, _ = run_planner(self.planner, instance, SolveOptions(
            backend=self.backend, time_limit_s=self.time_limit_s,
            deterministic=self.deterministic, seed=self.seed, lp_bound=False, windows=False))
        return result

    def _decide_free(self, state: ClusterState, early: list[Start], free: set[str],
                     candidates: list[Job]) -> Decision:
        """The model on the free GPUs only; commit the jobs it starts now."""
        from hetsched.core.errors import InputError
        from hetsched.core.records import Node, configurations

        free_ids: dict[str, list[str]] = {}
        for node in state.cluster.nodes:
            ids = [g for g in node.gpu_ids() if g in free]
            if ids:
                free_ids[node.name] = ids
        if not free_ids:
            return Decision(tuple(early))
        nodes = tuple(Node(name, state.cluster.node_by_name[name].gpu_type, len(ids))
                      for name, ids in free_ids.items())
        sub = Cluster(state.cluster.gpu_types, nodes)
        to_real = {f"{name}/{i}": gid for name, ids in free_ids.items()
                   for i, gid in enumerate(ids)}
        # Whether a job fits the free GPUs packed depends on its shape only: asked once a
        # shape (a queue of thousands holds a few dozen).
        packed: dict[tuple[object, ...], bool] = {}

        def fits_packed(job: Job) -> bool:
            shape = (job.job_type, job.gpu_counts, job.allowed_gpu_types, job.allowed_nodes)
            found = packed.get(shape)
            if found is None:
                found = packed[shape] = any(c.placement is Placement.PACKED for c in
                                            configurations(sub, state.throughput, job))
            return found

        fits = [j for j in candidates if fits_packed(j)]
        runnable = tuple(_on(dataclasses.replace(job, work=max(state.remaining[job.id], 1e-9)),
                             free_ids) for job in self._window(state, fits))
        if not runnable:
            return Decision(tuple(early))
        try:
            result = self._solve(Instance(sub, runnable, state.throughput, now=state.now))
        except (InputError, RuntimeError, ValueError) as exc:
            return self._fallback(state, f"{self.model} failed: {exc}")
        starts = (*early, *(
            Start(a.job, a.gpu_type, tuple(to_real[g] for g in a.gpus))
            for a in result.schedule if a.start <= state.now + START_TOLERANCE_S
        ))
        if not starts and not state.running:
            return self._fallback(state, f"{self.model} started nothing on an idle cluster "
                                  f"({result.status.value})")
        return Decision(tuple(starts), note=result.status.value)

    def _decide_whole(self, state: ClusterState, early: list[Start], free: set[str],
                      candidates: list[Job]) -> Decision:
        """The model on the whole cluster with the running jobs in it."""
        from hetsched.core.errors import InputError
        from hetsched.core.records import Node

        early_ids = {g for s in early for g in s.gpus}
        # Running jobs packed on one node enter the model with their remaining work, pinned
        # to their node and gang size (spread ones stay as they are, outside the model).
        running = list(state.running)
        packed_running = {r.job.id for r in running if len(
            {state.cluster.gpu_by_id[g].node for g in r.gpus}) == 1}
        pinned = [dataclasses.replace(r.job, work=max(r.remaining, 1e-9),
                                      num_gpus=len(r.gpus), allowed_gpu_counts=None,
                                      allowed_gpu_types=(r.gpu_type,), allowed_nodes=(
                                          state.cluster.gpu_by_id[r.gpus[0]].node,))
                  for r in running if r.job.id in packed_running]
        # The model's cluster: every node less the GPUs it cannot reassign (held by spread
        # gangs or just given to the first-fit starts).
        held: dict[str, int] = {}
        for gid in early_ids | {g for r in running if r.job.id not in packed_running
                                for g in r.gpus}:
            node_name = state.cluster.gpu_by_id[gid].node
            held[node_name] = held.get(node_name, 0) + 1
        kept = {n.name for n in state.cluster.nodes if n.num_gpus > held.get(n.name, 0)}
        window = [_on(dataclasses.replace(job, work=max(state.remaining[job.id], 1e-9)), kept)
                  for job in self._window(state, [j for j in candidates if j.allowed_nodes is None
                                                  or kept.intersection(j.allowed_nodes)])]
        window_ids = {j.id for j in window}
        nodes = tuple(Node(n.name, n.gpu_type, n.num_gpus - held.get(n.name, 0))
                      for n in state.cluster.nodes if n.num_gpus > held.get(n.name, 0))
        try:
            cluster = state.cluster if not held else Cluster(state.cluster.gpu_types, nodes)
            instance = Instance(cluster, (*pinned, *window), state.throughput, now=state.now)
            result = self._solve(instance)
        except (InputError, RuntimeError, ValueError) as exc:
            return self._fallback(state, f"{self.model} failed: {exc}")
        plan = {a.job: a for a in result.schedule}
        soon = state.now + START_TOLERANCE_S
        preempt = tuple(r.job.id for r in running if r.job.id in plan
                        and plan[r.job.id].start >= state.now + self.preempt_after_s)
        available = (free - early_ids) | {g for r in running if r.job.id in preempt
                                         for g in r.gpus}
        starts = list(early)
        by_name = state.cluster.node_by_name
        job_by_id = {j.id: j for j in window}
        for a in sorted((a for a in result.schedule if a.job in window_ids
                         and a.start <= soon), key=lambda a: (a.start, a.job)):
            count = len(a.gpus)
            planned = cluster.gpu_by_id[a.gpus[0]].node
            may_use = job_by_id[a.job].may_use_node
            order = [planned] + [n.name for n in state.cluster.nodes
                                 if n.gpu_type == a.gpu_type and n.name != planned
                                 and may_use(n.name)]
            for name in order:
                ids = [g for g in by_name[name].gpu_ids() if g in available]
                if len(ids) >= count:
                    starts.append(Start(a.job, a.gpu_type, tuple(ids[:count])))
                    available.difference_update(ids[:count])
                    break
        self._backfill(state, result, cluster, window, candidates, starts, available)
        used = {g for s in starts for g in s.gpus}
        # Preempt only the jobs whose GPUs someone takes now (else the stop gains nothing).
        preempt = tuple(r.job.id for r in running if r.job.id in preempt
                        and used.intersection(r.gpus))
        if not starts and not state.running:
            return self._fallback(state, f"{self.model} started nothing on an idle cluster "
                                  f"({result.status.value})")
        return Decision(tuple(starts), preempt, note=result.status.value)

    def _backfill(self, state: ClusterState, result: Result, cluster: Cluster,
                  window: list[Job],
                  candidates: list[Job], starts: list[Start], available: set[str]) -> None:
        """Work-conserving backfill on the GPUs still free: a job (the window's, in plan
        order, then the others by priority) starts now on a node where it finishes no later
        than its plan says and before any job is planned to start on that node (so no
        planned job is delayed). Appends to ``starts``; takes from ``available``."""
        soon = state.now + START_TOLERANCE_S
        gpu_node = state.cluster.gpu_by_id
        planned_node = cluster.gpu_by_id  # the plan names the model's GPUs
        planned_finish = {a.job: a.finish for a in result.schedule}
        next_start: dict[str, float] = {}
        for a in result.schedule:
            if a.start > soon:
                node = planned_node[a.gpus[0]].node
                next_start[node] = min(next_start.get(node, math.inf), a.start)
        started = {s.job for s in starts}
        in_window = {j.id for j in window}
        # A job planned now that did not start (its GPUs stay with a running job the
        # hysteresis kept) has no plan left to respect.
        for a in result.schedule:
            if a.start <= soon and a.job in in_window and a.job not in started:
                planned_finish[a.job] = math.inf
        order = sorted((j for j in window if j.id not in started),
                       key=lambda j: (planned_finish.get(j.id, math.inf) < math.inf,
                                      planned_finish.get(j.id, math.inf), j.id))
        order += self._window(state, [j for j in candidates if j.id not in in_window])[
            : 4 * self.window]
        model = state.throughput
        from hetsched.policies.baselines.common import ReleaseTimes, SpeedBook

        book = SpeedBook()
        releases = ReleaseTimes(state, book)
        for job in order:
            if not available:
                return
            # A job without a plan (outside the window, or its plan voided) does not take a
            # GPU type where it would end later than by waiting for the predicted release
            # of a faster one (as the baselines do): a 10x slower K80 is a trap.
            waiting = math.inf
            if planned_finish.get(job.id, math.inf) == math.inf:
                steps = state.remaining[job.id]
                waiting = min((releases.earliest(t, job.num_gpus) + steps / v
                               for t, v in book.speeds(state, job).items()), default=math.inf)
            free_by_node: dict[str, list[str]] = {}
            for g in sorted(available):
                free_by_node.setdefault(gpu_node[g].node, []).append(g)
            best: tuple[float, str, str, int] | None = None  # (finish, node, type, count)
            for node, ids in free_by_node.items():
                gpu_type = state.cluster.node_by_name[node].gpu_type
                if not job.may_use(gpu_type) or not job.may_use_node(node):
                    continue
                for count in job.gpu_counts:
                    if count > len(ids):
                        continue
                    speed = model.throughput(job.job_type, gpu_type, count, Placement.PACKED)
                    if speed <= 0:
                        continue
                    finish = state.now + state.remaining[job.id] / speed
                    if finish > planned_finish.get(job.id, math.inf) + 1e-6 or \
                            finish > next_start.get(node, math.inf) or \
                            finish > waiting + 1e-6 * max(1.0, waiting):
                        continue
                    if best is None or finish < best[0]:
                        best = (finish, node, gpu_type, count)
            if best is not None:
                _, node, gpu_type, count = best
                ids = free_by_node[node][:count]
                starts.append(Start(job.id, gpu_type, tuple(ids)))
                available.difference_update(ids)

    def _fallback(self, state: ClusterState, why: str) -> Decision:
        decision = RollingFifo().decide(state)
        return Decision(decision.start, decision.preempt, True, why)
