"""``topology``: FIFO timing with exact topology-aware placement of every batch.

Jobs are admitted in arrival order at event times (arrivals and completions), strictly
first in first out: at each event the longest prefix of the waiting queue that a
first-fit placement can hold starts now, on the first GPU type (cluster order) where it
fits. The GPUs of that batch are then chosen by the exact placement model
(:mod:`hetsched.formulations.topology`), warm-started from the first-fit placement, so every batch
is placed at least as well as first fit. A gang may spread over several nodes only when
no node can hold it packed at that moment and its spread throughput is positive.

The communication sensitivity of a gang is ``1 - spread / packed`` throughput of its job
type on that GPU type and count (how much it loses when its GPUs are far apart); a
single-GPU job has none.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.records import Cluster, Instance, Job
from hetsched.core.result import Assignment, Result, Schedule, Status
from hetsched.core.throughput import Placement
from hetsched.files.interconnect import communication_sensitivity as sensitivity
from hetsched.files.interconnect import predicted_throughput
from hetsched.formulations.budget import Budget
from hetsched.formulations.topology import Gang, PlacementOutcome, place
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks

log = logging.getLogger(__name__)


def first_fit(cluster: Cluster, busy: set[str], gangs: list[Gang]) -> dict[str, tuple[str, ...]]:
    """Topology-oblivious placement: each gang on the lowest-numbered free GPUs of the first
    node that holds it, else (if it may spread) the first free GPUs in node order."""
    free = FreeGpuIndex(cluster, frozenset(cluster.gpu_by_id) - busy)
    placement: dict[str, tuple[str, ...]] = {}
    for gang in gangs:
        chosen = free.packed(gang.gpu_type, gang.num_gpus, gang.nodes)
        if chosen is None and gang.allow_spread:
            chosen = free.spread(gang.gpu_type, gang.num_gpus, gang.nodes)
        if chosen is None:
            raise ValueError(f"first fit cannot place {gang.job}")
        placement[gang.job] = chosen
        free.take(chosen)
    return placement


def random_placement(cluster: Cluster, busy: set[str], gangs: list[Gang], seed: int = 0,
                     spread_if_needed: bool = False) -> dict[str, tuple[str, ...]]:
    """Random placement: each gang on random free GPUs of a random node that holds it, or
    (if it may spread, or ``spread_if_needed``) on random free GPUs of its type; a gang
    that cannot be placed at all is left out of the result."""
    rng = np.random.default_rng(seed)
    taken = set(busy)
    placement: dict[str, tuple[str, ...]] = {}
    for gang in gangs:
        nodes = [n for n in cluster.nodes_of_type(gang.gpu_type)
                 if sum(g not in taken for g in n.gpu_ids()) >= gang.num_gpus]
        if nodes:
            node = nodes[int(rng.integers(len(nodes)))]
            pool = [g for g in node.gpu_ids() if g not in taken]
        elif gang.allow_spread or spread_if_needed:
            pool = [g for n in cluster.nodes_of_type(gang.gpu_type) for g in n.gpu_ids()
                    if g not in taken]
        else:
            continue
        if len(pool) < gang.num_gpus:
            continue
        chosen = tuple(str(g) for g in rng.choice(pool, size=gang.num_gpus, replace=False))
        placement[gang.job] = chosen
        taken.update(chosen)
    return placement


class TopologyAdmission(PolicyHooks):
    """The ``topology`` model as a rolling policy: at every event, strict FIFO admission of
    the longest prefix of the queue that first fit can hold (:func:`admit`), then the
    exact placement model for that batch, warm-started from first fit
    (:func:`hetsched.formulations.topology.place`), within its share of ``budget`` (the
    batch's jobs over the jobs of ``instance`` not placed yet). It keeps what the static
    result reports (:meth:`result`). The static planner runs it through the simulator
    (:class:`hetsched.simulate.topology_planner.TopologyPlanner`): one event loop for replays
    and static solves alike."""

    name = "topology"
    round_s: float | None = None  # events only

    def __init__(self, instance: Instance, *, backend: str, budget: Budget, threads: int = 1,
                 seed: int = 0) -> None:
        self.instance = instance
        self.backend = backend
        self.budget = budget
        self.threads = threads
        self.seed = seed
        self.outcomes: list[PlacementOutcome] = []
        self.first_fit_total = 0.0
        self.optimal_total = 0.0
        self.placed = 0

    def decide(self, state: ClusterState) -> Decision:
        """Admit and place the batch that starts now."""
        busy = set(state.cluster.gpu_by_id) - state.free
        batch: list[tuple[Job, Gang]] = []
        hint: dict[str, tuple[str, ...]] = {}
        for job in state.pending:
            admitted = admit(self.instance, job, busy | {g for p in hint.values() for g in p})
            if admitted is None:
                break
            gang, gpus = admitted
            batch.append((job, gang))
            hint[job.id] = gpus
        if not batch:
            return Decision()
        gangs = tuple(g for _, g in batch)
        # This batch's part of the budget: its share of the jobs still to place.
        part = self.budget.part(len(batch) / (len(self.instance.jobs) - self.placed))
        outcome = place(state.cluster, busy, gangs, backend=self.backend, budget=part,
                        threads=self.threads, seed=self.seed, hint=hint)
        if not outcome.placement:
            log.warning("placement failed (%s): using first fit", outcome.message)
            outcome.placement = hint
        self.outcomes.append(outcome)
        starts = []
        for job, gang in batch:
            gpus = outcome.placement[job.id]
            starts.append(Start(job.id, gang.gpu_type, gpus))
            self.first_fit_total += predicted_throughput(self.instance, job, gang.gpu_type,
                                                         hint[job.id])
            self.optimal_total += predicted_throughput(self.instance, job, gang.gpu_type, gpus)
        self.placed += len(batch)
        return Decision(tuple(starts))

    def result(self, schedule: Schedule) -> Result:
        """The static result of the schedule this policy produced."""
        return topology_result(self.instance, schedule, self.outcomes, self.first_fit_total,
                               self.optimal_total)


def admit(instance: Instance, job: Job,
          taken: set[str]) -> tuple[Gang, tuple[str, ...]] | None:
    """A gang for ``job`` on the first GPU type where first fit can place it now."""
    count = job.num_gpus
    for gpu_type in instance.cluster.type_names:
        if not job.may_use(gpu_type):
            continue
        packed = instance.throughput.throughput(job.job_type, gpu_type, count,
                                                Placement.PACKED)
        spread = instance.throughput.throughput(job.job_type, gpu_type, count,
                                                Placement.SPREAD)
        weight = sensitivity(instance, job, gpu_type, count)
        if packed > 0:
            gang = Gang(job.id, gpu_type, count, weight, allow_spread=False,
                        nodes=job.allowed_nodes)
            try:
                return gang, first_fit(instance.cluster, taken, [gang])[job.id]
            except ValueError:
                pass
        if spread > 0 and count >= 2:
            gang = Gang(job.id, gpu_type, count, weight, allow_spread=True,
                        nodes=job.allowed_nodes)
            try:
                gpus = first_fit(instance.cluster, taken, [gang])[job.id]
            except ValueError:
                continue
            if instance.cluster.placement_of(gpus) is Placement.SPREAD:
                return gang, gpus
    return None


def topology_result(instance: Instance, schedule: Schedule, outcomes: list[PlacementOutcome],
                    first_fit_total: float, optimal_total: float) -> Result:
    """The planner's result: the placements' total communication cost, the bound the sum
    of the batches' proven bounds, and the predicted throughputs against first fit."""
    cost = sum(o.cost for o in outcomes)
    bounds = [o.bound for o in outcomes]
    bound = sum(b for b in bounds if b is not None) if all(
        b is not None for b in bounds) else None
    proven = all(o.status is Status.OPTIMAL for o in outcomes)
    # One batch placed optimally is a proven optimum of the placement problem; with
    # several batches each is optimal given the ones before, not jointly.
    stopped = sum(o.status is Status.TIME_LIMIT for o in outcomes)
    status = Status.OPTIMAL if proven and len(outcomes) == 1 else \
        Status.TIME_LIMIT if stopped else Status.FEASIBLE
    extra: dict[str, Any] = {
        "batches": len(outcomes),
        "batches_stopped_by_the_budget": stopped,
        "all_batches_optimal": proven,
        "fragmentation_last_batch": outcomes[-1].fragmentation if outcomes else 0,
        "predicted_throughput_total": optimal_total,
        "first_fit_predicted_throughput_total": first_fit_total,
        "predicted_throughput": {
            a.job: predicted_throughput(instance, instance.job_by_id[a.job], a.gpu_type,
                                        a.gpus)
            for a in schedule
        },
    }
    message = "" if proven else "some placement solves stopped before proving optimality"
    return Result(status, cost if outcomes else math.inf if instance.jobs else 0.0, bound,
                  0.0, schedule, "topology", message=message, extra=extra)


def topology_replacement(instance: Instance, schedule: Schedule, *, backend: str = "cpsat",
                         budget: Budget | None = None, threads: int = 1,
                         seed: int = 0) -> tuple[Schedule, dict[str, Any]]:
    """The same schedule (jobs, GPU types, nodes, start and finish times) with the GPUs
    inside each node chosen by the exact placement model: the jobs that start together on
    a node are placed jointly on the GPUs of that node free at that moment.

    Packed gangs stay on their node, so their throughput and finish times do not change
    and the schedule stays valid; spread gangs keep their GPUs, and a node that holds
    part of a spread gang keeps its original GPU choice. Returns the schedule and the
    predicted-throughput comparison with the original placement. Each batch gets a share
    of what is left of ``budget`` (the one budget of the solve); a batch that gets nothing
    keeps its first-fit GPUs.
    """
    budget = budget or Budget.unlimited()
    cluster = instance.cluster
    jobs = instance.job_by_id
    spread_nodes = {cluster.gpu_by_id[g].node for a in schedule if len(a.gpus) > 1
                    and cluster.placement_of(a.gpus) is Placement.SPREAD for g in a.gpus}
    movable: dict[str, list[Assignment]] = {}
    fixed: list[Assignment] = []
    for a in schedule:
        node = cluster.gpu_by_id[a.gpus[0]].node
        if node in spread_nodes or cluster.placement_of(a.gpus) is Placement.SPREAD:
            fixed.append(a)
        else:
            movable.setdefault(node, []).append(a)
    placed: list[Assignment] = list(fixed)
    left = sum(len(members) for members in movable.values())  # jobs still to place
    batches = 0
    all_optimal = True
    for node, assignments in movable.items():
        others = {g.id for g in cluster.gpus if g.node != node}
        running: list[tuple[float, tuple[str, ...]]] = []
        by_start: dict[float, list[Assignment]] = {}
        for a in assignments:
            by_start.setdefault(a.start, []).append(a)
        for start in sorted(by_start):
            batch = sorted(by_start[start], key=lambda a: a.job)
            running = [(f, g) for f, g in running if f > start + 1e-9]
            busy = others | {g for _, gpus in running for g in gpus}
            gangs = tuple(
                Gang(a.job, a.gpu_type, len(a.gpus),
                     sensitivity(instance, jobs[a.job], a.gpu_type, len(a.gpus)))
                for a in batch)
            hint = first_fit(cluster, busy, list(gangs))
            if any(len(a.gpus) > 1 for a in batch):
                outcome = place(cluster, busy, gangs, backend=backend,
                                budget=budget.part(len(batch) / max(1, left)), threads=threads,
                                seed=seed, hint=hint)
                chosen = outcome.placement or hint
                batches += 1
                all_optimal &= outcome.status is Status.OPTIMAL
            else:
                chosen = hint  # single GPUs: every choice costs nothing
            for a in batch:
                gpus = chosen[a.job]
                placed.append(Assignment(a.job, a.gpu_type, gpus, a.start, a.finish))
                running.append((a.finish, gpus))
            left -= len(batch)
    new = Schedule(tuple(placed))
    before = sum(predicted_throughput(instance, jobs[a.job], a.gpu_type, a.gpus)
                 for a in schedule)
    after = sum(predicted_throughput(instance, jobs[a.job], a.gpu_type, a.gpus) for a in new)
    extra = {
        "placement": "topology",
        "placement_batches": batches,
        "placement_all_batches_optimal": all_optimal,
        "predicted_throughput_total": after,
        "first_fit_predicted_throughput_total": before,
        "predicted_throughput": {a.job: predicted_throughput(instance, jobs[a.job], a.gpu_type,
                                                             a.gpus) for a in new},
    }
    return new, extra
