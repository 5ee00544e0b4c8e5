"""Round-based policies act at every boundary of their declared round while any job runs
or waits: the simulator's decision points, Gavel's time sharing and
migration, Optimus' migration, the two-job case of every baseline on Gavel's measured
throughputs, and an honest fallback when Gavel's LP gives no feasible allocation."""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from hetsched.allocation.layout import Start
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.replay_inputs import throughput_pair
from hetsched.policies.baselines import HeterogeneityAgnostic
from hetsched.policies.baselines.optimus import Optimus
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RollingFifo, RunningJob
from hetsched.registry import ENTRIES, rolling
from hetsched.replaying import check_replay, run_replay
from hetsched.simulate.simulator import Simulator


class Recorder(PolicyHooks):
    """FIFO that declares ``round_s`` and records when it is called: (time, pending,
    running)."""

    name = "recorder"

    def __init__(self, round_s: float | None) -> None:
        self.round_s = round_s
        self.calls: list[tuple[float, int, int]] = []
        self.fifo = RollingFifo()

    def decide(self, state: ClusterState) -> Decision:
        self.calls.append((state.now, len(state.pending), len(state.running)))
        return self.fifo.decide(state)


def one_gpu() -> tuple[Cluster, ThroughputTable]:
    """One V100; job type ``cnn`` at 10 steps/s."""
    cluster = Cluster((GpuType("v100"),), (Node("n", "v100", 1),))
    return cluster, ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0)])


def two_types() -> Cluster:
    """One V100 node and one K80 node, one GPU each."""
    return Cluster((GpuType("v100"), GpuType("k80")),
                   (Node("v", "v100", 1), Node("k", "k80", 1)))


# --- the simulator's decision points --------------------------------------------------


def test_a_declared_round_is_a_decision_point_while_a_job_runs() -> None:
    # a: 1000 steps at 10/s runs 0..100 s alone, nobody waits. Round 30 s: the policy is
    # called at the arrival (0) and at the boundaries 30, 60, 90; at 100 the job ends and
    # nothing runs or waits: no call. (Before: only at 0, since nobody waited.)
    cluster, table = one_gpu()
    policy = Recorder(30.0)
    replay = Simulator(cluster, [Job("a", 0.0, "cnn", 1, 1000.0)], policy, truth=table).run()
    assert [c[0] for c in policy.calls] == [0.0, 30.0, 60.0, 90.0]
    assert [c[1:] for c in policy.calls] == [(1, 0), (0, 1), (0, 1), (0, 1)]
    assert [d.time for d in replay.decisions] == [0.0, 30.0, 60.0, 90.0]
    assert replay.records["a"].finish == pytest.approx(100.0)
    # A policy without a round is called at events only.
    events = Recorder(None)
    Simulator(cluster, [Job("a", 0.0, "cnn", 1, 1000.0)], events, truth=table).run()
    assert [c[0] for c in events.calls] == [0.0]


def test_an_interval_adds_decision_points_on_the_same_grid() -> None:
    # The same job with --interval 30 and a 40 s round: both grids from the first arrival
    # while the job runs (0..100 s): 0, 30, 40, 60, 80, 90. An interval alone (FIFO, no
    # round) gives 0, 30, 60, 90, where before it gave 0 only (nobody waited); FIFO's
    # empty decision at 30 promises nothing changes until the job ends (quiet_until), so
    # by default 60 is skipped and only the last boundary before the end, 90, is called.
    cluster, table = one_gpu()
    job = [Job("a", 0.0, "cnn", 1, 1000.0)]
    both = Recorder(40.0)
    replay = Simulator(cluster, job, both, truth=table, interval_s=30.0).run()
    assert [c[0] for c in both.calls] == [0.0, 30.0, 40.0, 60.0, 80.0, 90.0]
    assert (replay.summary()["round_s"], replay.summary()["interval_s"]) == (40.0, 30.0)
    fifo = Simulator(cluster, job, RollingFifo(), truth=table, interval_s=30.0,
                     skip_quiet_rounds=False).run()
    assert [d.time for d in fifo.decisions] == [0.0, 30.0, 60.0, 90.0]
    assert fifo.summary()["round_s"] is None
    skipping = Simulator(cluster, job, RollingFifo(), truth=table, interval_s=30.0).run()
    assert [d.time for d in skipping.decisions] == [0.0, 30.0, 90.0]
    assert skipping.records["a"].finish == fifo.records["a"].finish == pytest.approx(100.0)


