"""The baseline policies (hetsched.policies.baselines) and Gavel's LP (hetsched.formulations.gavel):
hand-built cases whose outcome is derived in the comments, a brute-force check of the LP, the
heterogeneity-agnostic view, and replays of every policy through the simulator."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from hetsched.core.check import check
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import Placement, ThroughputModel, ThroughputTable
from hetsched.files.instance import load_instance
from hetsched.formulations.gavel import AllocationProblem, solve_allocation
from hetsched.policies.baselines import AgnosticView, HeterogeneityAgnostic
from hetsched.policies.baselines.duration import ShortestJobFirst, ShortestRemainingTimeFirst
from hetsched.policies.baselines.gandiva import Gandiva
from hetsched.policies.baselines.gavel import Gavel
from hetsched.policies.baselines.gavel_params import GavelParams
from hetsched.policies.baselines.optimus import Optimus
from hetsched.policies.baselines.tiresias import Tiresias
from hetsched.policies.replanning import Replanning
from hetsched.policies.rolling import ClusterState, RollingPolicy, RunningJob
from hetsched.registry import ENTRIES, rolling
from hetsched.replaying import rolling_policy, run_replay
from hetsched.simulate.simulator import Replay, Simulator
from tests.helpers import INSTANCES, ROOT, SHARED_DATA

SAMPLES = ROOT / "tests" / "data" / "traces"
#: Every rolling baseline (the registry's names with a rolling policy of their own, but
#: FIFO, tested in test_fifo.py and test_rounds.py).
BASELINES = sorted(n for n, e in ENTRIES.items() if e.policy is not None and n != "fifo")
ALL = [*BASELINES, "sjf-agnostic", "srtf-agnostic", "gavel-agnostic",
       "optimus-agnostic"]
#: Policies that preempt (optimus only to migrate a running job to faster free GPUs).
PREEMPTIVE = {"srtf", "tiresias", "gandiva", "gavel", "gavel-max-sum", "ftf", "optimus",
              "progress", "progress-packed", "progress-elastic", "fifo-fastest",
              "min-total-duration",
              "max-throughput-per-cost", "isolated", "gavel-max-sum-raw",
              "max-throughput-per-cost-raw", "gavel-water-filling", "gavel-water-filling-gpus",
              "gavel-packed", "fifo-packed", "ftf-packed", "min-total-duration-packed",
              "max-throughput-per-cost-packed", "gavel-water-filling-packed"}


def one_gpu(speed: float = 10.0) -> tuple[Cluster, ThroughputTable]:
    """One V100; job type ``cnn`` at ``speed`` steps/s."""
    cluster = Cluster((GpuType("v100"),), (Node("n", "v100", 1),))
    return cluster, ThroughputTable.from_rows([("cnn", "v100", 1, "packed", speed)])


def two_types() -> Cluster:
    """One V100 node and one K80 node, one GPU each."""
    return Cluster((GpuType("v100"), GpuType("k80")),
                   (Node("v", "v100", 1), Node("k", "k80", 1)))


def replay(policy: RollingPolicy, cluster: Cluster, table: ThroughputModel,
           jobs: list[Job]) -> Replay:
    """Run the simulator (it calls the policy at every boundary of its own round)."""
    return Simulator(cluster, jobs, policy, truth=table).run()


def job(job_id: str, arrival: float, work: float, job_type: str = "cnn",
        **fields: object) -> Job:
    return Job(job_id, arrival, job_type, 1, work, **fields)  # type: ignore[arg-type]


# --- sjf, srtf, edf --------------------------------------------------------------------


def test_sjf_starts_the_shortest_predicted_job_first() -> None:
    # 10 steps/s: a 100 s runs 0..100; at 100 d (50 s), c (200 s), b (300 s) wait. SJF
    # takes d, c, b (FIFO would take b first).
    cluster, table = one_gpu()
    jobs = [job("a", 0, 1000), job("b", 10, 3000), job("c", 10, 2000), job("d", 20, 500)]
    records = replay(ShortestJobFirst(), cluster, table, jobs).records
    assert [records[j].first_start for j in "abcd"] == [0, 350, 150, 100]
    assert records["b"].finish == pytest.approx(650)


def test_srtf_preempts_a_long_job_for_a_short_one() -> None:
    # L (1000 s) runs from 0; S (50 s) arrives at 100, when L has 900 s left: S's key
    # 50 * 1.2 + 30 = 90 < 900, so S preempts L and runs 100..150. L restarts at 150, makes
    # no progress for the 30 s restore and needs its last 900 s: it ends at 1080.
    cluster, table = one_gpu()
    done = replay(ShortestRemainingTimeFirst(), cluster, table,
                  [job("L", 0, 10000), job("S", 100, 500)])
    assert (done.records["S"].first_start, done.records["S"].finish) == (100, 150)
    assert done.records["L"].finish == pytest.approx(1080)
    assert done.records["L"].preemptions == 1
    # The run segments (start, finish, steps): L does 100 s x 10 steps/s before S, then
    # restores 30 s and does the other 9,000; S runs once, whole (no work field); the
    # checker accepts them (penalty 30 s).
    schedule = done.schedule()
    assert [(a.job, a.start, a.finish, a.work) for a in schedule] == [
        ("L", 0, 100, 1000), ("S", 100, 150, None), ("L", 150, pytest.approx(1080), 9000)]
    assert schedule.restart_penalty_s == 30
    instance = Instance(cluster, (job("L", 0, 10000), job("S", 100, 500)), table)
    assert check(instance, schedule) == []


@pytest.mark.parametrize(("margin", "penalty", "m_start", "l_finish"),
                         [(0.2, 30.0, 1000.0, 1000.0), (0.0, 0.0, 100.0, 1830.0)])
def test_srtf_margin_keeps_a_job_that_is_not_much_longer(
        margin: float, penalty: float, m_start: float, l_finish: float) -> None:
    # At 100, L has 900 s left and M needs 800 s. With the default margin M's key is
    # 800 * 1.2 + 30 = 990 > 900: no preemption, M starts when L ends at 1000. Without
    # margin and penalty (800 < 900) M preempts L; L restarts at 900, restores until 930
    # (the simulator's penalty) and ends at 930 + 900 = 1830.
    cluster, table = one_gpu()
    policy = ShortestRemainingTimeFirst(margin=margin, restart_penalty_s=penalty)
    done = replay(policy, cluster, table, [job("L", 0, 10000), job("M", 100, 8000)])
    assert done.records["M"].first_start == m_start
    assert done.records["L"].finish == pytest.approx(l_finish)


def test_edf_orders_by_deadline_then_jobs_without_by_arrival() -> None:
    # a holds the GPU until 100; then y (deadline 500), x (2000), z (none, arrived first).
    cluster, table = one_gpu()
    jobs = [job("a", 0, 1000), job("z", 5, 1000), job("x", 10, 1000, deadline=2000.0),
            job("y", 20, 1000, deadline=500.0)]
    records = replay(rolling("edf"), cluster, table, jobs).records
    assert [records[j].first_start for j in "yxz"] == [100, 200, 300]
    assert records["y"].met
    assert records["x"].met


@pytest.mark.parametrize(("factor", "long_start"), [(1.0, 1100.0), (1e9, 3100.0)])
def test_starvation_guard_promotes_a_long_job(factor: float, long_start: float) -> None:
    # A 100 s job arrives every 100 s (0..3000) and L (1000 s) at 1 s. Pure SJF always
    # prefers the newest short job: L starts after the last one, at 3100. With factor 1,
    # L is promoted once it has waited 1000 s: at the decision of 1100 it goes first.
    cluster, table = one_gpu()
    jobs = [job(f"s{k:02d}", 100.0 * k, 1000) for k in range(31)] + [job("L", 1, 10000)]
    records = replay(ShortestJobFirst(starvation_factor=factor), cluster, table, jobs).records
    assert records["L"].first_start == long_start


# --- tiresias, gandiva -----------------------------------------------------------------


def test_tiresias_demotes_after_its_threshold_and_promotes_a_starving_job() -> None:
    # 1 step/s, one GPU, queues split at 100 GPU-s, decisions every 10 s.
    # A runs from 0; B arrives at 50 into queue 0 too, where running jobs come first.
    # At 100 A has 100 GPU-s: demoted to queue 1, so B (queue 0) preempts it.
    # At 200 B is demoted too; in queue 1 the running B stays ahead of A.
    # A last ran at 100 after running 100 s: with knob 4 it is promoted at 100 + 400 = 500
    # and preempts B; it restores until 530 and needs 900 s more: done at 1430. B (400 s
    # done) restarts at 1430, restores until 1460, and ends at 1460 + 600 = 2060.
    cluster, table = one_gpu(speed=1.0)
    policy = Tiresias(thresholds_gpu_s=(100.0,), promote_knob=4.0, round_s=10.0)
    records = replay(policy, cluster, table, [job("A", 0, 1000), job("B", 50, 1000)]).records
    assert records["B"].first_start == 100
    assert records["A"].finish == pytest.approx(1430)
    assert records["B"].finish == pytest.approx(2060)
    assert (records["A"].preemptions, records["B"].preemptions) == (1, 1)
    assert policy.promotions == 1


def test_gandiva_time_slices_round_robin() -> None:
    # Quantum 100 s, 1 step/s, 300 s each. A 0..100; B 100..200 (first start: no restore);
    # then each turn gives 70 s of work after the 30 s restore: A 200..300 (170 done), B
    # 300..400 (170), A 400..500 (240), B 500..600 (240), A 600..690 (done), B restarts at
    # the completion: 690 + 30 + 60 = 780. Total = 600 s of work + 6 restores x 30 s.
    cluster, table = one_gpu(speed=1.0)
    done = replay(Gandiva(quantum_s=100.0), cluster, table,
                  [job("A", 0, 300), job("B", 10, 300)])
    records = done.records
    assert records["B"].first_start == 100
    assert records["A"].finish == pytest.approx(690)
    assert records["B"].finish == pytest.approx(780)
    assert (records["A"].preemptions, records["B"].preemptions) == (3, 3)
    assert done.summary()["utilization"] == pytest.approx(1.0)
    segments = done.schedule().segments()
    assert [(a.start, a.finish, a.work) for a in segments["A"]] == [
        (0, 100, 100), (200, 300, 70), (400, 500, 70), (600, pytest.approx(690), 60)]
    assert [(a.start, a.finish, a.work) for a in segments["B"]] == [
        (100, 200, 100), (300, 400, 70), (500, 600, 70), (pytest.approx(690),
                                                          pytest.approx(780), 60)]


# --- gavel -----------------------------------------------------------------------------


def brute_force_max_min(problem: AllocationProblem, step: float = 0.1) -> float:
    """The best min_j rho_j over a grid of every X (2 jobs x 2 types)."""
    grid = np.arange(0.0, 1.0 + 1e-9, step)
    best = -np.inf
    for values in itertools.product(grid, repeat=4):
        x = np.array(values).reshape(2, 2)
        if problem.is_feasible(x):
            best = max(best, float(problem.normalised(x).min()))
    return best


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["highs", "cbc"])
def test_gavel_lp_two_jobs_two_types_matches_the_hand_optimum(backend: str) -> None:
    # One V100 and one K80. A: 3 and 1 steps/s, B: 1 and 1. Equal shares E = (2, 1).
    # rho_B = x_B1 + x_B2 <= 1, so max-min is at most 1, reached with B full time; then A
    # can have V100 time 1 - x_B1 and K80 time x_B1: rho_A = (3 - 2 x_B1) / 2, largest at
    # x_B1 = 0 (second stage): A on the V100, B on the K80, rho = (1.5, 1).
    problem = AllocationProblem(("A", "B"), ("v100", "k80"), np.array([[3.0, 1.0], [1.0, 1.0]]),
                                np.ones(2), np.ones(2), np.ones(2))
    allocation = solve_allocation(problem, "max-min", backend=backend)
    assert allocation.optimal
    assert allocation.ok
    np.testing.assert_allclose(allocation.fractions, [[1, 0], [0, 1]], atol=1e-6)
    assert allocation.value == pytest.approx(1.0)
    # The grid holds the optimum, so the LP must equal the best grid point.
    assert allocation.value == pytest.approx(brute_force_max_min(problem))
    np.testing.assert_allclose(problem.normalised(allocation.fractions), [1.5, 1.0])
    # Max-sum: the V100 is worth 1.5 per unit of time to A and 1 to B, the K80 0.5 and 1.
    throughput = solve_allocation(problem, "max-sum", backend=backend)
    np.testing.assert_allclose(throughput.fractions, [[1, 0], [0, 1]], atol=1e-6)
    assert throughput.value == pytest.approx(2.5)


def test_gavel_lp_gives_a_gang_time_in_proportion_to_its_size() -> None:
    # Two GPUs of one type, equal speeds; A needs 2 GPUs, B 1. rho = (2 x_A, x_B) and
    # 2 x_A + x_B <= 2: max-min sets both to 1, so A runs half the time, B all the time
    # (equal GPU-seconds).
    problem = AllocationProblem(("A", "B"), ("v100",), np.ones((2, 1)), np.array([2.0, 1.0]),
                                np.array([2.0]), np.ones(2))
    allocation = solve_allocation(problem)
    np.testing.assert_allclose(allocation.fractions[:, 0], [0.5, 1.0], atol=1e-6)


def test_gavel_lp_never_gives_time_where_a_job_cannot_run() -> None:
    problem = AllocationProblem(("A", "B"), ("v100", "k80"), np.array([[0.0, 2.0], [1.0, 1.0]]),
                                np.ones(2), np.ones(2), np.ones(2))
    allocation = solve_allocation(problem)
    assert allocation.fractions[0, 0] == 0.0
    assert allocation.ok


def test_gavel_puts_each_job_on_its_best_type() -> None:
    # The LP case above as a replay: A (3000 steps) on the V100 at 3/s and B (1000 steps)
    # on the K80 at 1/s both end at 1000 s, never preempted. The agnostic variant sees
    # both types alike and cannot do better.
    table = ThroughputTable.from_rows([("fast", "v100", 1, "packed", 3.0),
                                       ("fast", "k80", 1, "packed", 1.0),
                                       ("flat", "v100", 1, "packed", 1.0),
                                       ("flat", "k80", 1, "packed", 1.0)])
    jobs = [job("A", 0, 3000, "fast"), job("B", 0, 1000, "flat")]
    aware = replay(Gavel(), two_types(), table, jobs)
    assert aware.records["A"].gpu_types == ["v100"]
    assert aware.records["B"].gpu_types == ["k80"]
    assert aware.records["A"].finish == pytest.approx(1000)
    assert aware.records["B"].finish == pytest.approx(1000)
    assert aware.summary()["preemptions"] == 0
    agnostic = replay(HeterogeneityAgnostic(Gavel()), two_types(), table, jobs)
    assert agnostic.summary()["completed"] == 2
    assert agnostic.summary()["avg_jct_s"] >= aware.summary()["avg_jct_s"]


def test_gavel_rotates_jobs_round_by_round() -> None:
    # Three equal jobs on one GPU: X = 1/3 each. Round 0: all unserved, a by arrival/id;
    # at 100 a has had its share (priority 1/3 / 1), b and c none: b; at 200 c.
    cluster, table = one_gpu(speed=1.0)
    jobs = [job(name, 0, 1000) for name in "abc"]
    done = replay(Gavel(GavelParams(round_s=100.0)), cluster, table, jobs)
    assert [done.records[j].first_start for j in "abc"] == [0, 100, 200]
    assert done.summary()["completed"] == 3
    assert done.summary()["preemptions"] > 0


# --- optimus ---------------------------------------------------------------------------


def test_optimus_gives_gpus_by_marginal_gain() -> None:
    # Four free GPUs. A (1000 steps) scales linearly: 10 steps/s on 1 GPU, 30 on 3;
    # B (2000 steps) does not: 10 and 12. Gain per GPU of 1/T: A@1 10/1000 = 0.01, A@3 0.01,
    # B@1 0.005, B@3 0.002. A gets 1 GPU, then growing it to 3 gains (0.03-0.01)/2 = 0.01,
    # more than B@1: A takes 3 GPUs, and B the last one.
    cluster = Cluster((GpuType("v100"),), (Node("n", "v100", 4),))
    table = ThroughputTable.from_rows([("lin", "v100", 1, "packed", 10.0),
                                       ("lin", "v100", 3, "packed", 30.0),
                                       ("flat", "v100", 1, "packed", 10.0),
                                       ("flat", "v100", 3, "packed", 12.0)])
    jobs = (Job("A", 0.0, "lin", 1, 1000.0, allowed_gpu_counts=(1, 3)),
            Job("B", 0.0, "flat", 1, 2000.0, allowed_gpu_counts=(1, 3)))
    state = ClusterState(now=0.0, cluster=cluster, throughput=table, pending=jobs,
                         remaining={"A": 1000.0, "B": 2000.0}, running=(),
                         free=frozenset(g.id for g in cluster.gpus))
    decision = Optimus().decide(state)
    assert {s.job: len(s.gpus) for s in decision.start} == {"A": 3, "B": 1}


# --- heterogeneity-agnostic -----------------------------------------------------------


def test_agnostic_view_keeps_zeros_and_equalises_types() -> None:
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0),
                                       ("cnn", "p100", 1, "packed", 4.0),
                                       ("cnn", "k80", 1, "packed", 2.0),
                                       ("rnn", "k80", 1, "packed", 1.0)])
    view = AgnosticView(table, ("v100", "p100", "k80"))
    # Every type runs cnn as fast as the slowest (K80); rnn only ever runs on the K80.
    assert [view.throughput("cnn", t, 1, Placement.PACKED) for t in ("v100", "p100", "k80")] \
        == [2.0, 2.0, 2.0]
    assert [view.throughput("rnn", t, 1, Placement.PACKED) for t in ("v100", "p100", "k80")] \
        == [0.0, 0.0, 1.0]
    assert view.throughput("cnn", "v100", 2, Placement.PACKED) == 0.0


def sjf_state() -> tuple[ClusterState, ThroughputTable]:
    """The V100 is free, the K80 busy. P: 1000 steps at 100/s on a V100, 1/s on a K80;
    Q: 100 steps at 2/s on both."""
    table = ThroughputTable.from_rows([("fastv", "v100", 1, "packed", 100.0),
                                       ("fastv", "k80", 1, "packed", 1.0),
                                       ("flat", "v100", 1, "packed", 2.0),
                                       ("flat", "k80", 1, "packed", 2.0)])
    cluster = two_types()
    busy = Job("R", 0.0, "flat", 1, 1e6)
    jobs = (Job("P", 0.0, "fastv", 1, 1000.0), Job("Q", 0.0, "flat", 1, 100.0))
    state = ClusterState(now=0.0, cluster=cluster, throughput=table, pending=jobs,
                         remaining={"P": 1000.0, "Q": 100.0},
                         running=(RunningJob(busy, "k80", ("k/0",), 0.0, 1e6),),
                         free=frozenset({"v/0"}))
    return state, table


def test_agnostic_sjf_does_not_see_that_p_is_fast_on_a_v100() -> None:
    # Aware SJF predicts P at 10 s and Q at 50 s: P gets the V100. The agnostic view makes
    # P as slow as on a K80 (1000 s): Q goes first.
    state, _ = sjf_state()
    assert [s.job for s in ShortestJobFirst().decide(state).start] == ["P"]
    agnostic = rolling_policy("sjf-agnostic")
    assert isinstance(agnostic, HeterogeneityAgnostic)
    assert agnostic.name == "sjf-agnostic"
    assert [s.job for s in agnostic.decide(state).start] == ["Q"]


@pytest.mark.parametrize("name", [*ALL, "deadline-agnostic", "fifo-agnostic"])
def test_no_policy_places_a_job_where_its_throughput_is_zero(name: str) -> None:
    # K runs only on K80s, which are busy; the free GPUs are V100s, where it has 0 steps/s.
    # N runs anywhere and must start (except under strict FIFO, which waits behind K); K
    # may only start if a policy moves R off the K80. (Priced: max-throughput-per-cost
    # needs prices.)
    cluster = Cluster((GpuType("v100", price_per_hour=2.48), GpuType("k80", price_per_hour=0.45)),
                      (Node("v", "v100", 2), Node("k", "k80", 1)))
    table = ThroughputTable.from_rows([("konly", "k80", 1, "packed", 5.0),
                                       ("any", "v100", 1, "packed", 5.0),
                                       ("any", "k80", 1, "packed", 1.0)])
    pending = (Job("K", 0.0, "konly", 1, 100.0), Job("N", 1.0, "any", 1, 100.0))
    busy = Job("R", 0.0, "any", 1, 1e5)
    state = ClusterState(now=10.0, cluster=cluster, throughput=table, pending=pending,
                         remaining={"K": 100.0, "N": 100.0},
                         running=(RunningJob(busy, "k80", ("k/0",), 0.0, 1e5),),
                         free=frozenset({"v/0", "v/1"}))
    policy = rolling_policy(name, settings=ReplaySettings(time_limit_s=2.0, deterministic=True))
    decision = policy.decide(state)
    started = {s.job: s for s in decision.start}
    assert "N" in started or name.startswith("fifo")
    assert "K" not in started or ("R" in decision.preempt and started["K"].gpu_type == "k80")
    for start in decision.start:
        job_type = {j.id: j.job_type for j in (*pending, busy)}[start.job]
        assert table.throughput(job_type, start.gpu_type, len(start.gpus),
                                cluster.placement_of(start.gpus)) > 0


# --- replays ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_every_policy_replays_the_small_instance_reproducibly(name: str) -> None:
    # 20 jobs on 16 GPUs of three types, deadlines and elastic jobs. The simulator refuses
    # any invalid start (busy GPU, wrong type, zero measured throughput); what ran, run
    # segments and restart penalties included, passes the independent checker.
    instance = load_instance(INSTANCES / "small.json")
    runs = [replay(rolling_policy(name), instance.cluster, instance.throughput,
                   list(instance.jobs)) for _ in range(2)]
    summary = runs[0].summary()
    assert summary["completed"] == 20
    assert summary["fallbacks"] == 0
    if name.removesuffix("-agnostic") not in PREEMPTIVE:
        assert summary["preemptions"] == 0
    assert check(instance, runs[0].schedule()) == []
    assert len(runs[0].schedule()) == 20 + summary["preemptions"]
    outcome = [[(r.first_start, r.finish, r.gpus, r.preemptions)
                for r in run.records.values()] for run in runs]
    assert outcome[0] == outcome[1]


@pytest.mark.parametrize("name", ALL)
def test_every_policy_replays_the_sample_traces(name: str, tmp_path: Path) -> None:
    for trace, fmt in (("philly_small.csv", "philly"), ("helios_small.csv", "helios")):
        summaries = [run_replay(SAMPLES / trace, fmt, "v100=4,k80=4", name,
                                out=tmp_path / f"{fmt}{i}", show_progress=False).figures
                     for i in range(2)]
        assert summaries[0]["completed"] == summaries[0]["jobs"]
        assert summaries[0]["jobs"] == (3 if fmt == "philly" else 2)
        # same seed, same output
        assert (tmp_path / f"{fmt}0" / "jobs.csv").read_bytes() == \
            (tmp_path / f"{fmt}1" / "jobs.csv").read_bytes()


@pytest.fixture(scope="module")
def gavel_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gavel's measurements fitted once (0.6 s) and saved: replays load it in 10 ms."""
    from hetsched.speeds.fit import throughput_model
    from hetsched.speeds.model_file import save_model
    from hetsched.speeds.profiles import read_profile

    source = SHARED_DATA / "gavel" / "simulation_throughputs.json"
    if not source.is_file():
        pytest.skip(f"real data folder {SHARED_DATA} is absent")
    path = tmp_path_factory.mktemp("gavel") / "fitted.json"
    save_model(throughput_model(read_profile(source), mode="fitted"), path)  # type: ignore[arg-type]
    return path


