"""The bench's LP bound on the average JCT (hetsched.bench.lp_bounds): one per job set,
cached in the bench folder, in every row and in the report, never above a policy's
average JCT nor below the isolated bound."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
from pathlib import Path

import pytest

from hetsched.bench import lp_bounds as bench_bounds
from hetsched.bench.runner import run_bench
from hetsched.bench.settings import BenchSettings
from tests.helpers import catalogue_trace, native_bench

CLUSTER = "v100=2,k80=2"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Ten jobs of the built-in catalogue arriving every 30 s on 4 GPUs: they compete."""
    return catalogue_trace(tmp_path / "tiny.csv", 10, 30.0, 4000.0)


def settings(trace: Path, **changes: object) -> BenchSettings:
    return native_bench(trace, **{"cluster": CLUSTER, "policies": ("fifo", "srtf"),
                                  "seeds": (0, 1), "loads": (1.0, 2.0), "time_limit_s": 1.0,
                                  **changes})


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_every_row_has_the_lp_bound(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "b"
    log = io.StringIO()
    run_bench(settings(trace), out, stream=log)
    found = rows(out)
    assert len(found) == 8
    for row in found:
        lp, isolated = float(row["bound_lp_avg_jct_s"]), float(row["bound_avg_jct_s"])
        average = float(row["avg_jct_s"])
        assert row["bound_lp_status"] == "optimal"
        # Tighter than the isolated bound here (the jobs compete), never above a policy.
        assert isolated * 1.01 < lp <= average
        assert float(row["avg_jct_over_lp_bound"]) == pytest.approx(average / lp)
    # One bound per job set: the seeds of a native trace read the same jobs, the loads
    # differ. The cached isolated bound is the replays' own (the same jobs were read).
    cache = json.loads((out / "lp_bounds.json").read_text())
    assert cache["version"] == bench_bounds.VERSION
    assert len(cache["bounds"]) == 2
    for load in ("1", "2"):
        lps = {row["bound_lp_avg_jct_s"] for row in found if row["load"] == load}
        assert len(lps) == 1
        isolated = {float(row["bound_avg_jct_s"]) for row in found if row["load"] == load}
        assert any(entry["isolated_avg_jct_s"] == pytest.approx(isolated.pop())
                   for entry in cache["bounds"].values())
    assert log.getvalue().count("LP bound of seed") == 2
    report = (out / "report.md").read_text()
    assert "avg JCT / LP bound" in report
    assert "by the LP relaxation" in report


@pytest.mark.slow
def test_bounds_computed_beside_the_runs_are_those_computed_before_them(
        trace: Path, tmp_path: Path) -> None:
    # With two workers the LPs are solved in a process of their own while the runs go on;
    # rows finished before their bound get it at the end. The figures are those of a bench
    # of one worker, which computes them in its own process before the runs.
    before, beside = tmp_path / "before", tmp_path / "beside"
    run_bench(settings(trace), before, report=False)
    log = io.StringIO()
    run_bench(settings(trace, workers=2), beside, stream=log)
    assert log.getvalue().count("LP bound of seed") == 2
    assert "earlier rows" not in log.getvalue()  # no earlier bench: nothing to say
    key = ("policy", "seed", "load")
    found = sorted(rows(beside), key=lambda r: tuple(r[k] for k in key))
    expected = sorted(rows(before), key=lambda r: tuple(r[k] for k in key))
    assert len(found) == 8
    for row, direct in zip(found, expected, strict=True):
        for column in (*bench_bounds.COLUMNS, "avg_jct_s"):
            assert row[column] == direct[column], column
    def cached(out: Path) -> dict[str, dict[str, object]]:  # the clock's fields aside
        bounds = json.loads((out / "lp_bounds.json").read_text())["bounds"]
        return {key: {k: v for k, v in entry.items() if k not in ("build_s", "lp_s")}
                for key, entry in bounds.items()}

    assert cached(beside) == cached(before)
    assert "avg JCT / LP bound" in (beside / "report.md").read_text()


def test_closing_stops_the_bounds_process(trace: Path, tmp_path: Path) -> None:
    # What an interrupted bench does: the process is stopped, nothing is cached, and the
    # rows lack the bound until a rerun adds it.
    bounds = bench_bounds.LpBounds(tmp_path, settings(trace), note=lambda _: None)
    bounds.start([(0, 1.0), (0, 2.0)], beside=True)
    process = bounds._process
    assert process is not None
    bounds.close()
    assert bounds._process is None
    assert process.exitcode is not None  # killed, or done: gone either way
    assert bounds.known_columns(0, 1.0, {"avg_jct_s": "1"}) == dict.fromkeys(
        bench_bounds.COLUMNS, "")
    assert not (tmp_path / "lp_bounds.json").exists()
    bounds.close()  # idempotent


def test_a_bounds_process_that_dies_fails_its_bounds_and_the_bench_goes_on(
        trace: Path, tmp_path: Path) -> None:
    # The process ended (killed, out of memory) before sending the bound of seed 0, load
    # 2: what it sent is kept, the rest is reported failed, and finish() does not wait.
    notes: list[str] = []
    bounds = bench_bounds.LpBounds(tmp_path, settings(trace), note=notes.append)
    assert bounds.figures(0, 1.0) is not None  # computed here
    assert bounds.figures(0, 2.0, compute=False) is None  # read, left to the process
    receiver, sender = multiprocessing.Pipe(duplex=False)
    bounds._results = receiver
    bounds._pending = {bounds._keys[(0, 2.0)]: (0, 2.0)}
    sender.close()  # the process's end, gone with it
    results = tmp_path / "results.csv"
    results.write_text("policy,seed,load,avg_jct_s\nfifo,0,2,600\nfifo,0,1,600\n")
    filled = bounds.finish(results)
    assert [(row["load"], row["bound_lp_status"]) for row in filled] == [("1", "optimal")]
    assert notes[-1] == ("LP bound of seed 0, load 2 not computed: the bounds' process "
                         "ended (exit code None)")
    assert rows(tmp_path)[0]["bound_lp_avg_jct_s"] == ""
    assert bounds.figures(0, 2.0) is None  # failed: not tried again in this bench


def test_a_resumed_bench_reuses_the_cached_bounds(trace: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "b"
    run_bench(settings(trace, policies=("fifo",)), out, report=False)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the LP bound was computed again")

    monkeypatch.setattr(bench_bounds, "completion_bound", fail)
    run_bench(settings(trace, policies=("fifo", "srtf")), out, report=False)
    assert all(row["bound_lp_avg_jct_s"] for row in rows(out))


@pytest.mark.slow
def test_a_failed_bound_leaves_empty_cells(trace: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("HiGHS rejected the model")

    monkeypatch.setattr(bench_bounds, "completion_bound", fail)
    log = io.StringIO()
    outcome = run_bench(settings(trace, policies=("fifo",), seeds=(0,), loads=(1.0,)),
                        tmp_path / "b", stream=log)
    assert outcome.ran == 1
    assert "LP bound of seed 0, load 1 not computed: HiGHS rejected the model" in \
        log.getvalue()
    (row,) = rows(tmp_path / "b")
    assert row["bound_lp_avg_jct_s"] == row["avg_jct_over_lp_bound"] == ""
    assert "avg JCT / LP bound" in (tmp_path / "b" / "report.md").read_text()


def test_without_the_lp_bound(trace: Path, tmp_path: Path) -> None:
    run_bench(settings(trace, policies=("fifo",), seeds=(0,), loads=(1.0,), lp_bound=False),
              tmp_path / "b", report=False)
    (row,) = rows(tmp_path / "b")
    assert "bound_lp_avg_jct_s" not in row
    assert not (tmp_path / "b" / "lp_bounds.json").exists()


def test_a_rerun_adds_the_bound_to_earlier_rows(trace: Path, tmp_path: Path) -> None:
    """Rows of a bench run without the LP bound get it when the bench is run again (no
    replay is redone): the figures equal a bench that had it from the start."""
    out = tmp_path / "b"
    run_bench(settings(trace, policies=("fifo",), seeds=(0,), lp_bound=False), out,
              report=False)
    before = rows(out)
    assert all("bound_lp_avg_jct_s" not in row for row in before)
    log = io.StringIO()
    outcome = run_bench(settings(trace, policies=("fifo",), seeds=(0,)), out, stream=log,
                        report=False)
    assert outcome.ran == 0
    assert outcome.skipped == 2
    assert "LP bound added to 2 earlier rows" in log.getvalue()
    after = rows(out)
    fresh = tmp_path / "fresh"
    run_bench(settings(trace, policies=("fifo",), seeds=(0,)), fresh, report=False)
    for old, new, direct in zip(before, after, rows(fresh), strict=True):
        assert {k: new[k] for k in old} == old  # nothing else changed
        assert new["bound_lp_status"] == "optimal"
        for column in bench_bounds.COLUMNS:
            assert new[column] == direct[column]


@pytest.mark.slow
def test_the_command_line_switch(trace: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hetsched.cli.main import cli

    common = ["bench", "--trace", str(trace), "--format", "native", "--cluster", CLUSTER,
              "--policies", "fifo", "--workers", "1", "--time-limit", "1"]
    done = CliRunner().invoke(cli, [*common, "--no-lp-bound", "--out", str(tmp_path / "a")])
    assert done.exit_code == 0, done.output
    (row,) = rows(tmp_path / "a")
    assert "bound_lp_avg_jct_s" not in row
    done = CliRunner().invoke(cli, [*common, "--out", str(tmp_path / "b")])
    assert done.exit_code == 0, done.output
    (row,) = rows(tmp_path / "b")
    assert float(row["bound_lp_avg_jct_s"]) >= float(row["bound_avg_jct_s"])