def test_no_boundary_is_visited_through_idle_time() -> None:
    # a: 10 steps, 0..1 s; b arrives 1e9 + 0.5 s later and runs 2.5 s. Round 1 s. At 1 s
    # a ends on a boundary: nothing runs or waits, no call. The next call is b's arrival;
    # then the boundaries 1e9 + 1 and 1e9 + 2 while b runs; b ends at 1e9 + 3. Stepping
    # through the gap one round at a time would take a billion iterations: the next
    # boundary is computed instead.
    cluster, table = one_gpu()
    policy = Recorder(1.0)
    late = 1e9 + 0.5
    replay = Simulator(cluster, [Job("a", 0.0, "cnn", 1, 10.0), Job("b", late, "cnn", 1, 25.0)],
                       policy, truth=table).run()
    assert [c[0] for c in policy.calls] == [0.0, late, 1e9 + 1.0, 1e9 + 2.0]
    assert replay.records["b"].finish == pytest.approx(1e9 + 3.0)


def test_a_bad_round_is_refused() -> None:
    cluster, table = one_gpu()
    from hetsched.core.errors import InputError

    with pytest.raises(InputError, match="interval"):
        Simulator(cluster, [Job("a", 0.0, "cnn", 1, 10.0)], Recorder(0.0), truth=table)
    with pytest.raises(InputError, match="interval"):
        Simulator(cluster, [Job("a", 0.0, "cnn", 1, 10.0)], Recorder(None), truth=table,
                  interval_s=math.inf)


# --- Gavel and Optimus on hand-made tables ---------------------------------------------


def test_gavel_max_min_time_shares_and_migrates_with_nobody_waiting() -> None:
    # V100 2 steps/s, K80 1 (both jobs), no restart penalty, 100 s rounds. The max-min LP
    # gives each job half of each type (rho = (2 x_v + x_k) / 1.5 is equal only there).
    # Round 0: both have priority inf everywhere; ties by id: A takes the V100, B the
    # K80. At 100 each has run on one type: the other type's priority is inf, so they
    # swap, with nobody waiting. B (300 steps): 100 on the K80, then 200 on the V100 in
    # 100 s: done at 200. A (1000 steps): 200 + 100 by 200; at the boundary of 200 the LP
    # is re-solved for A alone (all of the V100) and A moves from the K80: 700 steps at
    # 2/s, done at 550. (Before the fix: no decision without a waiting job, A stayed on
    # the V100 to 500 and B on the K80 to 300.)
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 2.0),
                                       ("cnn", "k80", 1, "packed", 1.0)])
    jobs = [Job("A", 0.0, "cnn", 1, 1000.0), Job("B", 0.0, "cnn", 1, 300.0)]
    policy = rolling("gavel", round_s=100.0)
    replay = Simulator(two_types(), jobs, policy, truth=table, restart_penalty_s=0.0).run()
    records = replay.records
    assert records["B"].finish == pytest.approx(200.0)
    assert records["A"].finish == pytest.approx(550.0)
    assert records["A"].gpu_types == ["v100", "k80", "v100"]
    assert records["B"].gpu_types == ["k80", "v100"]
    # At 300 A runs alone on its only share's type and the round changes nothing: the
    # boundary at 400 is skipped, 500 (the last before A ends) is called. With a call at
    # every boundary the same jobs, and one more (empty) decision at 400.
    assert [d.time for d in replay.decisions] == [0.0, 100.0, 200.0, 300.0, 500.0]
    assert replay.summary()["fallbacks"] == 0
    every = Simulator(two_types(), jobs, rolling("gavel", round_s=100.0), truth=table,
                      restart_penalty_s=0.0, skip_quiet_rounds=False).run()
    assert [d.time for d in every.decisions] == [0.0, 100.0, 200.0, 300.0, 400.0, 500.0]
    assert {k: (r.finish, r.gpu_types) for k, r in every.records.items()} == \
        {k: (r.finish, r.gpu_types) for k, r in records.items()}


