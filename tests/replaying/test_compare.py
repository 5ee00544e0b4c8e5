"""``hetsched compare``: replays side by side, JCT CDFs on one axis, clear errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hetsched.bench.compare import jct_cdf, read_runs
from hetsched.cli.main import main
from hetsched.replaying import run_replay
from tests.helpers import ROOT, exits_2

SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    for policy in ("fifo", "srtf"):
        run_replay(SAMPLE, "philly", "v100=4,k80=4", policy, out=root / policy,
                   show_progress=False)
    return root / "fifo", root / "srtf"


def test_compare_prints_the_metrics_side_by_side(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo, srtf = runs
    main(["compare", str(fifo), str(srtf), "--csv", str(tmp_path / "m.csv"),
          "--plot", str(tmp_path / "cdf.png")])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["fifo", "srtf"]
    summaries = [json.loads((run / "summary.json").read_text()) for run in runs]
    rows = {line.split("  ")[0]: line for line in out}
    assert "policy" in rows
    assert rows["policy"].split()[1:] == ["fifo", "srtf"]
    assert rows["jobs completed"].split()[2:] == ["3", "of", "3", "3", "of", "3"]
    ratio = summaries[1]["avg_jct_s"] / summaries[0]["avg_jct_s"]
    assert rows["avg JCT / fifo's"].split()[-2:] == ["1.000", f"{ratio:.3f}"]
    with (tmp_path / "m.csv").open() as handle:
        written = list(csv.DictReader(handle))
    assert [row["run"] for row in written] == ["fifo", "srtf"]
    assert [float(row["avg_jct_s"]) for row in written] == [s["avg_jct_s"] for s in summaries]
    assert (tmp_path / "cdf.png").read_bytes()[:4] == b"\x89PNG"


def test_the_cdfs_share_one_axis(runs: tuple[Path, Path]) -> None:
    ax = jct_cdf(read_runs(runs))
    assert len(ax.lines) == 2
    for line, run in zip(ax.lines, read_runs(runs), strict=True):
        assert list(line.get_ydata())[-1] == 1.0  # every job finished
        assert len(line.get_xdata()) == run.summary.completed == 3
    assert ax.get_xscale() == "log"


def test_runs_of_the_same_name_are_told_apart(runs: tuple[Path, Path], tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "run").symlink_to(runs[0])
    labels = [r.label for r in read_runs([tmp_path / "a" / "run", tmp_path / "b" / "run"])]
    assert labels == ["a/run", "b/run"]


def test_a_folder_that_is_not_a_replay_exits_2(runs: tuple[Path, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["compare", str(runs[0]), str(tmp_path / "missing")], capsys)
    assert f"{tmp_path / 'missing'}: RUN_DIR: no such folder" in err
    (tmp_path / "empty").mkdir()
    err = exits_2(["compare", str(tmp_path / "empty")], capsys)
    assert "not a replay folder: no summary.json" in err
    assert "expected a folder written by hetsched replay --out" in err
    bench = tmp_path / "bench"
    (bench / "runs").mkdir(parents=True)
    (bench / "results.csv").write_text("policy\n")
    err = exits_2(["compare", str(bench)], capsys)
    assert f"this is a bench: compare its runs, e.g. {bench}/runs/*" in err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "jobs.csv").write_text("job,jct\n")
    (broken / "summary.json").write_text(json.dumps({"jobs": 3}))
    err = exits_2(["compare", str(broken)], capsys)
    assert "summary.json lacks 'completed'" in err
    (broken / "summary.json").write_text("{not json")
    err = exits_2(["compare", str(broken)], capsys)
    assert "unreadable summary.json" in err
    assert err.count("\n") == 1


def test_compare_warns_when_the_runs_are_unlike(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Runs of different traces or job counts, or an interrupted run
    # beside a finished one, were set side by side without a word.
    fifo, _ = runs
    other = tmp_path / "other"
    run_replay(ROOT / "tests" / "data" / "traces" / "helios_small.csv", "helios",
               "v100=4,k80=4", "fifo", out=other, show_progress=False)
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    for name in ("summary.json", "jobs.csv"):
        (stopped / name).write_text((fifo / name).read_text())
    summary = json.loads((stopped / "summary.json").read_text())
    summary.update(interrupted=True, completed=1)
    (stopped / "summary.json").write_text(json.dumps(summary))
    main(["compare", str(fifo), str(other), str(stopped)])
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert warnings[0].startswith("warning: the runs replayed different traces: fifo ")
    assert any(w.startswith("warning: the runs replayed different job counts: fifo 3, "
                            "other ") for w in warnings)
    assert warnings[-1] == ("warning: stopped was stopped before every job finished (1 of 3): "
                            "its metrics cover the finished jobs only")
    notes = [line for line in captured.out.splitlines() if line.startswith("note: ")]
    assert [note.removeprefix("note: ") for note in notes] == [
        w.removeprefix("warning: ") for w in warnings]


def test_compare_shows_quotas_when_a_run_has_them(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Without tenants, no quota rows (test above); a run with them adds its violations,
    # the starts the quota keeper dropped and the jobs it took back, "-" for the others.
    table = tmp_path / "tenants.json"  # the Philly sample's virtual clusters, 2 V100s each
    table.write_text(json.dumps({"tenants": [
        {"name": "c1", "quotas": {"v100": {"nominal": 2}}},
        {"name": "c2", "quotas": {"v100": {"nominal": 2}}}]}))
    main(["replay", str(SAMPLE), "--format", "philly", "--cluster", "v100=4,k80=4",
          "--policy", "srtf", "--tenants", str(table), "--out", str(tmp_path / "kept")])
    capsys.readouterr()
    main(["compare", str(runs[0]), str(tmp_path / "kept")])
    rows = {line.split("  ")[0]: line for line in capsys.readouterr().out.splitlines()}
    summary = json.loads((tmp_path / "kept" / "summary.json").read_text())
    assert rows["quota violations"].split()[2:] == [
        "0.0", "GPU-s", f"{summary['quota_violation_gpu_s']:,.1f}", "GPU-s"]
    assert rows["quota dropped starts"].split()[3:] == [
        "-", f"{summary['quota_dropped_starts']:,}"]
    assert rows["quota reclaims"].split()[2:] == ["-", f"{summary['quota_reclaims']:,}"]
    main(["compare", *map(str, runs)])
    assert "quota" not in capsys.readouterr().out
