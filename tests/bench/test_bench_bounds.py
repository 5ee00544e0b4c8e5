"""The bench's LP bound on the average JCT (hetsched.bench_bounds): one per job set,
cached in the bench folder, in every row and in the report, never above a policy's
average JCT nor below the isolated bound."""

from __future__ import annotations

import csv
import io
import json
import threading
from pathlib import Path

import pytest

from hetsched import bench as bench_module
from hetsched import bench_bounds
from hetsched.bench import BenchSettings, run_bench
from hetsched.data import Job
from hetsched.traces import write_native

CLUSTER = "v100=2,k80=2"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Ten jobs of the built-in catalogue arriving every 30 s on 4 GPUs: they compete."""
    kinds = ["image-cnn-small", "rnn-lm", "recommender", "transformer-lm"]
    jobs = [Job(f"j{i}", 30.0 * i, kinds[i % 4], 1 + (i % 2), 4000.0 + 1500 * (i % 3))
            for i in range(10)]
    path = tmp_path / "tiny.csv"
    write_native(jobs, path)
    return path


def settings(trace: Path, **changes: object) -> BenchSettings:
    values: dict[str, object] = {"trace": trace, "trace_format": "native",
                                 "cluster": CLUSTER, "policies": ("fifo", "srtf"),
                                 "seeds": (0, 1), "loads": (1.0, 2.0), "workers": 1,
                                 "time_limit_s": 1.0}
    values.update(changes)
    return BenchSettings(**values)  # type: ignore[arg-type]


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


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


def test_the_runs_go_on_while_the_bounds_are_computed(
        trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The bounds are computed in the background: here each waits until a run has
    # finished, which a bench computing them before its runs would never see (it would
    # wait out the timeout). Rows finished before their bound get it at the end, and the
    # figures equal a bench whose bounds were cached before it began.
    reference = tmp_path / "reference"
    run_bench(settings(trace), reference, report=False)
    real = bench_bounds.completion_bound
    a_run_finished = threading.Event()
    waited: list[bool] = []

    def after_a_run(*args: object, **kwargs: object) -> object:
        waited.append(a_run_finished.wait(timeout=60))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    record = bench_module._Bench.record

    def recorded(self: object, *args: object) -> None:
        record(self, *args)  # type: ignore[arg-type]
        a_run_finished.set()

    monkeypatch.setattr(bench_bounds, "completion_bound", after_a_run)
    monkeypatch.setattr(bench_module._Bench, "record", recorded)
    out = tmp_path / "b"
    log = io.StringIO()
    run_bench(settings(trace), out, stream=log)
    assert waited == [True, True]  # both job sets' bounds began after a run finished
    assert log.getvalue().count("LP bound of seed") == 2
    assert "earlier rows" not in log.getvalue()  # no earlier bench: nothing to say
    found = sorted(rows(out), key=lambda r: (r["policy"], r["seed"], r["load"]))
    expected = sorted(rows(reference), key=lambda r: (r["policy"], r["seed"], r["load"]))
    for row, direct in zip(found, expected, strict=True):
        for column in (*bench_bounds.COLUMNS, "avg_jct_s"):
            assert row[column] == direct[column]
    assert "avg JCT / LP bound" in (out / "report.md").read_text()


def test_a_resumed_bench_reuses_the_cached_bounds(trace: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "b"
    run_bench(settings(trace, policies=("fifo",)), out, report=False)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the LP bound was computed again")

    monkeypatch.setattr(bench_bounds, "completion_bound", fail)
    run_bench(settings(trace, policies=("fifo", "srtf")), out, report=False)
    assert all(row["bound_lp_avg_jct_s"] for row in rows(out))


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


def test_the_command_line_switch(trace: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hetsched.cli import cli

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