def test_gavel_max_sum_moves_the_long_job_once_the_fast_type_frees() -> None:
    # A: 2 and 1 steps/s on V100 and K80 (equal share E = 1.5); B: 4 and 1 (E = 2.5).
    # Max-sum values a unit of time at T/E: A 1.33 (V100) and 0.67 (K80), B 1.6 and 0.4,
    # so B gets the V100 and A the K80 (2.27 > 1.73). B (400 steps) ends at 100, a round
    # boundary; A alone gets all of the V100 and moves there: 100 steps done on the K80,
    # 900 left at 2/s: done at 550 (no restart penalty). Before: A stayed on the K80 to
    # 1000 s.
    table = ThroughputTable.from_rows([("a", "v100", 1, "packed", 2.0),
                                       ("a", "k80", 1, "packed", 1.0),
                                       ("b", "v100", 1, "packed", 4.0),
                                       ("b", "k80", 1, "packed", 1.0)])
    jobs = [Job("A", 0.0, "a", 1, 1000.0), Job("B", 0.0, "b", 1, 400.0)]
    policy = rolling("gavel-max-sum", round_s=100.0)
    records = Simulator(two_types(), jobs, policy, truth=table,
                        restart_penalty_s=0.0).run().records
    assert records["B"].finish == pytest.approx(100.0)
    assert records["A"].gpu_types == ["k80", "v100"]
    assert records["A"].finish == pytest.approx(550.0)


def optimus_state(remaining: float, now: float = 0.0) -> ClusterState:
    """L runs on the K80 (1 step/s) with ``remaining`` steps left; the V100 (10 steps/s) is
    free; nobody waits."""
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0),
                                       ("cnn", "k80", 1, "packed", 1.0)])
    job = Job("L", 0.0, "cnn", 1, 1e6)
    return ClusterState(now=now, cluster=two_types(), throughput=table, pending=(),
                        remaining={}, running=(RunningJob(job, "k80", ("k/0",), 0.0,
                                                          remaining),),
                        free=frozenset({"v/0"}))


@pytest.mark.parametrize(("remaining", "moves"), [(10000.0, True), (200.0, True),
                                                  (30.0, False)])
def test_optimus_moves_a_running_job_when_it_ends_sooner(remaining: float,
                                                         moves: bool) -> None:
    # Staying takes remaining / 1 s; moving takes the 30 s restart plus remaining / 10:
    # 10000 s vs 1030 s and 200 vs 50: move; 30 vs 33: stay.
    decision = Optimus().decide(optimus_state(remaining))
    if moves:
        assert decision.preempt == ("L",)
        assert decision.start == (Start("L", "v100", ("v/0",)),)
    else:
        assert decision == Decision()


def test_optimus_moves_only_at_its_interval_and_not_when_agnostic() -> None:
    policy = Optimus(round_s=600.0)
    assert policy.decide(optimus_state(10000.0, now=0.0)).preempt == ("L",)
    # 100 s later is no boundary (the next is at 600): nothing to do.
    assert policy.decide(optimus_state(10000.0, now=100.0)) == Decision()
    assert policy.decide(optimus_state(10000.0, now=600.0)).preempt == ("L",)
    # Seen agnostically both types run at 1 step/s: moving only costs the restart.
    agnostic = HeterogeneityAgnostic(Optimus())
    assert agnostic.round_s == 600.0
    assert agnostic.decide(optimus_state(10000.0)) == Decision()


