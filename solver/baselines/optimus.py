"""Optimus (Peng et al., EuroSys 2018): greedy marginal-gain GPU allocation on a speed model."""

from __future__ import annotations

import heapq

from solver.baselines.common import GpuPool, SpeedBook, StarvationGuard, place
from solver.data import Job
from solver.rolling import ClusterState, Decision, Start


class Optimus:
    """Greedy marginal gain with the fitted speed model, non-preemptive.

    At each decision the free GPUs are handed out one allocation step at a time: every
    pending job may get, on one GPU type, any of its allowed gang sizes, and an allocated
    job may grow to a larger allowed size on the same type. Each step is worth its
    marginal gain per GPU, ``(1/T' - 1/T) / (n' - n)``, where ``T`` is the job's predicted
    remaining time (remaining steps / predicted steps/s, ``1/T = 0`` unallocated) and
    ``n`` its GPUs: the growth in the fraction of the job done per second, per GPU added.
    The step of largest gain that fits the free GPUs of its type is taken, until none
    fits. Then the gangs are placed, largest first (packed on the fullest node that holds
    them, else spread; a gang that does not fit is tried at its smaller sizes).

    Simplified: Optimus re-allocates every running job every interval; here running
    gangs are kept (changing one costs a restart), and only the GPUs free at a decision
    are allocated. Optimus allocates parameter servers and workers; here GPUs only.

    Starvation guard: a job that has waited ``starvation_factor`` times its predicted
    duration is promoted; promoted jobs are served first in arrival order at their
    smallest size on their fastest type with room, and one that fits nowhere reserves its
    fastest type (nothing else starts there) until it fits.
    """

    name = "optimus"

    def __init__(self, *, starvation_factor: float = 8.0) -> None:
        self.speeds = SpeedBook()
        self.guard = StarvationGuard(starvation_factor)

    def decide(self, state: ClusterState) -> Decision:
        """Allocate the free GPUs by marginal gain."""
        promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job))
        if not state.pending or not state.free:
            return Decision()
        pool = GpuPool(state.cluster, state.free)
        starts: list[Start] = []
        reserved: set[str] = set()
        for job in sorted((j for j in state.pending if j.id in promoted),
                          key=lambda j: (j.arrival, j.id)):
            start = None
            for count in job.gpu_counts:
                types = [t for t in self.speeds.speeds(state, job, count) if t not in reserved]
                start = place(state, job, types, count, pool)
                if start is not None:
                    break
            if start is not None:
                starts.append(start)
                continue
            preferred = [t for t in self.speeds.speeds(state, job) if t not in reserved]
            if preferred:
                reserved.add(preferred[0])
        others = [j for j in state.pending if j.id not in promoted]
        plan = self._allocate(state, others, pool, reserved)
        for job, gpu_type, count in sorted(plan, key=lambda p: (-p[2], p[0].arrival, p[0].id)):
            for size in sorted((c for c in job.gpu_counts if c <= count), reverse=True):
                if gpu_type not in self.speeds.speeds(state, job, size):
                    continue
                start = place(state, job, [gpu_type], size, pool)
                if start is not None:
                    starts.append(start)
                    break
        return Decision(tuple(starts))

    def _allocate(self, state: ClusterState, jobs: list[Job],
                  pool: GpuPool, reserved: set[str]) -> list[tuple[Job, str, int]]:
        """The greedy: (job, GPU type, GPUs) for every job that got GPUs."""
        types = state.cluster.type_names
        left = {t: 0 if t in reserved else pool.available(t, with_victims=False)
                for t in types}
        rate: dict[tuple[str, str, int], float] = {}  # 1/T: fraction done per second
        heap: list[tuple[float, float, str, int, int, int]] = []
        by_id = {job.id: job for job in jobs}
        version = dict.fromkeys(by_id, 0)
        current: dict[str, tuple[int, int]] = {}  # job -> (type index, GPUs)

        def push(job: Job, type_index: int | None, count: int) -> None:
            base = 0.0 if type_index is None else rate[job.id, types[type_index], count]
            for k, gpu_type in enumerate(types):
                if type_index is not None and k != type_index:
                    continue
                for size in job.gpu_counts:
                    if size <= count:
                        continue
                    key = (job.id, gpu_type, size)
                    if key not in rate:
                        speed = self.speeds.speeds(state, job, size).get(gpu_type, 0.0)
                        remaining = max(state.remaining.get(job.id, job.work), 1e-9)
                        rate[key] = speed / remaining
                    gain = (rate[key] - base) / (size - count)
                    if gain > 0:
                        heapq.heappush(heap, (-gain, job.arrival, job.id, k, size,
                                              version[job.id]))

        for job in jobs:
            push(job, None, 0)
        while heap:
            _, _, job_id, k, size, stamp = heapq.heappop(heap)
            if stamp != version[job_id]:
                continue
            _, had = current.get(job_id, (k, 0))
            extra = size - had
            if left[types[k]] < extra:
                continue  # free GPUs only shrink: it will never fit in this decision
            left[types[k]] -= extra
            current[job_id] = (k, size)
            version[job_id] += 1
            push(by_id[job_id], k, size)
        return [(by_id[j], types[k], n) for j, (k, n) in current.items()]
