"""``hetsched bench``: rows per policy x seed x load, the report, plots, resuming, load
scaling, bad input."""

from __future__ import annotations

import csv
import json
import math
from concurrent.futures import Executor
from pathlib import Path

import numpy as np
import pytest

from hetsched.bench import report as bench_report
from hetsched.bench.engine import Cell, run_cell
from hetsched.bench.local_engine import LocalEngine
from hetsched.bench.report import busy_gpus_over_time, write_report
from hetsched.bench.results import append_result, is_heuristic, read_results
from hetsched.bench.runner import run_bench
from hetsched.bench.settings import BenchSettings
from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.core.settings import ReplaySettings
from hetsched.files.replay_inputs import ReplayInputs, scale_arrivals
from hetsched.files.traces import Trace
from hetsched.replaying import ReplayResult
from tests.helpers import catalogue_trace, native_bench

CLUSTER = "v100=2,k80=2"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Eight jobs of the built-in catalogue arriving every 40 s on 4 GPUs, some with
    deadlines: enough contention that the policies differ, small enough to run in ms."""
    return catalogue_trace(tmp_path / "tiny.csv", 8, 40.0, 3000.0, deadline_s=400.0)


def settings(trace: Path, **changes: object) -> BenchSettings:
    return native_bench(trace, **{"cluster": CLUSTER, "policies": ("fifo", "allox"),
                                  "seeds": (0,), "loads": (1.0,), "time_limit_s": 1.0,
                                  **changes})


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _table(report: str, load: str) -> dict[str, dict[str, str]]:
    """The report's table of one load: policy -> column title -> cell."""
    section = report.split(f"## Load {load}\n", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    table = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        table[cells[0].split(" ")[0]] = dict(zip(header, cells, strict=True))
    return table


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_bench_rows_report_and_plots(trace: Path, tmp_path: Path, workers: int) -> None:
    out = tmp_path / "b"
    # The report reads only results.csv and runs/: drawn once, with one worker.
    outcome = run_bench(settings(trace, seeds=(0, 1), workers=workers), out,
                        report=workers == 1)
    assert (outcome.ran, outcome.skipped, outcome.failed, outcome.interrupted) == \
        (4, 0, (), False)
    rows = _csv(out / "results.csv")
    assert sorted((r["policy"], r["seed"], r["load"]) for r in rows) == [
        ("allox", "0", "1"), ("allox", "1", "1"), ("fifo", "0", "1"), ("fifo", "1", "1")]
    for row in rows:
        # Every key of the run's summary.json is a column, with the same value.
        summary = json.loads((out / "runs" / f"{row['policy']}-s{row['seed']}-l1" /
                              "summary.json").read_text())
        assert set(summary) <= set(row)
        assert float(row["avg_jct_s"]) == summary["avg_jct_s"]
        # The replay's CPU time in its worker (not in the run's files).
        assert float(row["cpu_time_s"]) > 0
        assert "cpu_time_s" not in summary
        assert int(row["completed"]) == summary["jobs"] == 8
        # 4 of the 8 jobs have a deadline (the odd ones).
        assert int(row["deadline_jobs"]) == 4
        # Ratios to the bounds, and no policy beats a lower bound.
        assert float(row["avg_jct_over_bound"]) == pytest.approx(
            float(row["avg_jct_s"]) / float(row["bound_avg_jct_s"]))
        assert float(row["avg_jct_over_bound"]) >= 1 - 1e-9
        assert float(row["makespan_over_bound"]) >= 1 - 1e-9
        # Cross-check: the utilisation curve's area is the GPU time the replay accounted.
        series = busy_gpus_over_time(out / "runs" / f"{row['policy']}-s{row['seed']}-l1")
        assert series is not None
        times, busy = series
        assert busy[-1] == 0
        area = float(np.sum(busy[:-1] * np.diff(times)))
        assert area == pytest.approx(float(row["utilization"]) * 4 * float(row["makespan_s"]))
    if workers > 1:
        return
    report = (out / "report.md").read_text()
    table = _table(report, "1")
    # The bold average JCT is the policy with the lowest mean over seeds.
    means = {p: sum(float(r["avg_jct_s"]) for r in rows if r["policy"] == p) / 2
             for p in ("fifo", "allox")}
    best, worst = sorted(means, key=means.__getitem__)
    column = next(title for title in table[best] if title.startswith("avg JCT ("))
    assert table[best][column].startswith("**")
    assert not table[worst][column].startswith("**")
    # fifo is the only heuristic: its ratio to the best heuristic is 1.
    assert table["fifo"]["vs best heuristic"] == "1.00x"
    assert table["allox"]["vs best heuristic"] == f"{means['allox'] / means['fifo']:.2f}x"
    for name in ("jct_cdf_l1.png", "utilization_l1.png", "deadline_met.png",
                 "decision_times.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"({name})" in report


def test_rerun_skips_finished_rows_and_interruption_keeps_them(
        trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "b"
    calls: list[str] = []

    def interrupted_second(cell: Cell, inputs: ReplayInputs, jobs: Trace,
                           executor: Executor | None) -> ReplayResult:
        calls.append(cell.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run_cell(cell, inputs, jobs, executor)

    outcome = run_bench(settings(trace, loads=(1.0, 2.0)), out, report=False,
                        engine=LocalEngine(1, runner=interrupted_second))
    # Likely longest first: the exact model (allox) before the heuristic, the higher
    # load first: allox-l2 finished, allox-l1 interrupted.
    assert calls == ["allox-s0-l2", "allox-s0-l1"]
    assert (outcome.ran, outcome.interrupted) == (1, True)
    assert [(r["policy"], r["load"]) for r in read_results(out / "results.csv")] == [
        ("allox", "2")]
    outcome = run_bench(settings(trace, loads=(1.0, 2.0)), out, report=False)
    assert (outcome.ran, outcome.skipped, outcome.interrupted) == (3, 1, False)
    assert len(read_results(out / "results.csv")) == 4
    # Everything done: a third run replays nothing.
    assert run_bench(settings(trace, loads=(1.0, 2.0)), out, report=False).ran == 0


def test_load_two_halves_the_inter_arrival_times(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "b"
    run_bench(settings(trace, policies=("fifo",), loads=(1.0, 2.0)), out, report=False)

    def arrivals(load: str) -> dict[str, tuple[float, float]]:
        rows = _csv(out / "runs" / f"fifo-s0-l{load}" / "jobs.csv")
        return {r["job"]: (float(r["arrival"]), float(r["deadline"] or "nan")) for r in rows}

    base, fast = arrivals("1"), arrivals("2")
    # The fixture's jobs arrive every 40 s; at load 2 every 20 s.
    assert sorted(a for a, _ in base.values()) == [40.0 * i for i in range(8)]
    assert sorted(a for a, _ in fast.values()) == [20.0 * i for i in range(8)]
    for job, (arrival, deadline) in base.items():
        # A deadline keeps its distance (400 s) from its job's arrival.
        if not math.isnan(deadline):
            assert fast[job][1] - fast[job][0] == pytest.approx(deadline - arrival)
    rows = read_results(out / "results.csv")
    assert {r["load"] for r in rows} == {"1", "2"}


def test_scale_arrivals_is_relative_to_the_first_arrival() -> None:
    jobs = [Job("a", 100.0, "x", 1, 1.0), Job("b", 130.0, "x", 1, 1.0, deadline=200.0)]
    scaled = scale_arrivals(jobs, 3.0)
    assert [j.arrival for j in scaled] == [100.0, 110.0]
    assert scaled[1].deadline == 180.0
    assert scale_arrivals(jobs, 1.0) == tuple(jobs)
    with pytest.raises(InputError, match="bad load"):
        scale_arrivals(jobs, 0.0)


def test_heuristics_and_exact_models() -> None:
    assert is_heuristic("fifo")
    assert is_heuristic("gavel-agnostic")
    assert not is_heuristic("deadline")
    assert not is_heuristic("allox-agnostic")


def test_new_columns_rewrite_the_header(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    append_result(path, {"policy": "fifo", "seed": "0", "load": "1", "avg_jct_s": "5.0"})
    append_result(path, {"policy": "allox", "seed": "0", "load": "1", "avg_jct_s": "4.0",
                         "extra": "x"})
    assert read_results(path) == [
        {"policy": "fifo", "seed": "0", "load": "1", "avg_jct_s": "5.0", "extra": ""},
        {"policy": "allox", "seed": "0", "load": "1", "avg_jct_s": "4.0", "extra": "x"}]
    with pytest.raises(InputError, match="no results"):
        write_report(tmp_path / "empty")


@pytest.mark.slow
def test_cli_bench(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    main(["bench", "--trace", str(trace), "--format", "native", "--cluster", CLUSTER,
          "--policies", "fifo", "--load", "1,0.5", "--workers", "1", "--out", str(out)])
    captured = capsys.readouterr()
    assert "2 runs done, 0 already in results.csv, 0 failed" in captured.out
    # One progress line per finished run on stderr.
    assert "[1/2] fifo-s0-l1: 8/8 jobs" in captured.err
    assert "[2/2] fifo-s0-l0.5: 8/8 jobs" in captured.err
    assert "## Load 0.5" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("args", "pieces"),
    [
        (["--policies", "fifo,magic,allox,nope"], ["--policies", "'magic,nope'", "fifo"]),
        (["--policies", "fifo", "--load", "1,-2"], ["--load", "'-2'"]),
        (["--policies", "fifo", "--load", "fast"], ["--load", "'fast'"]),
        (["--policies", "fifo", "--seeds", "0,one"], ["--seeds", "'one'"]),
        (["--policies", "fifo,,allox"], ["--policies", "empty item"]),
        (["--policies", "fifo", "--cluster", "v100=two"], ["--cluster"]),
        (["--policies", "fifo", "--workers", "0"], ["--workers"]),
    ],
)
def test_cli_bad_input_exits_2(trace: Path, tmp_path: Path, args: list[str],
                               pieces: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--trace", str(trace), "--format", "native", "--cluster", CLUSTER,
            "--out", str(tmp_path / "b"), *args]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    for piece in pieces:
        assert piece in err
    assert "Traceback" not in err
    assert not (tmp_path / "b" / "results.csv").exists()


@pytest.mark.slow
def test_cli_refuses_other_settings_in_the_same_folder(
        trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    common = ["bench", "--trace", str(trace), "--format", "native", "--policies", "fifo",
              "--workers", "1", "--out", str(out)]
    main([*common, "--cluster", CLUSTER])
    with pytest.raises(SystemExit) as exited:
        main([*common, "--cluster", "v100=4"])
    assert exited.value.code == 2
    assert "other settings" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--trace", str(tmp_path / "missing.csv"), "--format", "native",
              "--cluster", CLUSTER, "--policies", "fifo", "--out", str(tmp_path / "c")])
    assert exited.value.code == 2
    assert "no such trace file" in capsys.readouterr().err


def test_busy_gpus_from_decisions_and_completions(tmp_path: Path) -> None:
    # Job c holds 1 GPU from 0 s, is preempted at 3 s, restarts at 8 s, finishes at 12 s;
    # job d holds 2 GPUs from 8 s to 10 s. The decision log has the busy count after
    # each decision; the completions at 10 and 12 s come from jobs.csv.
    (tmp_path / "jobs.csv").write_text("job,start,finish,num_gpus\nc,0,12,1\nd,8,10,2\n")
    (tmp_path / "decisions.csv").write_text("time,busy_gpus\n0,1\n3,0\n8,3\n")
    times, busy = busy_gpus_over_time(tmp_path) or (None, None)
    assert list(times) == [0, 3, 8, 10, 12]
    assert list(busy) == [1, 0, 3, 1, 0]
    # Without the column: first start to finish, the preemption's gap counted as busy.
    (tmp_path / "decisions.csv").write_text("time,pending\n0,0\n")
    times, busy = busy_gpus_over_time(tmp_path) or (None, None)
    assert list(times) == [0, 8, 10, 12]
    assert list(busy) == [1, 3, 1, 0]


def test_decision_times_come_from_timing_json(tmp_path: Path, trace: Path) -> None:
    # A run writes its per-decision wall-clock times into timing.json (one per row of
    # decisions.csv), not into decisions.csv; a run written before timing.json existed
    # still gives its decisions.csv column.
    out = tmp_path / "b"
    run_bench(settings(trace, policies=("fifo",)), out, report=False)
    run = out / "runs" / "fifo-s0-l1"
    rows = (run / "decisions.csv").read_text().splitlines()
    assert "decision_time_s" not in rows[0]
    times = bench_report.decision_times(run)
    assert len(times) == len(rows) - 1
    assert all(t >= 0 for t in times)
    row = read_results(out / "results.csv")[0]
    assert float(row["wall_time_s"]) > 0  # results.csv keeps timing.json's figures
    old = tmp_path / "old"
    old.mkdir()
    (old / "decisions.csv").write_text("time,decision_time_s\n0,0.5\n3,0.25\n")
    assert bench_report.decision_times(old) == [0.5, 0.25]
    assert bench_report.decision_times(tmp_path / "missing") == []


def test_an_openb_bench_with_aliases_and_shares_runs_in_worker_processes(
        tmp_path: Path) -> None:
    """The inputs of a bench with GPU aliases and shares (an aliased throughput model and
    the co-location factors) go to worker processes: two workers give the files and rows
    of one process, and summary.json records how the trace was read."""
    import pickle

    from hetsched.files.replay_inputs import replay_inputs
    from tests.helpers import ROOT, same_results

    data = ROOT / "tests" / "data" / "traces"
    cluster = f"openb:{data / 'openb_g3_nodes.csv'}"
    inputs = replay_inputs(data / "openb_g3_pods.csv", "openb", cluster,
                           settings=ReplaySettings(gpu_aliases="g3=a100",
                                                   colocation_factor=0.7))
    again = pickle.loads(pickle.dumps(inputs))
    assert (dict(again.aliases), again.colocation) == ({"g3": "a100"}, inputs.colocation)
    assert again.truth.throughput("image-cnn-small", "g3", 1, "packed") == \
        inputs.truth.throughput("image-cnn-small", "a100", 1, "packed") > 0
    common = {"trace": data / "openb_g3_pods.csv", "trace_format": "openb",
              "cluster": cluster, "policies": ("fifo", "srtf"), "seeds": (0, 1),
              "reference_gpu": "t4", "gpu_aliases": {"g3": "a100"},
              "colocation_factor": 0.7, "lp_bound": False}
    run_bench(settings(**common, workers=1), tmp_path / "one", report=False)  # type: ignore[arg-type]
    outcome = run_bench(settings(**common, workers=2), tmp_path / "two",  # type: ignore[arg-type]
                        report=False, engine=LocalEngine(2))
    assert (outcome.ran, outcome.failed) == (4, ())
    same_results(tmp_path / "two", tmp_path / "one")
    summary = json.loads((tmp_path / "two" / "runs" / "srtf-s0-l1" / "summary.json")
                         .read_text())
    assert (summary["reference_gpu"], summary["gpu_aliases"], summary["colocation_factor"],
            summary["gpu_share_jobs"]) == ("t4", {"g3": "a100"}, 0.7, 9)
