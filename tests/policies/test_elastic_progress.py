"""Elastic jobs under ``progress``: the round chooses each elastic job's GPU
count among its allowed counts, a running job is resized onto a gang that may include its
own GPUs (restart penalty paid), and it grows into GPUs freed while nobody waits."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.files.traces import read_trace
from hetsched.policies.progress import Progress
from hetsched.policies.progress_gangs import Option
from hetsched.policies.progress_params import ProgressParams, hesrpt_weight
from hetsched.policies.rolling import ClusterState
from hetsched.registry import rolling
from hetsched.replaying import check_replay
from hetsched.simulate.simulator import Simulator
from hetsched.speeds.pollux import elastic_job_type_name, read_pollux
from tests.helpers import ROOT

TOY = ROOT / "tests" / "data" / "pollux"


def test_elastic_jobs_are_read_with_their_counts_and_goal() -> None:
    # toy: goal 240 base-batch steps; a batch on 1 GPU up to 8 GPUs (8 x 5 samples = the
    # largest batch, 40), the requested count kept.
    trace = read_trace(TOY / "workloads" / "workload-1.csv", "pollux", elastic=True)
    assert {job.job_type for job in trace.jobs} == {"toy (elastic)"}
    assert [job.work for job in trace.jobs] == pytest.approx([240.0] * 3)
    assert [job.num_gpus for job in trace.jobs] == [2, 1, 2]
    assert {job.allowed_gpu_counts for job in trace.jobs} == {(1, 2, 4, 6, 8)}
    with pytest.raises(InputError, match="elastic jobs need a format with batch sizes"):
        read_trace(ROOT / "tests" / "data" / "pollux" / "workloads" / "workload-1.csv",
                   "philly", elastic=True)


def test_progress_resizes_an_elastic_job_and_grows_it_into_freed_gpus() -> None:
    # One node of 2 T4s, the toy application (goal 240 base-batch steps): r1 = 1/1.5 base
    # steps/s on 1 GPU in both epochs, r2 on 2 GPUs over the job's life, what the policy
    # plans with (tests/speeds/test_pollux_speeds.py); restart penalty 30 s, 60 s rounds.
    # A (240) arrives alone at 0: both GPUs are worth more to it than one. B (120)
    # arrives at 10: 1 GPU each (worth r1/120 + 0.917 r1/remaining_A, 0.917 the restart's
    # discount) is worth more than either job alone on both (r2/120 or r2/remaining_A),
    # since A's remaining work is within 0.917 r1 / (r2 - r1) = 2.4 times B's. So A is
    # resized onto one of its own GPUs (30 s without progress) and B starts on the other.
    # B ends at 190; nobody waits, but A could grow: the boundary of 240 is a decision,
    # and A takes both GPUs again (0.917 r2 > r1). Each job runs each epoch at that
    # epoch's rate (the toy's first epoch ends at 100 base-batch steps): a run segment
    # ends there and the next continues on the same GPUs, without a restart.
    model = read_pollux(TOY / "traces")
    kind = elastic_job_type_name("toy")
    r1 = model.throughput(kind, "t4", 1, Placement.PACKED)
    counts = (1, 2)
    jobs = [Job("A", 0.0, kind, 2, 240.0, allowed_gpu_counts=counts),
            Job("B", 10.0, kind, 1, 120.0, allowed_gpu_counts=counts)]
    cluster = parse_cluster("t4=2x2")
    replay = Simulator(cluster, jobs, rolling("progress", round_s=60.0), truth=model,
                       restart_penalty_s=30.0).run()
    assert check_replay(replay, jobs, model) == []
    a = [(len(s.gpus), s.start, s.finish) for s in replay.records["A"].segments]
    b = [(len(s.gpus), s.start, s.finish) for s in replay.records["B"].segments]
    assert b == [(1, 10.0, pytest.approx(160.0)), (1, pytest.approx(160.0), 190.0)]
    first, second = (model.throughput_after(kind, "t4", 2, Placement.PACKED, done)
                     for done in (0.0, 150.0))  # (on both GPUs, in each epoch)
    at_ten = 10 * first
    boundary = 40 + (100 - at_ten) / r1
    at_grow = 100 + (240 - boundary) * r1
    assert a == [(2, 0.0, 10.0), (1, 10.0, pytest.approx(boundary)),
                 (1, pytest.approx(boundary), 240.0),
                 (2, 240.0, pytest.approx(270.0 + (240 - at_grow) / second))]
    assert [s.continued for s in replay.records["A"].segments] == [False, False, True, False]


def test_a_replay_of_an_elastic_workload_passes_the_checker(shared_data: Path,
                                                          tmp_path: Path) -> None:
    from hetsched.core.settings import ReplaySettings
    from hetsched.replaying import replay_trace

    workload = shared_data / "pollux" / "workloads" / "workload-6.csv"
    ran = replay_trace(workload, "pollux", "t4=64x4", "progress",
                       settings=ReplaySettings(elastic=True, limit_jobs=40))
    assert (ran.summary.completed, ran.summary.fallbacks) == (40, 0)
    # Elastic jobs ran on counts other than the ones they asked for.
    asked = {job.id: job.num_gpus for job in read_trace(workload, "pollux", elastic=True,
                                                        limit_jobs=40).jobs}
    ran_on = {(job_id, len(s.gpus)) for job_id, r in ran.replay.records.items()
              for s in r.segments}
    assert any(n != asked[job_id] for job_id, n in ran_on)
    # (replay_trace runs the checker on every replay: a violation is an error)


def first_counts(gpu_price: float) -> dict[str, int]:
    """Each job's GPU count in its first run segment, of A (100 steps) and B, C, D (1,000
    each), elastic on 1, 2 or 4 GPUs of one node of 4 (1, 1.9, 3.6 steps/s), all at 0."""
    table = ThroughputTable({("cnn", "t4", n, Placement.PACKED): speed
                             for n, speed in ((1, 1.0), (2, 1.9), (4, 3.6))})
    jobs = [Job(name, 0.0, "cnn", 1, work, allowed_gpu_counts=(1, 2, 4))
            for name, work in (("A", 100.0), ("B", 1000.0), ("C", 1000.0), ("D", 1000.0))]
    policy = rolling("progress", round_s=600.0, gpu_price=gpu_price)
    replay = Simulator(parse_cluster("t4=4x4"), jobs, policy, truth=table).run()
    assert check_replay(replay, jobs, table) == []
    return {job_id: len(record.segments[0].gpus) for job_id, record in replay.records.items()
            if record.segments and record.segments[0].start == 0.0}


def test_a_gpu_price_keeps_the_shortest_job_from_taking_every_gpu() -> None:
    # Without the price each option is worth speed / work: A on 4 GPUs 3.6 / 100 = 0.036
    # beats A on 2 and any other job on the other 2 (0.019 + 0.0019 at most).
    assert first_counts(0.0) == {"A": 4}
    # With gpu_price 1, an option on n of the 4 GPUs is worth speed / work / (1 + behind
    # x n / 4), behind: the jobs with more time left (B, C, D tie: by id, B before C
    # before D; A 3 behind, B 2, C 1, D 0). A: 1 GPU 0.01 / 1.75 = 0.00571, 2 GPUs
    # 0.019 / 2.5 = 0.0076, 4 GPUs 0.036 / 4 = 0.009; D: 0.001, 0.0019, 0.0036; C: 0.0008,
    # 0.00127; B: 0.00067, 0.00095. The best use of 4 GPUs is A and D on 2 each (0.0095),
    # ahead of A on 4 (0.009) and A on 2 with C and D on 1 (0.0094).
    assert first_counts(1.0) == {"A": 2, "D": 2}
    with pytest.raises(InputError, match="gpu_price"):
        rolling("progress", gpu_price=-1.0)


def test_a_resized_job_may_take_the_gpus_of_a_job_the_round_dropped() -> None:
    # One node of 4 T4s, 60 s rounds, horizon 360 s, restart penalty 30 s. A (1,000 steps)
    # is elastic on 1, 2 or 4 GPUs (1, 1.9, 3.6 steps/s); B (2,000) and C (100) run on 1
    # GPU at 1 step/s. At 0 A on 2 with B and C (0.0019 + 0.0005 + 0.01 a second) beats
    # A on 4 (0.0036). C ends at 100; at the boundary of 120 A has 772 steps left and B
    # 1,880: A on 4, discounted for its restart, 3.6 x (1 - 30 / 360) / 772 = 0.004275,
    # beats A on 2 beside B (1.9 / 772 + 1 / 1,880 = 0.002993). A's 4 GPUs are its own 2,
    # the free one and B's: B is preempted. A restarts (30 s) and ends at 150 + 772 / 3.6;
    # B, restarted then, 30 s later plus its 1,880 steps.
    table = ThroughputTable({("cnn", "t4", n, Placement.PACKED): speed
                             for n, speed in ((1, 1.0), (2, 1.9), (4, 3.6))})
    jobs = [Job("A", 0.0, "cnn", 2, 1000.0, allowed_gpu_counts=(1, 2, 4)),
            Job("B", 0.0, "cnn", 1, 2000.0), Job("C", 0.0, "cnn", 1, 100.0)]
    replay = Simulator(parse_cluster("t4=4x4"), jobs, rolling("progress", round_s=60.0),
                       truth=table, restart_penalty_s=30.0).run()
    assert check_replay(replay, jobs, table) == []
    a_ends = 150 + 772 / 3.6
    assert [(len(s.gpus), s.start, s.finish) for s in replay.records["A"].segments] == [
        (2, 0.0, 120.0), (4, 120.0, pytest.approx(a_ends))]
    assert [(len(s.gpus), s.start, s.finish) for s in replay.records["B"].segments] == [
        (1, 0.0, 120.0), (1, pytest.approx(a_ends), pytest.approx(a_ends + 30 + 1880))]


def test_hesrpt_weights_give_hesrpt_shares() -> None:
    # p = 0.5, c = 2, 3 jobs: heSRPT's shares theta_i = (i/3)^2 - ((i-1)/3)^2 are 1/9,
    # 3/9, 5/9 for the longest (i = 1) to the shortest (i = 3); the weights are theta^(1/2),
    # and maximising sum_j a_j sqrt(n_j) under sum_j n_j = G gives n_j = G a_j^2 / sum a^2:
    # the shares themselves.
    weights = [hesrpt_weight(rank, 3, 0.5) for rank in (1, 2, 3)]  # shortest first
    assert weights == pytest.approx([(5 / 9) ** 0.5, (3 / 9) ** 0.5, (1 / 9) ** 0.5])
    squares = [w * w for w in weights]
    assert [s / sum(squares) for s in squares] == pytest.approx([5 / 9, 3 / 9, 1 / 9])
    # Alone, a job has the whole cluster; the longest of m has theta = (1/m)^c, worth
    # theta^(1-p) = 1/m whatever p (with c = 20, theta itself is 1e-34).
    assert hesrpt_weight(1, 1, 0.9) == 1.0
    assert hesrpt_weight(50, 50, 0.95) == pytest.approx(1 / 50)
    with pytest.raises(InputError, match="speedup_exponent"):
        rolling("progress", speedup_exponent=1.0)


def counts_after_x(speedup_exponent: float | None, *, with_x: bool = True
                   ) -> dict[str, list[int]]:
    """Each job's GPU counts, in order, of X (10 steps, 1 GPU at 1 step/s; with
    ``with_x``), B (1,000) and C (4,000), elastic on 1 to 8 GPUs at sqrt(n) steps/s, all
    at 0 on one node of 8 T4s, 60 s rounds, no restart penalty."""
    table = ThroughputTable({("cnn", "t4", n, Placement.PACKED): n ** 0.5
                             for n in range(1, 9)})
    jobs = [*([Job("X", 0.0, "cnn", 1, 10.0)] if with_x else []),
            *(Job(name, 0.0, "cnn", 1, work, allowed_gpu_counts=tuple(range(1, 9)))
              for name, work in (("B", 1000.0), ("C", 4000.0)))]
    policy = rolling("progress", round_s=60.0, restart_penalty_s=0.0,
                     speedup_exponent=speedup_exponent)
    replay = Simulator(parse_cluster("t4=8x8"), jobs, policy, truth=table,
                       restart_penalty_s=0.0).run()
    assert check_replay(replay, jobs, table) == []
    return {job_id: [len(s.gpus) for s in record.segments]
            for job_id, record in replay.records.items()}


def test_while_nobody_waits_the_jobs_share_the_gpus_as_hesrpt_does() -> None:
    # At 0 all three wait: each option is worth speed / work. X takes 1 GPU (0.1); of the
    # 7 left, B 6 and C 1 (2.449 / 1,000 + 1 / 4,000 = 2.699e-3) beat (7, 0) 2.646e-3 and
    # (5, 2) 2.590e-3. X ends at 10; at the boundary of 60 nobody waits and a GPU is free:
    # with speedup_exponent 0.5, heSRPT's round, m = 2: B (the shorter) is worth
    # sqrt(3/4) sqrt(n), C sqrt(1/4) sqrt(n). Of the splits of 8 GPUs, (B 6, C 2) is worth
    # 0.866 x 2.449 + 0.5 x 1.414 = 2.828, ahead of (7, 1) 2.791, (5, 3) 2.802, (4, 4) 2.732
    # and (8, 0) 2.449: heSRPT's shares 3/4 and 1/4, so C grows. When B ends C takes all 8.
    assert counts_after_x(0.5) == {"X": [1], "B": [6], "C": [1, 2, 8]}
    # Without it, worth speed / remaining (B 853 steps left at 60, C 3,940): (7, 1), 2.646
    # / 853 + 1 / 3,940 = 3.355e-3, beats (6, 2) 3.230e-3: B grows instead.
    assert counts_after_x(None) == {"X": [1], "B": [6, 7], "C": [1, 8]}


def test_every_round_boundary_is_a_decision_while_an_elastic_job_runs() -> None:
    # B and C alone at 0, both waiting: worth speed / work, (B 7, C 1) 2.646e-3 + 0.25e-3
    # = 2.896e-3 beats (8, 0) 2.828e-3 and (6, 2) 2.803e-3. No GPU is free and nobody
    # waits, yet with speedup_exponent 0.5 the boundary of 60 is a decision: heSRPT's
    # round (B worth sqrt(3/4) sqrt(n), C sqrt(1/4) sqrt(n), as above) moves a GPU from B
    # to C, (6, 2) 2.828 against (7, 1) 2.791; later boundaries keep it, as the order of
    # the times left (and so the shares) stays.
    assert counts_after_x(0.5, with_x=False) == {"B": [7, 6], "C": [1, 2, 8]}
    # Without it, nothing changes until B ends.
    assert counts_after_x(None, with_x=False) == {"B": [7], "C": [1, 8]}


class Forgetful(Progress):
    """``progress`` without the parked rule: every job not running counts as waiting."""

    def options(self, state: ClusterState) -> list[Option]:
        self._parked.clear()
        return super().options(state)


def parked_replay(policy: Progress) -> dict[str, list[tuple[int, float, float]]]:
    """Each job's run segments (GPUs, start, finish) of A, B, C, D (1,000, 1,100, 1,200,
    1,300 steps), elastic on 1 to 4 GPUs at sqrt(n) steps/s, all at 0 on one node of 4
    T4s, 60 s rounds, no restart penalty."""
    table = ThroughputTable({("cnn", "t4", n, Placement.PACKED): n ** 0.5
                             for n in range(1, 5)})
    jobs = [Job(name, 0.0, "cnn", 1, work, allowed_gpu_counts=(1, 2, 3, 4))
            for name, work in (("A", 1000.0), ("B", 1100.0), ("C", 1200.0), ("D", 1300.0))]
    replay = Simulator(parse_cluster("t4=4x4"), jobs, policy, truth=table,
                       restart_penalty_s=0.0).run()
    assert check_replay(replay, jobs, table) == []
    return {job_id: [(len(s.gpus), s.start, s.finish) for s in record.segments]
            for job_id, record in replay.records.items()}


def test_a_job_a_hesrpt_round_stopped_does_not_count_as_waiting() -> None:
    # At 0 all four wait: worth speed / work, one GPU each (1/1,000 + 1/1,100 + 1/1,200 +
    # 1/1,300 = 3.512e-3) beats A on 2 beside B and C (3.157e-3). At 60 nobody waits:
    # heSRPT's round, m = 4, p = 0.5: A (940 steps left, the shortest) to D worth
    # sqrt(7/16), sqrt(5/16), sqrt(3/16), sqrt(1/16) x sqrt(n) = 0.661, 0.559, 0.433, 0.25
    # sqrt(n): (A 2, B 1, C 1, D 0) 1.927 beats one each 1.903, (2, 2, 0, 0) 1.726 and
    # (1, 2, 1, 0) 1.885: D stops. At 120 D waits, but only because heSRPT's round stopped
    # it: the round is heSRPT's again (same order, same shares), and D stays stopped until
    # A ends at 60 + 940 / sqrt(2) = 724.68. Then m = 3 (B 375.3 left, C 475.3, D 1,240;
    # worth sqrt(5/9), sqrt(3/9), sqrt(1/9) x sqrt(n)): (B 2, C 1, D 1) 1.965 beats
    # (2, 2, 0) 1.871 and (1, 2, 1) 1.895: D starts again. B ends at 724.68 + 375.32 /
    # sqrt(2) = 990.07; no decision there (nobody waits); at 1,020 (C 180 left, D 944.7;
    # worth sqrt(3/4), sqrt(1/4)) (3, 1) 2.0 beats (2, 2) 1.932: C ends at 1,020 + 180 /
    # sqrt(3); at 1,140 D takes all 4 (475.3 done, 824.7 left) and ends at 1,140 + 824.7 / 2.
    a_ends = 60 + 940 / 2 ** 0.5
    b_ends = a_ends + (1100 - a_ends) / 2 ** 0.5
    d_done = 60 + 1140 - a_ends
    kept = parked_replay(rolling("progress", round_s=60.0, restart_penalty_s=0.0,
                                 speedup_exponent=0.5))
    assert kept == {
        "A": [(1, 0.0, 60.0), (2, 60.0, pytest.approx(a_ends))],
        "B": [(1, 0.0, pytest.approx(a_ends)), (2, pytest.approx(a_ends), pytest.approx(b_ends))],
        "C": [(1, 0.0, 1020.0), (3, 1020.0, pytest.approx(1020 + 180 / 3 ** 0.5))],
        "D": [(1, 0.0, 60.0), (1, pytest.approx(a_ends), 1140.0),
              (4, 1140.0, pytest.approx(1140 + (1300 - d_done) / 2))]}
    jct = sum(segments[-1][2] for segments in kept.values()) / 4
    assert jct == pytest.approx(1097.75, abs=0.01)
    # Counted as waiting, D is valued by the waiting rule at 120: speed / time left, one GPU
    # each (1/855.1 + 1/980 + 1/1,080 + 1/1,240 = 3.922e-3) beats A on 2 (1.654e-3 +
    # 1/980 + 1/1,080 = 3.600e-3): D restarts and A shrinks, at 180 nobody waits and
    # heSRPT's round stops D again, and so on every other round until A's end: the flip
    # the rule removes, and 15 s more average JCT.
    flipping = parked_replay(Forgetful(ProgressParams(round_s=60.0, restart_penalty_s=0.0,
                                                      speedup_exponent=0.5)))
    assert [n for n, _, _ in flipping["A"][:8]] == [1, 2, 1, 2, 1, 2, 1, 2]
    assert [start for _, start, _ in flipping["D"][:4]] == [0.0, 120.0, 240.0, 360.0]
    assert sum(segments[-1][2] for segments in flipping.values()) / 4 > jct + 15
