"""A bench's output folder: resuming from a torn results.csv, appends on new lines, one
bench at a time, unwritable folders refused before any run, a full disk in one line."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
from pathlib import Path

import pytest

from hetsched import replaying as replays
from hetsched.bench.report import write_report
from hetsched.bench.results import append_result, read_results
from hetsched.bench.runner import run_bench
from hetsched.bench.settings import BenchSettings
from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.outputs import locked_folder
from hetsched.core.records import Job
from hetsched.files.traces import write_native

CLUSTER = "v100=2,k80=2"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Six jobs of the built-in catalogue on 4 GPUs: a fifo run takes milliseconds."""
    kinds = ["image-cnn-small", "rnn-lm", "recommender"]
    jobs = [Job(f"j{i}", 40.0 * i, kinds[i % 3], 1 + (i % 2), 3000.0 + 1500 * (i % 3))
            for i in range(6)]
    path = tmp_path / "tiny.csv"
    write_native(jobs, path)
    return path


def settings(trace: Path, seeds: tuple[int, ...]) -> BenchSettings:
    return BenchSettings(trace=trace, trace_format="native", cluster=CLUSTER,
                         policies=("fifo",), seeds=seeds, workers=1)


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def test_resume_drops_a_torn_last_row_and_runs_it_again(trace: Path, tmp_path: Path) -> None:
    # Before, the torn row was trusted (its run skipped) and the next row was glued onto
    # it: one row of 2 x the columns, a run lost, absurd figures in the report.
    out = tmp_path / "b"
    run_bench(settings(trace, (0, 1)), out, report=False)
    results = out / "results.csv"
    whole = results.read_text(encoding="utf-8")
    results.write_text(whole[: len(whole) - 200], encoding="utf-8")  # seed 1's row torn
    stream = io.StringIO()
    outcome = run_bench(settings(trace, (0, 1, 2)), out, stream=stream, report=False)
    assert (outcome.ran, outcome.skipped) == (2, 1)  # seed 1 again, and seed 2
    assert f"warning: {results}: line 3: torn row (no line end)" in stream.getvalue()
    rows = _rows(results)
    assert all(len(row) == len(rows[0]) for row in rows)
    assert [(r["policy"], r["seed"]) for r in read_results(results)] == [
        ("fifo", "0"), ("fifo", "1"), ("fifo", "2")]
    for row in read_results(results):
        summary = json.loads((out / "runs" / f"fifo-s{row['seed']}-l1" / "summary.json")
                             .read_text())
        assert float(row["avg_jct_s"]) == summary["avg_jct_s"]
        assert 0 < float(row["utilization"]) <= 1
    kept = "".join(whole.splitlines(keepends=True)[:2])  # the header and seed 0's row
    assert results.read_text(encoding="utf-8").startswith(kept)


@pytest.mark.parametrize(("column", "value", "problem"), [
    ("utilization", "abc", "line 2.utilization: bad utilization"),
    ("seed", "-1", "line 2.seed: bad seed"),
    ("avg_jct_s", "nan", "line 2.avg_jct_s: bad avg_jct_s"),
    ("solver_versions", "{torn", "line 2.solver_versions: bad solver_versions"),
])
def test_resume_refuses_a_bad_row_before_the_last(trace: Path, tmp_path: Path, column: str,
                                                  value: str, problem: str) -> None:
    out = tmp_path / "b"
    run_bench(settings(trace, (0, 1)), out, report=False)
    results = out / "results.csv"
    rows = read_results(results)
    rows[0][column] = value
    with results.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    before = results.read_bytes()
    with pytest.raises(InputError, match=rf"results.csv: {problem} \(got '{value}"):
        run_bench(settings(trace, (0, 1, 2)), out, report=False)
    assert results.read_bytes() == before


@pytest.mark.parametrize("where", ["middle", "last"])
def test_one_run_in_two_rows_is_refused_naming_both(trace: Path, tmp_path: Path,
                                                    where: str) -> None:
    # A row copied twice was taken, and the report counted its run twice
    # (a mean over three rows of two runs). Refused wherever the copy stands, the file
    # left as it was.
    out = tmp_path / "b"
    run_bench(settings(trace, (0, 1)), out, report=False)
    results = out / "results.csv"
    header, first, second = results.read_text(encoding="utf-8").splitlines()
    lines = [header, first, first, second] if where == "middle" else [header, first, second,
                                                                      first]
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = results.read_bytes()
    twice = "2 and 3" if where == "middle" else "2 and 4"
    with pytest.raises(InputError, match=rf"results.csv: lines {twice}: the same run in two "
                       r"rows \(got 'policy fifo, seed 0, load 1'"):
        run_bench(settings(trace, (0, 1)), out, report=False)
    assert results.read_bytes() == before


