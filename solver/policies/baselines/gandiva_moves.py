"""What ``gandiva`` adds to a time-slicing decision (:mod:`hetsched.policies.baselines.gandiva`):
packing of one-GPU jobs two to a GPU at measured pair speeds (:func:`pack`), and
migration of gangs spread over several nodes onto one node (:func:`spread_moves`).

**Packing.** The decision's time slicing first decides who runs; packing then only adds
jobs beside them, so no job loses its turn to a pair. A *host* is a job of one GPU that
the decision starts alone, or a packed job left alone on its GPU (its partner ended or
was preempted) that keeps running; a *joiner* is a job of one GPU left without a GPU:
one still waiting after the decision, or one the decision suspends (it had its quantum).
A joiner goes beside a host on the host's GPU when their measured combined rate on that
GPU type (:meth:`~hetsched.core.sharing.CoLocationModel.combined`, both directions
measured) is above 1, the pairs of best combined rate first, each host and joiner once;
both then run packed (``Start.packed``): a started host starts packed instead of alone,
a suspended joiner restarts packed instead of waiting (the restart penalty as for any
restart), a packed job alone keeps running and is joined. Only a waiting job may join a
packed job alone: every pair has a job that waited at the decision. Jobs packed are
whole jobs of one GPU that ask for no CPUs or memory of their node (their node's are
not counted for a second job).

**Migration.** A running gang spread over several nodes moves onto one node of its GPU
type whose free GPUs (those the decision's starts left) hold it whole, where it runs
faster than spread (the throughput model's packed speed above its spread one): a
preemption and a start of the same job in one decision, paying the restart penalty,
the largest gangs first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start, throughput_of
from hetsched.core.records import Job, packed_holder
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import Placement
from hetsched.policies.rolling import ClusterState, Decision, RunningJob

__all__ = ["CANDIDATES", "has_packing_pair", "pack", "packable", "spread_moves"]

#: The most waiting jobs a decision tries as joiners: the first ones of one GPU in the
#: round-robin order (enough to fill every host of a small cluster many times over).
CANDIDATES = 96


def has_packing_pair(colocation: CoLocationModel | None) -> bool:
    """Whether some measured pair of ``colocation`` has a combined rate above 1."""
    if colocation is None:
        return False
    return any((rate := colocation.combined(gpu_type, kind, other)) is not None and rate > 1.0
               for gpu_type, kind, other in colocation.pairs)


def packable(job: Job) -> bool:
    """Whether ``job`` may run packed: a whole job of one GPU asking for no node CPUs or
    memory."""
    return job.num_gpus == 1 and job.gpu_counts == (1,) and job.gpu_share is None and \
        not job.needs_node_resources


def _lone_packed(state: ClusterState, dropped: AbstractSet[str]) -> list[RunningJob]:
    """The packed runs alone on their GPU (no other run there, packed or a share job)
    that the decision keeps (not in ``dropped``), in GPU order."""
    on_gpu: dict[str, list[RunningJob]] = {}
    for run in state.running:
        if run.job.id not in dropped and len(run.gpus) == 1 and \
                (run.packed or run.job.gpu_share is not None):
            on_gpu.setdefault(run.gpus[0], []).append(run)
    return [runs[0] for _, runs in sorted(on_gpu.items())
            if len(runs) == 1 and runs[0].packed]


def pack(state: ClusterState, decision: Decision, waiting: Iterable[Job],
         jobs: Mapping[str, Job], pool: FreeGpuIndex) -> Decision:
    """``decision`` with joiners packed beside hosts (module docstring). ``waiting``: the
    waiting jobs in round-robin order (read lazily, up to :data:`CANDIDATES` of one GPU
    not started by the decision); ``jobs``: the waiting jobs by id; ``pool``: the free
    GPUs after the decision (checked and taken for joins of packed jobs alone)."""
    colocation = state.colocation
    assert colocation is not None
    gpu_by_id = state.cluster.gpu_by_id
    preempted = set(decision.preempt)
    # Hosts: (job, GPU, the index of its start in the decision, or -1 for a packed job
    # alone that keeps running).
    hosts: list[tuple[Job, str, int]] = []
    for index, start in enumerate(decision.start):
        job = jobs.get(start.job)
        if job is not None and not start.packed and len(start.gpus) == 1 and packable(job) \
                and start.job not in preempted:
            hosts.append((job, start.gpus[0], index))
    hosts += [(run.job, run.gpus[0], -1) for run in _lone_packed(state, preempted)]
    if not hosts:
        return decision
    started = {start.job for start in decision.start}
    joiners: list[tuple[Job, bool]] = []  # (job, it waits)
    for job in waiting:
        if len(joiners) == CANDIDATES:
            break
        if job.id not in started and packable(job):
            joiners.append((job, True))
    held = state.held()
    joiners += [(held[job_id].job, False) for job_id in decision.preempt
                if job_id in held and packable(held[job_id].job)]
    options: list[tuple[float, int, int]] = []
    for h, (host, gpu, index) in enumerate(hosts):
        gpu_type = gpu_by_id[gpu].gpu_type
        node = gpu_by_id[gpu].node
        for j, (job, waits) in enumerate(joiners):
            if (index < 0 and not waits) or not job.may_use(gpu_type) or \
                    not job.may_use_node(node) or throughput_of(
                        state.throughput, job.job_type, gpu_type, 1, Placement.PACKED) <= 0:
                continue
            rate = colocation.combined(gpu_type, host.job_type, job.job_type)
            if rate is not None and rate > 1.0:
                options.append((-rate, j, h))
    hosted: dict[int, Job] = {}  # host -> its joiner
    joined: set[int] = set()
    for _, j, h in sorted(options):
        if h in hosted or j in joined:
            continue
        host, gpu, index = hosts[h]
        job = joiners[j][0]
        if index < 0:  # (a packed job alone: its GPU must hold a second half)
            if not pool.can_hold((gpu,), packed_holder(job)):
                continue
            pool.take((gpu,), packed_holder(job))
        hosted[h] = job
        joined.add(j)
    if not hosted:
        return decision
    partner = {hosts[h][2]: job for h, job in hosted.items() if hosts[h][2] >= 0}
    starts: list[Start] = []
    for index, start in enumerate(decision.start):
        job = partner.get(index)
        if job is None:
            starts.append(start)
            continue
        starts += [Start(start.job, start.gpu_type, start.gpus, packed=True),
                   Start(job.id, start.gpu_type, start.gpus, packed=True)]
    for h, job in sorted(hosted.items()):
        _, gpu, index = hosts[h]
        if index < 0:
            starts.append(Start(job.id, gpu_by_id[gpu].gpu_type, (gpu,), packed=True))
    return Decision(tuple(starts), decision.preempt)


def spread_moves(state: ClusterState, pool: FreeGpuIndex, skip: AbstractSet[str]
                 ) -> list[tuple[RunningJob, Start]]:
    """The running gangs but ``skip`` spread over several nodes that move onto one node
    (module docstring), each with its start there; the new GPUs are taken from ``pool``
    (the old ones are not given back)."""
    gpu_by_id = state.cluster.gpu_by_id
    spread = [run for run in state.running if len(run.gpus) > 1 and run.job.id not in skip
              and len({gpu_by_id[g].node for g in run.gpus}) > 1]
    spread.sort(key=lambda run: (-len(run.gpus), run.job.arrival, run.job.id))
    moves: list[tuple[RunningJob, Start]] = []
    for run in spread:
        job, gpu_type, count = run.job, run.gpu_type, len(run.gpus)
        if pool.available(gpu_type) < count or throughput_of(
                state.throughput, job.job_type, gpu_type, count, Placement.PACKED) <= \
                throughput_of(state.throughput, job.job_type, gpu_type, count,
                              Placement.SPREAD):
            continue
        gpus = pool.best_fit(job, gpu_type, count, state.throughput)
        if gpus is None or len({gpu_by_id[g].node for g in gpus}) > 1:
            continue  # (no node holds it whole: a spread placement gains nothing)
        pool.take(gpus, job)
        moves.append((run, Start(job.id, gpu_type, gpus)))
    return moves
