"""Decision intervals and rounds of at least 1 s, a finite restart
penalty, and quiet rounds skipped (a boundary where the policy promises nothing changes
until the next event) with the same outcome as a call at every boundary."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.settings import MAX_RESTART_PENALTY_S, MIN_PERIOD_S, ReplaySettings
from hetsched.core.throughput import ThroughputTable
from hetsched.policies.baselines.gavel import Gavel
from hetsched.policies.baselines.gavel_params import GavelParams
from hetsched.policies.baselines.tiresias import Tiresias
from hetsched.policies.rolling import ClusterState, Decision, RollingFifo
from hetsched.registry import rolling
from hetsched.replaying import rolling_policy
from hetsched.simulate.record import Replay
from hetsched.simulate.simulator import Simulator
from tests.helpers import ROOT, exits_2

TABLE = ThroughputTable.from_rows([
    ("a", "v100", 1, "packed", 2.0), ("a", "k80", 1, "packed", 1.0),
    ("a", "v100", 2, "packed", 3.6), ("a", "k80", 2, "packed", 1.8),
    ("b", "v100", 1, "packed", 3.0), ("b", "k80", 1, "packed", 0.5),
])


def cluster() -> Cluster:
    """Two V100s on one node, two K80s on another."""
    return Cluster((GpuType("v100"), GpuType("k80")),
                   (Node("v", "v100", 2), Node("k", "k80", 2)))


def jobs(seed: int) -> list[Job]:
    """Bursts of 1-3 jobs (1 or 2 GPUs, 500-30,000 s of work on a V100) with gaps long
    enough that a job often runs alone for many rounds, and crosses Tiresias' 1 and 10
    GPU-hour thresholds while it does."""
    rng = random.Random(seed)
    out = []
    clock = 0.0
    for burst in range(5):
        for k in range(rng.randint(1, 3)):
            job_type = rng.choice("ab")
            gpus = rng.choice((1, 2)) if job_type == "a" else 1
            seconds = rng.uniform(500.0, 30_000.0)
            speed = TABLE.throughput(job_type, "v100", gpus, "packed")
            out.append(Job(f"j{burst}{k}", clock + rng.uniform(0.0, 50.0), job_type, gpus,
                           seconds * speed))
        clock += rng.uniform(2_000.0, 40_000.0)
    return out


def files(replay: Replay, folder: Path) -> tuple[str, list[list[str]]]:
    """jobs.csv as text and decisions.csv's rows."""
    replay.write(folder)
    with (folder / "decisions.csv").open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return (folder / "jobs.csv").read_text(encoding="utf-8"), rows


POLICIES = ["gavel", "gavel-max-sum", "tiresias", "gandiva", "srtf", "optimus",
            "tiresias-agnostic", "fifo", "sjf"]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", POLICIES)
def test_skipped_quiet_rounds_give_the_same_jobs(name: str, seed: int,
                                                 tmp_path: Path) -> None:
    # The same replay with a call at every boundary and with quiet rounds skipped:
    # jobs.csv is byte-identical, and decisions.csv is the full run's rows less some rows
    # where nothing started or was preempted and nothing fell back. (FIFO and SJF have no
    # round: a 100 s --interval gives them boundaries.)
    interval = 100.0 if name in ("fifo", "sjf") else None
    runs = {}
    for skip in (False, True):
        policy = rolling_policy(name, settings=ReplaySettings(backend="highs", time_limit_s=None))
        replay = Simulator(cluster(), jobs(seed), policy, truth=TABLE, interval_s=interval,
                           restart_penalty_s=30.0, skip_quiet_rounds=skip).run()
        assert replay.summary()["completed"] == len(replay.records)
        runs[skip] = files(replay, tmp_path / f"{name}-{skip}")
    (every_jobs, every_rows), (skip_jobs, skip_rows) = runs[False], runs[True]
    assert skip_jobs == every_jobs
    header = every_rows[0]
    assert skip_rows[0] == header
    started, preempted, fallback = (header.index(c) for c in ("started", "preempted",
                                                              "fallback"))
    kept = iter(skip_rows[1:])
    wanted = next(kept, None)
    skipped = 0
    for row in every_rows[1:]:
        if row == wanted:
            wanted = next(kept, None)
            continue
        skipped += 1
        assert (row[started], row[preempted], row[fallback]) == ("0", "0", "False"), row
    assert wanted is None  # every kept row is one of the full run's, in order
    assert skipped == len(every_rows) - len(skip_rows)
    assert skipped > 0  # lone jobs ran for many rounds: there was something to skip


