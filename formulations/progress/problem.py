"""One round of the ``progress`` policy as data: which job may run where, what it is worth.

An *option* is one way a job can run for the next round: a GPU type and a gang size,
with a value (the weighted share of the job's remaining work that the option finishes
per second, scaled by the policy; see :mod:`hetsched.policies.progress`). The round's
allocation picks at most one option per job so that no GPU type gives out more GPUs
than it has and, for gangs that must run packed on one server, no more such gangs than
the type's servers can hold. Everything is arrays: a round with 2,000 active jobs on
three types is about 6,000 options.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class RoundProblem:
    """The options of one round.

    ``option_job[k]``, ``option_type[k]``, ``option_size[k]``: job index (0 ..
    ``num_jobs - 1``), GPU type index (0 .. ``len(capacity) - 1``) and GPUs of option
    ``k``; ``value[k] >= 0`` what it is worth (larger is better). ``option_partner[k]``
    (optional; -1: none): a second job the option runs, packed on the same GPU (a *pair*;
    a pair's job may hold no option of its own besides), so the option counts for both
    jobs; a pair that joins a job already running packed on its GPU takes no GPU
    (``option_size[k] == 0``). ``capacity[t]``: GPUs
    of type ``t``. ``server_size[t]``: the largest server of type ``t``; an option with
    ``packed[k]`` must have its gang on one server, so the packed options of more than
    half a server of type ``t`` (no two fit on one server) are at most
    ``servers_over_half[t]``, the servers of that type that can hold such a gang.
    ``start[k]``: an optional warm start (1 where the option was chosen last round and
    is still offered)."""

    num_jobs: int
    option_job: Index
    option_type: Index
    option_size: Index
    value: Vector
    capacity: Index
    packed: npt.NDArray[np.bool_]
    server_size: Index
    servers_over_half: Index
    start: npt.NDArray[np.bool_] | None = None
    option_partner: Index | None = None

    def __post_init__(self) -> None:
        count = len(self.option_job)
        if self.option_partner is not None:
            partner = self.option_partner
            if len(partner) != count:
                raise ValueError(f"option_partner has {len(partner)} entries, expected "
                                 f"{count}")
            if count and (partner.min() < -1 or partner.max() >= self.num_jobs
                          or np.any(partner == self.option_job)):
                raise ValueError("option_partner out of range (or an option's own job)")
        for name in ("option_type", "option_size", "value", "packed"):
            if len(getattr(self, name)) != count:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, "
                                 f"expected {count}")
        types = len(self.capacity)
        for name in ("server_size", "servers_over_half"):
            if len(getattr(self, name)) != types:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, "
                                 f"expected {types}")
        if count and (self.option_job.min() < 0 or self.option_job.max() >= self.num_jobs):
            raise ValueError("option_job out of range")
        if count and (self.option_type.min() < 0 or self.option_type.max() >= types):
            raise ValueError("option_type out of range")
        if count and (self.option_size < np.where(self.paired(), 0, 1)).any():
            raise ValueError("option sizes must be >= 1 (>= 0 for a pair)")
        if not np.all(np.isfinite(self.value)) or (count and self.value.min() < 0):
            raise ValueError("values must be finite and >= 0")
        if self.start is not None and len(self.start) != count:
            raise ValueError(f"start has {len(self.start)} entries, expected {count}")

    @property
    def num_options(self) -> int:
        """How many options."""
        return len(self.option_job)

    def paired(self) -> npt.NDArray[np.bool_]:
        """Options that run two jobs (``option_partner >= 0``)."""
        if self.option_partner is None:
            return np.zeros(self.num_options, dtype=np.bool_)
        return self.option_partner >= 0

    def jobs_chosen(self, chosen: npt.NDArray[np.bool_]) -> Index:
        """How many chosen options each job is in (as the option's job or its partner)."""
        count = np.bincount(self.option_job[chosen], minlength=self.num_jobs)
        if self.option_partner is not None:
            partner = self.option_partner[chosen]
            count += np.bincount(partner[partner >= 0], minlength=self.num_jobs)
        return count

    def per_gpu(self) -> Vector:
        """Each option's value per GPU (a pair that takes no GPU: its value)."""
        return self.value / np.maximum(self.option_size, 1)

    def big_packed(self) -> npt.NDArray[np.bool_]:
        """Options that must be packed and take more than half of their type's largest
        server: no two share a server."""
        half = self.server_size[self.option_type] / 2.0
        return self.packed & (self.option_size > half)

    def feasible(self, chosen: npt.NDArray[np.bool_]) -> bool:
        """Whether the options ``chosen`` respect one option per job, the capacities and
        the packed-gang limit."""
        per_job = self.jobs_chosen(chosen)
        types = len(self.capacity)
        used = np.bincount(self.option_type[chosen], weights=self.option_size[chosen],
                           minlength=types)
        big = np.bincount(self.option_type[chosen & self.big_packed()], minlength=types)
        return bool(per_job.max(initial=0) <= 1 and np.all(used <= self.capacity + 1e-9)
                    and np.all(big <= self.servers_over_half))

    def worth(self, chosen: npt.NDArray[np.bool_]) -> float:
        """The total value of the options ``chosen``."""
        return float(self.value[chosen].sum())


def greedy(problem: RoundProblem) -> npt.NDArray[np.bool_]:
    """A feasible choice: options by value per GPU (largest first, then value, then
    index), each taken if its job (and partner) has none yet and it fits. The MILP's
    fallback and, as a lower bound on the optimum, a check on it."""
    order = np.lexsort((np.arange(problem.num_options), -problem.value, -problem.per_gpu()))
    chosen = np.zeros(problem.num_options, dtype=np.bool_)
    has = np.zeros(problem.num_jobs, dtype=np.bool_)
    partner = problem.option_partner if problem.option_partner is not None else \
        np.full(problem.num_options, -1, dtype=np.int64)
    left = problem.capacity.astype(np.int64).copy()
    big_left = problem.servers_over_half.astype(np.int64).copy()
    big = problem.big_packed()
    for k in order:
        if problem.value[k] <= 0:
            continue
        job, gpu_type, size = problem.option_job[k], problem.option_type[k], \
            problem.option_size[k]
        mate = partner[k]
        if has[job] or (mate >= 0 and has[mate]) or left[gpu_type] < size or \
                (big[k] and big_left[gpu_type] < 1):
            continue
        chosen[k] = has[job] = True
        if mate >= 0:
            has[mate] = True
        left[gpu_type] -= size
        if big[k]:
            big_left[gpu_type] -= 1
    return chosen


def best_each(problem: RoundProblem) -> npt.NDArray[np.bool_] | None:
    """Each job's most valuable option (ties: the one of ``start``, then the lowest
    index; none for a job whose options are all worth 0) when they fit together, else
    ``None``. When they fit they are optimal: no choice is worth more than every job's
    best option (the MILP's objective without its capacity rows). This is the round of
    a cluster with room for everyone: on Alibaba's openb inventory nearly every round."""
    count = problem.num_options
    if count == 0:
        return np.zeros(0, dtype=np.bool_)
    start = problem.start if problem.start is not None else np.zeros(count, dtype=np.bool_)
    order = np.lexsort((np.arange(count), ~start, -problem.value, problem.option_job))
    jobs = problem.option_job[order]
    first = order[np.r_[True, jobs[1:] != jobs[:-1]]]
    chosen = np.zeros(count, dtype=np.bool_)
    chosen[first[problem.value[first] > 0]] = True
    return chosen if problem.feasible(chosen) else None
