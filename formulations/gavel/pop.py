"""POP (Narayanan et al., SOSP 2021): the allocation LP split into k random sub-problems.

Every job goes to one of ``k`` partitions and each partition gets ``C_k / k`` GPUs of
every type k. POP draws the partitions at random; here the draw is a seeded hash of each
job's id, and by default it is *stratified*: the jobs of each class (identical to the LP,
:class:`~hetsched.formulations.gavel.matrix.JobClasses`) are dealt round-robin in hash
order, so each partition holds a 1/k sample of every class rather than a random one. On
max-min, where the worst partition sets the objective, this is what keeps the loss small:
10,000 jobs of Gavel's traces in 16 partitions lost 1.5% with the plain hash and 0.17%
stratified (benchmarks/allocation.py). The k sub-problems are solved
independently and their allocations put side by side. The result is feasible for the
whole problem (each partition uses at most its share of every type) and at most as good
as the monolithic optimum; :class:`PartitionedAllocation` reports how close it came
(POP's "objective lost"), computed with the class LP, which is cheap at any size.
"""

from __future__ import annotations

import time
import zlib
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.matrix import AllocationSolver, JobClasses
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Objective
from hetsched.formulations.mip.model import Index


def partition_of(job_ids: tuple[str, ...], partitions: int, seed: int = 0,
                 classes: Index | None = None) -> Index:
    """The partition (0 .. partitions-1) of each job, from a hash of ``seed`` and its id
    (the same in every process and every run). Without ``classes``: the hash modulo
    ``partitions`` (POP's random partition; a job keeps its partition as others come and
    go). With ``classes`` (each job's class): stratified, the jobs of each class dealt
    round-robin in hash order, the deal going on from class to class, so every partition
    gets ``n_c / k`` jobs of every class, give or take one."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    salt = f"{seed}:".encode()
    digest = np.fromiter((zlib.crc32(salt + job.encode()) for job in job_ids),
                         dtype=np.int64, count=len(job_ids))
    if classes is None:
        return digest % partitions
    order = np.lexsort((np.arange(len(job_ids)), digest, classes))
    part = np.empty(len(job_ids), dtype=np.int64)
    part[order] = np.arange(len(job_ids), dtype=np.int64) % partitions
    return part


def sub_problem(problem: AllocationProblem, jobs: Index, partitions: int) -> AllocationProblem:
    """The jobs ``jobs`` of ``problem`` with ``1/partitions`` of every GPU type."""
    return AllocationProblem(tuple(problem.job_ids[j] for j in jobs), problem.gpu_types,
                             problem.throughput[jobs], problem.scale_factors[jobs],
                             problem.capacity / partitions, problem.weights[jobs])


@dataclass(frozen=True)
class PartitionedAllocation:
    """POP's combined allocation, the monolithic optimum it is compared with, and the time
    of the partitioned solve alone (s)."""

    allocation: Allocation
    monolithic_value: float
    partitioned_s: float

    @property
    def ratio(self) -> float:
        """The combined allocation's objective over the monolithic optimum (<= 1)."""
        if self.monolithic_value == 0:
            return 1.0
        return self.allocation.value / self.monolithic_value


@dataclass(frozen=True)
class PartTask:
    """One partition's solve, as an executor runs it elsewhere: the partition's solver
    (with the basis of its previous solve, so the executor warm-starts it exactly as the
    solver kept in this process would), its sub-problem, and the time it may take (wall
    seconds left when it was sent, ``None`` for no limit; ``deterministic``: the budget
    counts work units, and an LP then runs to its optimum)."""

    solver: AllocationSolver
    problem: AllocationProblem
    limit_s: float | None
    deterministic: bool


def solve_part(task: PartTask) -> tuple[Allocation, AllocationSolver]:
    """Solve one partition (in a worker process, or a Ray task): its allocation and the
    solver after the solve (its new basis), which the caller keeps for the next solve."""
    budget = Budget(task.limit_s, deterministic=task.deterministic)
    return task.solver.solve(task.problem, budget), task.solver


class PartitionedSolver:
    """POP over :class:`AllocationSolver`: one warm-started solver per partition, solved
    in turn, or by an ``executor`` (another process, a Ray cluster: any
    :class:`~concurrent.futures.Executor` whose ``map`` pickles its arguments) that gets
    each partition's solver with its basis and hands it back, so both give the same
    allocations."""

    def __init__(self, objective: Objective | str, partitions: int, *, seed: int = 0,
                 by_class: bool = True, executor: Executor | None = None,
                 compare: bool = True, stratified: bool = True) -> None:
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        self.objective = Objective(objective)
        self.partitions = partitions
        self.seed = seed
        self.by_class = by_class
        self.executor = executor
        #: deal each class's jobs evenly over the partitions (else POP's plain hash)
        self.stratified = stratified
        #: also solve the monolithic class LP, to report the objective lost
        self.compare = compare
        self._solvers = [AllocationSolver(self.objective, by_class=by_class)
                         for _ in range(partitions)]

    def solve(self, problem: AllocationProblem,
              budget: Budget | None = None) -> PartitionedAllocation:
        """The k sub-problems' allocations side by side (not optimal for ``problem``:
        ``Allocation.optimal`` is false unless k is 1); the monolithic optimum if
        ``compare``, else NaN."""
        began = time.perf_counter()
        classes = JobClasses.of(problem).of_job if self.stratified else None
        part = partition_of(problem.job_ids, self.partitions, self.seed, classes)
        members = [np.flatnonzero(part == p) for p in range(self.partitions)]
        subs = [(p, sub_problem(problem, jobs, self.partitions))
                for p, jobs in enumerate(members) if len(jobs)]
        if self.executor is not None:
            budget = budget or Budget.unlimited()
            limit = None if budget.deterministic else budget.remaining()
            tasks = [PartTask(self._solvers[p], sub, limit, budget.deterministic)
                     for p, sub in subs]
            answers = []
            for (p, _), (answer, solver) in zip(subs, self.executor.map(solve_part, tasks),
                                                strict=True):
                answers.append(answer)
                self._solvers[p] = solver
        else:
            answers = [self._solvers[p].solve(sub, budget) for p, sub in subs]
        fractions = np.zeros(problem.throughput.shape)
        ok = all(answer.ok for answer in answers)
        for (p, _), answer in zip(subs, answers, strict=True):
            fractions[members[p]] = answer.fractions
        value = problem.objective_value(self.objective, fractions) if ok else float("nan")
        elapsed = time.perf_counter() - began
        combined = Allocation(problem, fractions, value, ok and self.partitions == 1, elapsed)
        monolithic = float("nan")
        if self.compare and ok:
            monolithic = AllocationSolver(self.objective, warm_start=False).solve(problem,
                                                                                   budget).value
        return PartitionedAllocation(combined, monolithic, elapsed)