@pytest.mark.parametrize("name", ALL)
def test_every_policy_replays_the_gavel_samples(name: str, gavel_model: Path,
                                                tmp_path: Path) -> None:
    for trace in ("gavel7.trace", "gavel10.trace"):
        summary = run_replay(SAMPLES / trace, "gavel", "v100=4,p100=4,k80=4", name,
                             out=tmp_path / trace, throughput_path=gavel_model,
                             show_progress=False).figures
        assert summary["completed"] == summary["jobs"]
        assert summary["jobs"] == (3 if trace == "gavel7.trace" else 2)


def test_replay_uses_the_policy_round_and_lists_baselines(tmp_path: Path) -> None:
    # The policy's round is its own; --interval adds decision points beside it.
    summary = run_replay(SAMPLES / "philly_small.csv", "philly", "v100=4,k80=4", "gavel",
                         out=tmp_path / "g", show_progress=False).figures
    assert (summary["round_s"], summary["interval_s"]) == (360.0, None)
    summary = run_replay(SAMPLES / "philly_small.csv", "philly", "v100=4,k80=4", "gavel",
                         out=tmp_path / "h", show_progress=False,
                         settings=ReplaySettings(interval_s=50.0)).figures
    assert (summary["round_s"], summary["interval_s"]) == (360.0, 50.0)
    assert summary["restart_penalty_s"] == 30.0
    with pytest.raises(InputError) as error:
        rolling_policy("magic")
    assert "srtf" in str(error.value)
    assert "-agnostic" in str(error.value)
    wrapped = rolling_policy("deadline-agnostic")
    assert isinstance(wrapped, HeterogeneityAgnostic)
    assert isinstance(wrapped.policy, Replanning)
    assert wrapped.round_s is None
    assert rolling_policy("tiresias-agnostic").round_s == 360.0
    assert {name: rolling_policy(name).round_s for name in ALL if "agnostic" not in name} == {
        "sjf": None, "qssf": None, "edf": None, "srtf": 600.0, "tiresias": 360.0,
        "gandiva": 600.0,
        "gavel": 360.0, "gavel-max-sum": 360.0, "ftf": 360.0, "optimus": 600.0,
        "progress": 1800.0, "progress-packed": 1800.0, "progress-elastic": 120.0,
        "gavel-packed": 360.0,
        "fifo-packed": 360.0, "ftf-packed": 360.0, "min-total-duration-packed": 360.0,
        "max-throughput-per-cost-packed": 360.0, "gavel-water-filling-packed": 360.0,
        "fifo-fastest": 360.0,
        "min-total-duration": 360.0,
        "max-throughput-per-cost": 360.0, "isolated": 360.0, "gavel-max-sum-raw": 360.0,
        "max-throughput-per-cost-raw": 360.0, "gavel-water-filling": 360.0,
        "gavel-water-filling-gpus": 360.0}


def test_cli_replays_with_a_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hetsched.cli.main import main

    main(["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly", "--cluster",
          "v100=4,k80=4", "--policy", "srtf-agnostic", "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert "completed: 3" in out
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly", "--cluster",
              "v100=4", "--policy", "srtf-magic", "--out", str(tmp_path / "s")])
    assert exited.value.code == 2
    assert "gandiva" in capsys.readouterr().err