class CountingTiresias(Tiresias):
    """Tiresias counting its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[float] = []

    def decide(self, state: ClusterState) -> Decision:
        self.calls.append(state.now)
        return super().decide(state)


class CountingGavel(Gavel):
    """Gavel counting its calls."""

    def __init__(self) -> None:
        super().__init__(GavelParams(backend="highs"))
        self.calls: list[float] = []

    def decide(self, state: ClusterState) -> Decision:
        self.calls.append(state.now)
        return super().decide(state)


def test_one_long_job_costs_a_few_calls() -> None:
    # One 1-GPU job of 1e9 s of work at 2 steps/s: 5e8 s (about 16 years), 360 s rounds:
    # 1,388,889 boundaries. Tiresias is called at the arrival (0) and the first boundary
    # (360, an empty decision: quiet until 1 s before 3,600 GPU-s), then at the last
    # boundary before 3,599 (3,240), at 3,600 (the job enters queue 1; quiet until
    # 35,999), at 35,640 and 36,000 (queue 2, the last), and at the last boundary
    # before the end, 360 x floor(5e8 / 360) = 499,999,680: 7 calls.
    job = [Job("long", 0.0, "a", 1, 1e9)]
    policy = CountingTiresias()
    replay = Simulator(cluster(), job, policy, truth=TABLE).run()
    assert replay.records["long"].finish == 5e8
    assert policy.calls == [0.0, 360.0, 3240.0, 3600.0, 35640.0, 36000.0, 499_999_680.0]
    assert policy.queue_of("long") == 2
    assert len(replay.decisions) == 7
    # Gavel: arrival (LP solved: all of the V100), 360 (empty: the allocation gives the
    # job its own type only), then the last boundary before the end.
    gavel = CountingGavel()
    replay = Simulator(cluster(), job, gavel, truth=TABLE).run()
    assert replay.records["long"].finish == 5e8
    assert gavel.calls == [0.0, 360.0, 499_999_680.0]


def test_a_job_waiting_behind_a_long_one_under_fifo_with_an_interval() -> None:
    # One V100. "long" holds it for 5e8 s; "next" arrives at 0.5 s and waits. FIFO with
    # --interval 1: the queue cannot start until "long" ends, so FIFO's empty decision at
    # the boundary 1 s is quiet until then: calls at 0 (start), 0.5 (arrival), 1, the
    # last boundary before 5e8 (499,999,999), 5e8 ("long" ends, "next" starts: 20 steps
    # at 2/s), 5e8 + 1 (empty, quiet) and 5e8 + 9, the last boundary before "next" ends.
    one = Cluster((GpuType("v100"),), (Node("v", "v100", 1),))
    work = [Job("long", 0.0, "a", 1, 1e9), Job("next", 0.5, "a", 1, 20.0)]
    # FIFO is a queue policy, driven through start_prefix; every call is a decision row.
    replay = Simulator(one, work, RollingFifo(), truth=TABLE, interval_s=1.0).run()
    calls = [decision.time for decision in replay.decisions]
    assert calls == [0.0, 0.5, 1.0, 499_999_999.0, 5e8, 5e8 + 1, 5e8 + 9]
    assert replay.records["next"].finish == 5e8 + 10.0


def test_short_intervals_and_rounds_are_refused() -> None:
    job = [Job("a", 0.0, "a", 1, 10.0)]
    assert MIN_PERIOD_S == 1.0
    with pytest.raises(InputError, match=r"interval_s: bad decision interval.*0.001"):
        Simulator(cluster(), job, RollingFifo(), truth=TABLE, interval_s=0.001)
    with pytest.raises(InputError, match=r"gavel's round_s: bad decision interval"):
        Simulator(cluster(), job, rolling("gavel", round_s=0.5), truth=TABLE)
    Simulator(cluster(), job, RollingFifo(), truth=TABLE, interval_s=1.0)  # the minimum


@pytest.mark.parametrize("penalty", [math.inf, math.nan, -1.0, 86_401.0])
def test_restart_penalties_outside_0_to_a_day_are_refused(penalty: float) -> None:
    assert MAX_RESTART_PENALTY_S == 86_400.0
    with pytest.raises(InputError, match="restart_penalty_s: bad restart penalty"):
        Simulator(cluster(), [Job("a", 0.0, "a", 1, 10.0)], RollingFifo(), truth=TABLE,
                  restart_penalty_s=penalty)


@pytest.mark.parametrize(("option", "value"), [("--interval", "0.001"), ("--interval", "nan"),
                                               ("--restart-penalty", "inf"),
                                               ("--restart-penalty", "nan"),
                                               ("--restart-penalty", "1e6")])
def test_replay_cli_refuses_them_with_exit_2(option: str, value: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    trace = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
    err = exits_2(["replay", str(trace), "--format", "philly", "--cluster", "v100=4",
                   option, value, "--out", str(tmp_path / "r")], capsys)
    assert option in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("option", "value"), [("--interval", "0.5"), ("--interval", "nan"),
                                               ("--restart-penalty", "inf"),
                                               ("--restart-penalty", "nan")])
def test_bench_cli_refuses_them_with_exit_2(option: str, value: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    trace = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
    err = exits_2(["bench", "--trace", str(trace), "--format", "philly", "--cluster",
                   "v100=4", "--policies", "fifo", option, value, "--out", str(tmp_path / "b")],
                  capsys)
    assert option in err
    assert "Traceback" not in err
    assert not (tmp_path / "b").exists()