def test_a_row_with_too_many_fields_in_the_middle_is_refused(trace: Path,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "b"
    run_bench(settings(trace, (0, 1)), out, report=False)
    results = out / "results.csv"
    header, first, second = results.read_text(encoding="utf-8").splitlines()
    results.write_text("\n".join([header, first + first, second]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: (not valid CSV|wrong number of fields)"):
        run_bench(settings(trace, (0, 1)), out, report=False)


def test_an_append_starts_on_a_new_line(tmp_path: Path) -> None:
    results = tmp_path / "results.csv"
    results.write_text("policy,seed,load,jobs\nfifo,0,1,3", encoding="utf-8")  # no line end
    append_result(results, {"policy": "fifo", "seed": "1", "load": "1", "jobs": "3"})
    assert results.read_text(encoding="utf-8") == \
        "policy,seed,load,jobs\nfifo,0,1,3\nfifo,1,1,3\n"


def test_a_second_bench_into_the_same_folder_is_refused(trace: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    out = tmp_path / "b"
    out.mkdir()
    monkeypatch.setattr(replays, "replay_rendered", _no_run)
    with locked_folder(out), pytest.raises(
            InputError, match=rf"{out}: out: another bench is writing into this folder "
            rf"\(process {os.getpid()}\)"):
        run_bench(settings(trace, (0,)), out, report=False)
    assert not (out / "results.csv").exists()


def _no_run(*args: object, **kwargs: object) -> dict[str, object]:
    raise AssertionError("a run started before the output folder was checked")


def test_an_unwritable_out_is_refused_before_any_run(
        trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(replays, "replay_rendered", _no_run)
    (tmp_path / "file").write_text("x")
    outs = [tmp_path / "file" / "b"] + ([Path("/proc/nope")] if Path("/proc/self").is_dir()
                                        else [])
    for out in outs:
        with pytest.raises(SystemExit) as exited:
            main(["bench", "--trace", str(trace), "--format", "native", "--cluster", CLUSTER,
                  "--policies", "fifo", "--workers", "1", "--out", str(out)])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {out}: --out: ")
        assert err.count("\n") == 1


@pytest.mark.slow
def test_a_full_disk_while_drawing_keeps_the_previous_report(
        trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "b"
    run_bench(settings(trace, (0,)), out)
    # No job has a deadline: no deadline chart, the report says why.
    assert not (out / "deadline_met.png").exists()
    assert "No deadline chart: no job has a deadline" in (out / "report.md").read_text()
    names = ["report.md", "jct_cdf_l1.png", "utilization_l1.png", "decision_times.png"]
    before = {name: (out / name).read_bytes() for name in names}
    from matplotlib.figure import Figure

    real = Figure.savefig
    saved: list[str] = []

    def full_disk(self: Figure, name: object, *args: object, **kwargs: object) -> None:
        saved.append(str(name))
        if len(saved) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(InputError, match=r"out: cannot write the report: No space left"):
        write_report(out)
    assert {name: (out / name).read_bytes() for name in names} == before
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".lock"]


def test_a_full_disk_while_appending_is_one_clear_error(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    results = tmp_path / "results.csv"
    results.write_text("policy,seed,load\nfifo,0,1\n", encoding="utf-8")

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("hetsched.bench.results.os.fsync", full_disk)
    with pytest.raises(InputError, match=rf"{results}: out: cannot write results.csv: "
                       "No space left on device"):
        append_result(results, {"policy": "fifo", "seed": "1", "load": "1"})


def test_every_policy_has_a_line_style_of_its_own() -> None:
    # 13 policies (the bench of docs/progress.md): matplotlib's cycle has 10 colours, so
    # three pairs of lines shared one; the 11th to 13th now take the first three colours
    # dashed. Styles follow the policies' order, so each plot of a report agrees.
    from hetsched.bench.report import policy_styles

    policies = [f"p{i}" for i in range(13)]
    styles = policy_styles(policies)
    assert len(set(styles.values())) == 13
    assert styles["p10"] == (styles["p0"][0], "dashed")
    assert styles["p0"][1] == "solid"
    assert policy_styles(policies[:5]) == {p: styles[p] for p in policies[:5]}