# --- Gavel's LP fallback ---------------------------------------------------------------


def test_equal_shares_fill_no_type_beyond_its_gpus() -> None:
    # Gangs 1, 1, 2 (4 GPUs asked) on 2 V100 + 2 K80 (4 GPUs): each job gets
    # 2 / max(4, 4) = 0.5 of each type it can run on. V100: 1 x .5 + 1 x .5 + 2 x .5 = 2
    # GPUs, within 2; job 3 cannot use the K80 (throughput 0): 0 there, so the K80 holds
    # 1 x .5 + 1 x .5 = 1 GPU. Each job's time: at most 0.5 + 0.5 = 1.
    from hetsched.formulations.gavel import AllocationProblem
    from hetsched.formulations.gavel.problem import equal_shares

    problem = AllocationProblem(("a", "b", "c"), ("v100", "k80"),
                                np.array([[2.0, 1.0], [2.0, 1.0], [3.0, 0.0]]),
                                np.array([1.0, 1.0, 2.0]), np.array([2.0, 2.0]), np.ones(3))
    shares = equal_shares(problem)
    np.testing.assert_allclose(shares, [[0.5, 0.5], [0.5, 0.5], [0.5, 0.0]])
    assert problem.is_feasible(shares)


def test_an_over_filling_lp_answer_is_never_used_and_the_fallback_is_visible(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        tmp_path: Path) -> None:
    # The LP "answers" X = 2 for every job on the one V100: more GPUs than the type has
    # (and more than all of a job's time). The policy must not use it: both jobs get the
    # equal share 1 / max(2, 2) = 0.5 of each type, every decision is a fallback (the
    # fake fails again for A alone), the first failure is logged as a warning, and
    # summary.json lists it.
    from hetsched.formulations.gavel import Allocation, AllocationProblem, AllocationSolver

    def over_filled(solver: AllocationSolver, problem: AllocationProblem, *args: object,
                    **kwargs: object) -> Allocation:
        fractions = np.zeros(problem.throughput.shape)
        fractions[:, 0] = 2.0
        return Allocation(problem, fractions, 1.0, True)

    monkeypatch.setattr(AllocationSolver, "solve", over_filled)
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 2.0),
                                       ("cnn", "k80", 1, "packed", 1.0)])
    jobs = [Job("A", 0.0, "cnn", 1, 1000.0), Job("B", 0.0, "cnn", 1, 300.0)]
    policy = rolling("gavel", round_s=100.0)
    with caplog.at_level(logging.WARNING):
        replay = Simulator(two_types(), jobs, policy, truth=table,
                           restart_penalty_s=0.0).run()
    assert policy.allocation["A"] == {"v100": 0.5, "k80": 0.5}  # type: ignore[attr-defined]
    summary = replay.summary()
    assert summary["completed"] == 2
    assert summary["fallbacks"] == summary["decisions"] > 0
    warnings = summary["warnings"]
    assert isinstance(warnings, list)
    assert len(warnings) == 1
    assert "over-fills a GPU type" in warnings[0]
    assert "equal time shares" in warnings[0]
    assert any(r.levelno == logging.WARNING and "over-fills" in r.getMessage()
               for r in caplog.records)
    replay.write(tmp_path / "r")
    assert "over-fills" in (tmp_path / "r" / "summary.json").read_text()


# --- two jobs on Gavel's measured throughputs, every baseline ----------------------------

