"""The waiting jobs ``progress`` leaves out of its MILP (hetsched.policies.progress_waiting):
on random rounds, brute force over every choice shows that no optimal choice of the
whole round takes a job left out and that the round without them has the same optimum;
replays with and without leaving jobs out decide the same and pass the checker."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import ThroughputTable
from hetsched.formulations.progress.problem import RoundProblem
from hetsched.policies.progress import Progress
from hetsched.policies.progress_params import ProgressParams
from hetsched.policies.rolling import ClusterState, PendingFeed, PendingLog, RunningJob
from hetsched.replaying import check_replay
from hetsched.simulate.simulator import Simulator


def two_types() -> tuple[Cluster, ThroughputTable]:
    """Two servers of two GPUs, one per type (4 GPUs): 'cnn' is 3x faster on fast GPUs,
    'rnn' 1.5x; two-GPU gangs run packed only, at 1.8x one GPU."""
    cluster = Cluster((GpuType("fast"), GpuType("slow")),
                      (Node("f", "fast", 2), Node("s", "slow", 2)))
    rows = []
    for job_type, fast in (("cnn", 3.0), ("rnn", 1.5)):
        for gpu_type, speed in (("fast", fast), ("slow", 1.0)):
            rows.append((job_type, gpu_type, 1, "packed", speed))
            rows.append((job_type, gpu_type, 2, "packed", 1.8 * speed))
    return cluster, ThroughputTable.from_rows(rows)


def random_state(rng: random.Random, cluster: Cluster, table: ThroughputTable,
                 waiting: int) -> ClusterState:
    """A round with one job running on a fast GPU and ``waiting`` jobs in the queue (a
    fifth of them two-GPU gangs, some preempted before), with a queue feed."""
    pending = tuple(Job(f"w{i}", 0.0, rng.choice(["cnn", "rnn"]),
                        2 if rng.random() < 0.2 else 1, rng.uniform(100.0, 10_000.0))
                    for i in range(waiting))
    running = (RunningJob(Job("r", 0.0, "cnn", 1, 5_000.0), "fast", ("f/0",), 0.0,
                          rng.uniform(100.0, 5_000.0)),)
    log = PendingLog()
    for job in pending:
        log.joined(job)
    attained = {"r": 10.0, **{j.id: 5.0 for j in pending if rng.random() < 0.3}}
    free = frozenset(g for g in cluster.gpu_by_id if g != "f/0")
    return ClusterState(now=0.0, cluster=cluster, throughput=table, pending=pending,
                        remaining={j.id: j.work for j in pending}, running=running,
                        free=free, attained=attained,
                        pending_feed=PendingFeed(log, len(log.entries)))


def optima(problem: RoundProblem) -> tuple[float, list[frozenset[int]]]:
    """The best total value of ``problem`` and every choice of options reaching it
    (within 1e-12 of it), by enumerating each job's option or none."""
    by_job: dict[int, list[int]] = {}
    for k, job in enumerate(problem.option_job):
        by_job.setdefault(int(job), []).append(k)
    best, found = -1.0, []
    for picks in itertools.product(*[[None, *ks] for ks in by_job.values()]):
        chosen = np.zeros(problem.num_options, dtype=np.bool_)
        chosen[[k for k in picks if k is not None]] = True
        if not problem.feasible(chosen):
            continue
        worth = problem.worth(chosen)
        if worth > best + 1e-12 * max(1.0, best):
            best, found = worth, []
        if worth >= best - 1e-12 * max(1.0, best):
            found.append(frozenset(int(k) for k in np.flatnonzero(chosen)))
    return best, found


def test_a_job_left_out_is_in_no_optimal_choice_and_the_optimum_is_kept() -> None:
    cluster, table = two_types()
    rng = random.Random(7)
    left_out_rounds = 0
    for _ in range(25):
        state = random_state(rng, cluster, table, waiting=7)
        whole = Progress(ProgressParams(time_limit_s=None))
        options = whole.options(state)
        problem = whole.problem(state, options)
        bounded = Progress(ProgressParams(time_limit_s=None))
        found = bounded._bounded(state)
        assert found is not None
        kept_options, kept_value = found
        kept_jobs = {o.job.id for o in kept_options}
        left_out = {o.job.id for o in options} - kept_jobs
        left_out_rounds += bool(left_out)
        # The options kept are the whole round's, in its order, at the same values.
        index = [next(k for k, o in enumerate(options) if (o.job.id, o.gpu_type, o.size)
                      == (q.job.id, q.gpu_type, q.size)) for q in kept_options]
        assert index == sorted(index)
        assert kept_value == pytest.approx(problem.value[index], rel=0, abs=0)
        best, choices = optima(problem)
        for choice in choices:
            assert not {options[k].job.id for k in choice} & left_out
        kept_best, _ = optima(bounded.problem(state, kept_options, kept_value))
        assert kept_best == pytest.approx(best, rel=1e-12)
    # With 4 GPUs and 7 waiting jobs, jobs are left out in most rounds.
    assert left_out_rounds >= 15


class Whole(Progress):
    """``progress`` that never leaves a waiting job out."""

    @property
    def plain(self) -> bool:
        return False


def test_replays_with_and_without_jobs_left_out_are_the_same() -> None:
    # 40 jobs of distinct random work on 4 GPUs, most at once: up to 38 wait.
    cluster, table = two_types()
    rng = random.Random(3)
    jobs = [Job(f"j{i}", 0.0 if i < 30 else 600.0 * i, rng.choice(["cnn", "rnn"]),
                2 if rng.random() < 0.2 else 1, rng.uniform(1_000.0, 40_000.0))
            for i in range(40)]
    runs = {}
    for policy in (Progress(ProgressParams(time_limit_s=None)),
                   Whole(ProgressParams(time_limit_s=None))):
        replay = Simulator(cluster, jobs, policy, truth=table).run()
        assert check_replay(replay, jobs, table) == []
        runs[type(policy).__name__] = (
            {r.job.id: [(s.gpu_type, s.gpus, s.start, s.finish) for s in r.segments]
             for r in replay.records.values()}, policy.figures())
    # The same schedule, segment by segment; only the plain one left jobs out.
    assert runs["Progress"][0] == runs["Whole"][0]
    assert int(runs["Progress"][1]["progress_waiting_left_out"]) > 100
    assert "progress_waiting_left_out" not in runs["Whole"][1]
