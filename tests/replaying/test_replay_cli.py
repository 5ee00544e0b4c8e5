"""``hetsched replay`` end to end: on the real Gavel trace (when the data is present) and on
the project's own sample traces; bad input gives exit code 2."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.settings import ReplaySettings
from tests.helpers import ROOT

SAMPLES = ROOT / "tests" / "data" / "traces"


@pytest.mark.slow
def test_replay_gavel_trace_with_fifo(shared_data: Path, tmp_path: Path) -> None:
    trace = shared_data / "gavel" / "traces" / "ee9e8c.trace"
    done = subprocess.run(
        [sys.executable, "-m", "hetsched", "replay", str(trace), "--format", "gavel",
         "--cluster", "v100=36,p100=36,k80=36", "--policy", "fifo", "--limit-jobs", "400",
         "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["jobs"] == summary["completed"] == 400
    assert summary["fallbacks"] == 0
    assert summary["throughput"].endswith("simulation_throughputs.json")
    # Strict FIFO is work-conserving only up to its head job: the cluster is never
    # more than fully used, and somebody waits.
    assert 0 < summary["utilization"] <= 1
    assert summary["avg_queue_s"] > 0
    assert "jobs: 400" in done.stdout
    assert "Traceback" not in done.stderr


def test_replay_philly_sample_with_a_model_policy(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    native = SAMPLES / "philly_small.csv"
    main(["replay", str(native), "--format", "philly", "--cluster", "v100=8,k80=8",
          "--policy", "allox", "--out", str(tmp_path / "r")])
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] > 0
    assert summary["throughput"] == "built-in catalogue"
    assert (tmp_path / "r" / "jobs.csv").read_text().count("\n") == summary["jobs"] + 1


@pytest.mark.slow
def test_replay_gavel_with_pop_partitions_at_load_2(shared_data: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # 300 jobs arriving twice as fast on 24 GPUs (hundreds active), the LP split in 4:
    # every job finishes, the replay passes the checker (run_replay raises otherwise), no
    # decision falls back, and every solve's objective is a share of the monolithic
    # optimum: POP never beats it. (It can lose much here: 2 GPUs of a type per
    # partition for gangs of up to 8; the mean is 0.83, benchmarks/allocation.py has
    # 0.98-0.999 at 10,000 jobs.)
    trace = shared_data / "gavel" / "traces" / "ee9e8c.trace"
    main(["replay", str(trace), "--format", "gavel", "--cluster", "v100=8,p100=8,k80=8",
          "--policy", "gavel", "--load", "2", "--partitions", "4", "--limit-jobs", "300",
          "--out", str(tmp_path / "p")])
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] == 300
    assert summary["fallbacks"] == 0
    assert summary["partitions"] == 4
    assert summary["pop_solves"] > 0
    assert 0 < summary["pop_objective_ratio_min"] <= summary["pop_objective_ratio_mean"]
    assert summary["pop_objective_ratio_mean"] <= 1 + 1e-9
    decisions = (tmp_path / "p" / "decisions.csv").read_text()
    assert "POP k=4: objective" in decisions


@pytest.mark.parametrize(
    ("args", "piece"),
    [
        (["--cluster", "h100=8"], "h100"),
        (["--cluster", "v100=8", "--policy", "magic"], "unknown policy"),
        (["--cluster", "v100=eight"], "--cluster"),
        (["--cluster", "v100=8", "--policy", "srtf", "--partitions", "4"], "--partitions"),
        (["--cluster", "v100=8", "--policy", "gavel", "--partitions", "0"], "--partitions"),
        (["--cluster", "v100=8", "--policy", "gavel", "--partitions", "4", "--backend", "cbc"],
         "--partitions"),
        (["--cluster", "v100=8", "--load", "0"], "--load"),
    ],
)
def test_replay_bad_input_exits_2(tmp_path: Path, args: list[str], piece: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    native = SAMPLES / "philly_small.csv"
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(native), "--format", "philly", *args, "--out", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert piece in err
    assert "Traceback" not in err


def test_replays_into_one_folder_are_identical_sets(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # The same replay twice into one folder, then into another: summary.json, jobs.csv and
    # decisions.csv are byte-identical; the wall clock is only in timing.json; each write
    # replaces the folder as a whole and leaves nothing beside it.
    args = ["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly", "--cluster",
            "v100=4,k80=4", "--policy", "gavel"]
    main([*args, "--out", str(tmp_path / "a")])
    printed = capsys.readouterr().out
    assert "round_s: 360" in printed
    assert "restart_penalty_s: 30" in printed
    assert "timing.json" in printed
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    (tmp_path / "a" / "jobs.csv.tmp").write_text("left by an older version")
    main([*args, "--out", str(tmp_path / "a")])
    main([*args, "--out", str(tmp_path / "b")])
    for folder in ("a", "b"):
        files = {p.name: p.read_bytes() for p in (tmp_path / folder).iterdir()}
        assert sorted(files) == ["decisions.csv", "jobs.csv", "run.toml", "summary.json",
                                 "timing.json"]
        for name in ("summary.json", "jobs.csv", "decisions.csv"):
            assert files[name] == first[name], (folder, name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    summary = json.loads(first["summary.json"])
    timing = json.loads(first["timing.json"])
    assert "wall_time_s" not in summary
    assert timing["wall_time_s"] > 0
    assert len(timing["decision_time_s"]) == summary["decisions"]
    assert (summary["round_s"], summary["restart_penalty_s"]) == (360.0, 30.0)


def test_a_start_latency_is_charged_recorded_and_checked(tmp_path: Path) -> None:
    # The three jobs fit on four GPUs side by side (2 GPUs at 07:00, 1 at 07:01:55, 4 at
    # 08:00, after both ended), so nothing queues and FIFO preempts nothing: the latency
    # adds 5 s to every job's JCT, and the replay (checked by the independent checker,
    # which knows the latency) still passes.
    args = ["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly", "--cluster",
            "v100=4", "--policy", "fifo"]
    main([*args, "--out", str(tmp_path / "plain")])
    main([*args, "--start-latency", "5", "--out", str(tmp_path / "late")])
    plain = json.loads((tmp_path / "plain" / "summary.json").read_text())
    late = json.loads((tmp_path / "late" / "summary.json").read_text())
    assert (plain["start_latency_s"], late["start_latency_s"]) == (0.0, 5.0)
    assert "start-latency = 5.0" in (tmp_path / "late" / "run.toml").read_text()
    assert late["completed"] == plain["completed"] == 3
    assert (late["avg_jct_s"], late["avg_queue_s"]) == (
        pytest.approx(plain["avg_jct_s"] + 5), plain["avg_queue_s"])
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--start-latency", "-1", "--out", str(tmp_path / "bad")])
    assert exit_info.value.code == 2


def test_the_total_cost_is_gpu_hours_at_the_clusters_prices(tmp_path: Path) -> None:
    # Every GPU-second of jobs.csv at the V100's price: the catalogue's 2.48 USD/h for
    # --cluster v100=4, or what --prices says; a price for a type the cluster lacks is
    # refused (exit 2).
    args = ["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly", "--cluster",
            "v100=4", "--policy", "fifo"]
    main([*args, "--out", str(tmp_path / "catalogue")])
    main([*args, "--prices", "v100=0.74", "--out", str(tmp_path / "gavel")])
    for name, price in (("catalogue", 2.48), ("gavel", 0.74)):
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        with (tmp_path / name / "jobs.csv").open(newline="") as handle:
            gpu_seconds = sum(float(row["gpu_seconds"]) for row in csv.DictReader(handle))
        assert gpu_seconds > 0
        assert summary["total_cost_usd"] == pytest.approx(gpu_seconds / 3600 * price)
        assert summary["cost_per_job_usd"] == pytest.approx(summary["total_cost_usd"] / 3)
    assert 'prices = "v100=0.74"' in (tmp_path / "gavel" / "run.toml").read_text()
    # (--spread-speed is recorded too; its effect: tests/simulate/test_simulate.py)
    main([*args, "--spread-speed", "packed", "--out", str(tmp_path / "packed")])
    assert 'spread-speed = "packed"' in (tmp_path / "packed" / "run.toml").read_text()
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--prices", "k80=0.135", "--out", str(tmp_path / "bad")])
    assert exit_info.value.code == 2


def test_replay_refuses_a_folder_holding_other_files(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    # The output folder is replaced as a whole, so one holding anything else is refused
    # before the replay runs, and left as it was.
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly",
              "--cluster", "v100=4", "--out", str(tmp_path)])
    assert exited.value.code == 2
    assert "notes.txt" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_interrupted_replay_writes_what_finished(tmp_path: Path) -> None:
    # Ctrl-C after two of five jobs: the outputs are written, as one set, and say so.
    from hetsched.core.records import Cluster, GpuType, Job, Node
    from hetsched.core.throughput import ThroughputTable
    from hetsched.policies.rolling import RollingFifo
    from hetsched.simulate.simulator import Simulator

    cluster = Cluster((GpuType("v100"),), (Node("n", "v100", 1),))
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0)])
    jobs = [Job(f"j{i}", float(i), "cnn", 1, 100.0) for i in range(5)]

    def stop_after_two(done: int, total: int, now: float, decisions: int) -> None:
        if done >= 2:
            raise KeyboardInterrupt

    Simulator(cluster, jobs, RollingFifo(), truth=table, progress=stop_after_two).run() \
        .write(tmp_path / "r")
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert (summary["interrupted"], summary["completed"], summary["jobs"]) == (True, 2, 5)
    assert (tmp_path / "r" / "jobs.csv").read_text().count("\n") == 6
    assert (tmp_path / "r" / "timing.json").is_file()


def test_an_interrupted_replay_with_a_preempted_unfinished_job_passes_the_checker() -> None:
    # srtf on one V100: "long" (1,000 s) starts at 0; "short" (10 s) arrives at 100 and
    # preempts it. Ctrl-C once short is done: long has one ended segment (0-100 s, a
    # tenth of its work) and is not finished. Its segments do less than its work, which
    # the checker must accept for an interrupted replay (it did not: philly.csv under
    # gavel, stopped by SIGTERM, failed with 241 "work-total" violations).
    from hetsched.core.records import Cluster, GpuType, Job, Node
    from hetsched.core.throughput import ThroughputTable
    from hetsched.registry import rolling
    from hetsched.replaying import check_replay
    from hetsched.simulate.simulator import Simulator

    cluster = Cluster((GpuType("v100"),), (Node("n", "v100", 1),))
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0)])
    jobs = [Job("long", 0.0, "cnn", 1, 10_000.0), Job("short", 100.0, "cnn", 1, 100.0)]

    def stop_after_one(done: int, total: int, now: float, decisions: int) -> None:
        if done >= 1:
            raise KeyboardInterrupt

    replay = Simulator(cluster, jobs, rolling("srtf"), truth=table,
                       progress=stop_after_one).run()
    assert replay.interrupted
    assert [(a.job, a.start) for a in replay.schedule().assignments
            if a.job == "long"] == [("long", 0.0)]
    assert check_replay(replay, jobs, table) == []


def test_an_interrupted_replay_bounds_only_the_jobs_it_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "long" (1e6 s on a V100) and two jobs of 100 s start at 0 on 4 V100s; Ctrl-C at the
    # 1,000 s decision point: the two short jobs are done, avg JCT 100 s. The bound of
    # all three jobs, (1e6 + 100 + 100) / 3 = 333,400 s, would make the partial 100 s
    # look 3,334 times better than any schedule can be; the bounds are those of the
    # finished jobs (100 s each: avg JCT >= 100, makespan >= 100).
    from hetsched.core.records import Job
    from hetsched.files.traces.native import write_native
    from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RollingFifo
    from hetsched.replaying import run_replay

    class StopAt(PolicyHooks):
        name = "stop"
        round_s = None

        def decide(self, state: ClusterState) -> Decision:
            if state.now >= 1000.0:
                raise KeyboardInterrupt
            return RollingFifo().decide(state)

    monkeypatch.setattr("hetsched.replaying.rolling_policy", lambda *a, **k: StopAt())
    trace = tmp_path / "t.csv"
    write_native([Job("long", 0.0, "rnn-lm", 1, 2e7), Job("s1", 0.0, "rnn-lm", 1, 2000.0),
                  Job("s2", 0.0, "rnn-lm", 1, 2000.0)], trace)
    figures = run_replay(trace, "native", "v100=4", "fifo", out=tmp_path / "r",
                         show_progress=False, settings=ReplaySettings(interval_s=1000.0)).figures
    written = json.loads((tmp_path / "r" / "summary.json").read_text())
    for got in (figures, written):
        assert (got["interrupted"], got["completed"], got["jobs"]) == (True, 2, 3)
        assert got["bounds_cover"] == "finished jobs"
        assert got["avg_jct_s"] == pytest.approx(100.0)
        assert got["bound_avg_jct_s"] == pytest.approx(100.0)
        assert got["bound_avg_jct_s"] <= got["avg_jct_s"] * (1 + 1e-12)
        assert got["bound_makespan_s"] <= got["makespan_s"] * (1 + 1e-12)