#: ResNet-50 (batch size 64) on 1 GPU in Gavel's simulation_throughputs.json (steps/s).
V100 = 4.394774823323071
K80 = 0.6190282202246573
#: (short job, long job) JCT in s, each derived below from V100, K80, the 30 s restart
#: penalty and the policy's round. Jobs "long" (44,000 steps) and "short" (4,400) both
#: arrive at 0 on one V100 and one K80; ties go to "long" (arrival, then id). Alone:
#: short 4400 / V100 = 1,001.19 s on the V100, 4400 / K80 = 7,107.92 s on the K80;
#: long 44000 / V100 = 10,011.89 s on the V100, 71,079.15 s on the K80.
FIFO_LIKE = (4400 / K80, 44000 / V100)  # long first on the V100 (cluster order), short
#: on the K80: 7,107.92 and 10,011.89. fifo (first fit), tiresias and gandiva (agnostic,
#: cluster order: V100 first; nobody ever waits, so no queue change, time slice or
#: promotion matters; neither migrates), edf (no deadlines: arrival order; short on the
#: K80 ends at 7,108 s, before the V100 frees at 10,012 + 1,001 s: worth starting).
SHORT_FIRST = (4400 / V100, 4400 / V100 + 44000 / V100)  # sjf, srtf: short first on the
#: V100 (1,001.19 s); long would take 71,079 s on the K80 against 1,001 + 10,012 by
#: waiting, so it waits and runs on the V100 to 11,013.08 s. Neither migrates (sjf is
#: non-preemptive; srtf's 600 s rounds only serve its guard).
GAVEL = (1800 + 30 + (4400 - 360 * K80 - 2 * 330 * V100 - 2 * 330 * K80) / V100,
         2160 + 30 + (44000 - 360 * V100 - 2 * 330 * V100 - 3 * 330 * K80) / V100)
#: gavel (max-min, 360 s rounds): the LP gives each job half of each type (its fluid
#: rate (V100 + K80) / 2 would end short at 4400 / 2.5069 = 1,755 s). Round 0: long on
#: the V100 (ties by id), short on the K80; at every boundary the type a job has not run
#: on since the solve has priority inf, so they swap every round, each restart costing
#: 30 s. Short: 360 K80 + 330 V100 + 330 K80 + 330 V100 + 330 K80 = 3,531.96 steps by
#: 1,800, then on the V100 after the restore: 1,830 + 868.04 / V100 = 2,027.52 s. Long
#: runs V100, K80, V100, K80, V100, K80 (5,095.51 steps by 2,160); at the boundary of
#: 2,160 the LP is re-solved for long alone (all of the V100) and it moves: 2,190 +
#: 38,904.49 / V100 = 11,042.44 s.
GAVEL_MAX_SUM = (4400 / V100, 1080 + 30 + (44000 - 1080 * K80) / V100)
#: gavel-max-sum: both jobs are worth the same per unit of time on each type, so any
#: split filling both types is optimal. The two jobs are one class to the LP (same type,
#: gang and weight: hetsched.formulations.gavel.matrix), which gives every job of a class
#: the same share: half of each type, as max-min does, so the rounds are GAVEL's. (A
#: vertex of the per-job LP would give short the V100 and long the K80: short ends at
#: 1,001.19 s; at 1,080 long, alone, moves to the V100: 1,110 + 43,331.45 / V100 =
#: 10,969.77 s, GAVEL_MAX_SUM; or the reverse, FIFO_LIKE.)
OPTIMUS = (4400 / V100, 1200 + 30 + (44000 - 1200 * K80) / V100)
#: optimus: short has the larger gain per GPU on the V100 (1/T = V100 / 4400), long gets
#: the K80 (any gain > 0). Short ends at 1,001.19 s; at the next 600 s boundary, 1,200,
#: long (742.83 steps done) ends sooner on the free V100 even after the 30 s restart
#: (1,230 + 43,257.17 / V100 = 11,072.86 s, against 1,200 + 69,879 s by staying): it moves.
PROGRESS = (4400 / V100, 1800 + 30 + (44000 - 1800 * K80) / V100)
#: progress: at 0 both jobs wait, never started (no restart discount); the MILP's best
#: pair is short on the V100 and long on the K80 (V100 / 4400 + K80 / 44000 = 1.0128e-3
#: per s, against K80 / 4400 + V100 / 44000 = 2.406e-4). Short ends at 1,001.19 s, with
#: nobody waiting (no call); at the first boundary of its 1,800 s round long moves to the
#: free V100, since V100 x (1 - 30 / 360) > K80. It ran 1,800 s on the K80 (1,114.25
#: steps) and ends at 1,830 + 42,885.75 / V100 = 11,588.35 s.
#: progress-elastic: the same pair at 0 (the GPU price divides both of short's options by
#: the same 1 + 0.25 x 1 job behind x 1 GPU / 1 of its type; speeds are fixed, so the rate
#: over the horizon is the speed). Short ends at 1,001.19 s; at the next boundary of its
#: 120 s rounds, 1,080, long moves to the V100 (V100 x (1 - 30 / 120) > K80): it ran
#: 1,080 s on the K80 and ends at 1,110 + (44,000 - 1,080 K80) / V100, GAVEL_MAX_SUM.
#: ftf: at 0 both jobs' isolated speed is (V100 + K80) / 2 (half of each type, n = 2),
#: so a job's ratio is that over its speed, and the least worst ratio is the largest
#: least speed: both types full, each job at (V100 + K80) / 2, which only half of each
#: type gives (short's time a on the V100 and b on the K80 must have a + b = 1 and
#: 2 V100 a + 2 K80 b = V100 + K80). That is gavel's allocation, realised by the same
#: rounds; long alone then takes the V100 (its fastest): GAVEL.
#: fifo-fastest: long first (by id) onto the fastest type, the V100; short onto the K80.
#: Re-dealt when short ends, long is already on the V100: FIFO_LIKE.
#: min-total-duration: the least makespan is long alone on the V100 (10,011.89 s, a
#: lower bound for any allocation), which leaves short the K80 (7,107.92 s < 10,011.89):
#: FIFO_LIKE.
#: max-throughput-per-cost (the cluster's catalogue prices, 2.48 and 0.45 USD/h): a unit
#: of time earns V100 / E / 2.48 = 0.707 on the V100 and K80 / E / 0.45 = 0.549 on the
#: K80 (E = (V100 + K80) / 2); the two jobs are one class, so each gets half of each type
#: (both types full), gavel's allocation; long alone then takes the V100: GAVEL.
#: gavel-max-sum-raw and max-throughput-per-cost-raw (Gavel's objectives: raw steps/s,
#: over the price): the two jobs are one class, so they get gavel-max-sum's and
#: max-throughput-per-cost's allocation, half of each type each: GAVEL.
#: isolated: 1/n of each type, half each while both run: gavel's rounds until short
#: ends. Long alone then gets 1/1 of each type, scaled to a sum of 1: half of each
#: still. From the solve at 2,160 it alternates every round, V100 first (both types
#: unserved: cluster order), each move costing the 30 s restore: ISOLATED, long at
#: 18,943.35 s (half its time on the K80, and 30 s of every 360 restoring).


def alternating(start: float, steps: float, speeds: tuple[float, float]) -> float:
    """When a job with ``steps`` left finishes moving at every 360 s round from ``start``
    between two types (``speeds``, the first first), 330 s of progress a round."""
    round_index = 0
    while steps > 330 * speeds[round_index % 2]:
        steps -= 330 * speeds[round_index % 2]
        round_index += 1
    return start + 360 * round_index + 30 + steps / speeds[round_index % 2]


ISOLATED = (GAVEL[0], alternating(2160, 44000 - 360 * V100 - 2 * 330 * V100 - 3 * 330 * K80,
                                  (V100, K80)))
EXPECTED: dict[str, list[tuple[float, float]]] = {
    "fifo": [FIFO_LIKE], "edf": [FIFO_LIKE], "tiresias": [FIFO_LIKE],
    "gandiva": [FIFO_LIKE], "sjf": [SHORT_FIRST], "srtf": [SHORT_FIRST], "gavel": [GAVEL],
    "qssf": [SHORT_FIRST],  # (one GPU each: GPU time orders them as duration does)
    "gavel-max-sum": [GAVEL], "ftf": [GAVEL], "optimus": [OPTIMUS], "progress": [PROGRESS],
    "progress-elastic": [GAVEL_MAX_SUM],
    "progress-packed": [PROGRESS],  # (ResNet-50 beside ResNet-50: 0.498 + 0.498 on a
    # V100, unmeasured on a K80: never worth packing)
    "gavel-packed": [GAVEL],  # (the same pair: its LP's optimum is gavel's allocation,
    # and Gavel's rounds swap the two every round as hetsched's do here)
    "fifo-packed": [FIFO_LIKE],  # (0.996 < fifo_packed's 1.5: fifo-fastest's deal)
    # The other packed LPs: the pair (0.498 + 0.498 of their rates alone, on the V100
    # only) does less than the two time-sliced, so their optima are the unpacked ones'
    # (ftf's, min-total-duration's, max-throughput-per-cost's, gavel-water-filling's),
    # realised in Gavel's rounds as gavel-packed's: the same JCTs.
    "ftf-packed": [GAVEL], "min-total-duration-packed": [FIFO_LIKE],
    "max-throughput-per-cost-packed": [GAVEL], "gavel-water-filling-packed": [GAVEL],
    "fifo-fastest": [FIFO_LIKE], "min-total-duration": [FIFO_LIKE],
    "max-throughput-per-cost": [GAVEL], "isolated": [ISOLATED],
    "gavel-max-sum-raw": [GAVEL], "max-throughput-per-cost-raw": [GAVEL],
    "gavel-water-filling": [GAVEL], "gavel-water-filling-gpus": [GAVEL]}
ROUNDS = {"fifo": None, "sjf": None, "qssf": None, "edf": None, "srtf": 600.0, "tiresias": 360.0,
          "gandiva": 600.0, "gavel": 360.0, "gavel-max-sum": 360.0, "ftf": 360.0,
          "optimus": 600.0, "progress": 1800.0, "progress-packed": 1800.0,
          "progress-elastic": 120.0, "gavel-packed": 360.0, "fifo-packed": 360.0,
          "ftf-packed": 360.0,
          "min-total-duration-packed": 360.0, "max-throughput-per-cost-packed": 360.0,
          "gavel-water-filling-packed": 360.0,
          "fifo-fastest": 360.0,
          "min-total-duration": 360.0, "max-throughput-per-cost": 360.0, "isolated": 360.0,
          "gavel-max-sum-raw": 360.0, "max-throughput-per-cost-raw": 360.0,
          "gavel-water-filling": 360.0, "gavel-water-filling-gpus": 360.0}


def test_the_hand_computed_values() -> None:
    # The figures quoted in the comments above.
    assert pytest.approx((7107.915, 10011.890), abs=1e-3) == FIFO_LIKE
    assert pytest.approx((1001.189, 11013.078), abs=1e-3) == SHORT_FIRST
    assert pytest.approx((2027.516, 11042.443), abs=1e-3) == GAVEL
    assert pytest.approx((1001.189, 10969.766), abs=1e-3) == GAVEL_MAX_SUM
    assert pytest.approx((1001.189, 11072.863), abs=1e-3) == OPTIMUS
    assert pytest.approx((1001.189, 11588.350), abs=1e-3) == PROGRESS
    assert alternating(0, 330 * V100 + 10 * K80, (V100, K80)) == pytest.approx(
        360 + 30 + 10)
    assert set(EXPECTED) == {name for name, e in ENTRIES.items() if e.policy is not None}


@pytest.mark.parametrize("policy", sorted(EXPECTED))
def test_two_resnet_jobs_on_a_v100_and_a_k80(policy: str, shared_data: Path,
                                             tmp_path: Path) -> None:
    table = shared_data / "gavel" / "simulation_throughputs.json"
    measured, fitted = throughput_pair(table)
    for model in (measured, fitted):  # what the derivations above assume
        assert model.throughput("ResNet-50 (batch size 64)", "v100", 1,
                                Placement.PACKED) == pytest.approx(V100, rel=1e-9)
        assert model.throughput("ResNet-50 (batch size 64)", "k80", 1,
                                Placement.PACKED) == pytest.approx(K80, rel=1e-9)
    trace = tmp_path / "two.csv"
    trace.write_text("id,arrival,job_type,num_gpus,work,deadline,weight,user,"
                     "allowed_gpu_counts,allowed_gpu_types\n"
                     "long,0,ResNet-50 (batch size 64),1,44000,,,,,\n"
                     "short,0,ResNet-50 (batch size 64),1,4400,,,,,\n")
    summary = run_replay(trace, "native", "v100=1,k80=1", policy, out=tmp_path / "out",
                         throughput_path=table, show_progress=False).figures
    with (tmp_path / "out" / "jobs.csv").open(newline="") as handle:
        jct = {row["job"]: float(row["jct"]) for row in csv.DictReader(handle)}
    got = (jct["short"], jct["long"])
    assert any(got == pytest.approx(expected, rel=1e-6) for expected in EXPECTED[policy]), \
        (policy, got, EXPECTED[policy])
    assert summary["round_s"] == ROUNDS[policy]
    assert summary["restart_penalty_s"] == 30.0
    assert summary["fallbacks"] == 0


def test_keep_whole_runs_a_job_allocated_all_of_its_time_in_every_round() -> None:
    # 2 V100s and 2 K80s (one node each); three jobs at 0 of one type at 1 step/s per
    # GPU on a V100 and 0.5 on a K80; restart penalty 30 s, 360 s rounds. Max-min of GPUs
    # held (water-filling) gives each job all of its gang: every share adds up to 1. j0
    # (1 GPU) and j2 (1 GPU) start on the V100s, j1 (2 GPUs) on the K80s; j0 ends at 1480.
    # At 2160 the LP solved at 1800 gives j1 the V100s: Gavel's greedy takes j1's V100
    # pair first (not run there since the solve: priority inf), so j2, on a V100 and
    # allocated all of its time, is preempted and gets no GPU until j1 ends at 2371.5.
    # With keep_whole the round takes the jobs allocated all of their time first and j2
    # (run on its V100 within its share there) stays: it runs 0 to 2377 without a gap,
    # and j1 keeps its K80s until the round after j2 ends (2520).
    cluster = Cluster((GpuType("v100"), GpuType("k80")),
                      (Node("v", "v100", 2), Node("k", "k80", 2)))
    table = ThroughputTable.from_rows([("b", gpu, n, placement, speed * n)
                                       for gpu, speed in (("v100", 1.0), ("k80", 0.5))
                                       for n in (1, 2) for placement in ("packed", "spread")])
    jobs = [Job("j0", 0.0, "b", 1, 1480.0), Job("j1", 0.0, "b", 2, 2523.0),
            Job("j2", 0.0, "b", 1, 2377.0)]
    runs = {}
    for keep_whole in (False, True):
        policy = rolling("gavel-water-filling-gpus", keep_whole=keep_whole)
        replayed = Simulator(cluster, jobs, policy, truth=table, restart_penalty_s=30.0).run()
        assert check_replay(replayed, jobs, table) == []
        runs[keep_whole] = {job_id: [(s.gpu_type, s.start, s.finish) for s in r.segments]
                            for job_id, r in replayed.records.items()}
    assert runs[False]["j2"] == [("v100", 0.0, 2160.0), ("v100", 2371.5, 2618.5)]
    assert runs[True]["j2"] == [("v100", 0.0, 2377.0)]
    assert runs[True]["j1"] == [("k80", 0.0, 2520.0), ("v100", 2520.0, 2551.5)]
    assert runs[True]["j0"] == runs[False]["j0"] == [("v100", 0.0, 1480.0)]


def test_keep_whole_must_be_a_bool() -> None:
    from hetsched.core.errors import InputError

    with pytest.raises(InputError, match="keep_whole"):
        rolling("gavel", keep_whole="yes")
