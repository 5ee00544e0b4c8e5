"""Output paths: checked before the work, written as whole sets, write errors in one line."""

from __future__ import annotations

import errno
import multiprocessing
import os
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.outputs import check_output_folder, check_plot_file, write_text
from hetsched.simulate import record as outcome
from tests.helpers import INSTANCES, ROOT

SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
REPLAY = ["replay", str(SAMPLE), "--format", "philly", "--cluster", "v100=4,k80=4",
          "--policy", "fifo"]


def _exit_code(argv: list[str]) -> int | str | None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return exited.value.code


def _no_work(*args: object, **kwargs: object) -> None:
    raise AssertionError("the work ran before the output path was checked")


def _unwritable(tmp_path: Path) -> list[Path]:
    """Output paths no one can write: under a file (any OS), in /proc (Linux)."""
    (tmp_path / "file").write_text("x")
    paths = [tmp_path / "file" / "out"]
    if Path("/proc/self").is_dir():
        paths.append(Path("/proc/nope"))
    return paths


def test_replay_refuses_an_unwritable_out_before_the_simulation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Before, --out /proc/nope ran the whole replay and then ended in "internal error:
    # FileNotFoundError ..." with exit code 1.
    from hetsched.simulate.simulator import Simulator

    monkeypatch.setattr(Simulator, "run", _no_work)
    for out in _unwritable(tmp_path):
        assert _exit_code([*REPLAY, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {out}: --out: ")
        assert err.count("\n") == 1
        assert "internal error" not in err
        assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no probe left behind


def test_a_full_disk_while_a_replay_writes_keeps_the_previous_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    main([*REPLAY, "--out", str(out)])
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    real = Path.write_text

    def full_disk(self: Path, *args: object, **kwargs: object) -> int:
        if self.name == "jobs.csv":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full_disk)
    assert _exit_code([*REPLAY, "--seed", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {out}: --out: cannot write the output folder: "
                   "No space left on device (expected free space on its disk)\n")
    # The folder holds the previous run's set, byte for byte, and nothing is left beside.
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_the_folder_check_tolerates_a_folder_moved_away_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another replay into the same --out may move the folder aside between two looks at
    # it: before, this raised "the output folder is a file" or FileNotFoundError.
    out = tmp_path / "r"
    out.mkdir()

    def moved_away(path: object) -> list[str]:
        out.rmdir()
        raise FileNotFoundError(errno.ENOENT, "moved", str(path))

    monkeypatch.setattr(outcome.os, "listdir", moved_away)
    check_output_folder(out, holds=outcome.FOLDER_FILES)  # no error: the write makes a new one


def _write_sets(out: str, tag: str, count: int) -> None:
    for index in range(count):
        outcome.write_folder(out, dict.fromkeys(outcome.OUTPUT_FILES, f"{tag}-{index}\n"))


@pytest.mark.slow
def test_concurrent_replays_into_one_folder_leave_one_whole_set(tmp_path: Path) -> None:
    out = tmp_path / "r"
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_sets, args=(str(out), tag, 150)) for tag in "ab"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=300)
    assert [writer.exitcode for writer in writers] == [0, 0]
    texts = {(out / name).read_text() for name in outcome.OUTPUT_FILES}
    assert texts in ({"a-149\n"}, {"b-149\n"})  # the last set written, whole
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_solve_checks_out_and_plot_before_solving(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import hetsched.cli.main

    monkeypatch.setattr(hetsched.cli.main, "solve", _no_work)
    tiny = str(INSTANCES / "tiny.json")
    cases = [(["--out", str(path / "x.json")], "--out") for path in _unwritable(tmp_path)]
    cases += [(["--plot", str(tmp_path / "chart.bmpx")], "unsupported plot format"),
              (["--plot", str(tmp_path / "chart")], "got 'no extension'"),
              (["--plot", str(tmp_path / "file" / "chart.png")], "--plot")]
    for args, piece in cases:
        assert _exit_code(["solve", tiny, *args]) == 2, args
        err = capsys.readouterr().err
        assert piece in err
        assert err.count("\n") == 1
        assert "internal error" not in err


def test_solve_writes_out_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plot = tmp_path / "r.json", tmp_path / "g.svg"
    out.write_text("an older result")
    main(["solve", str(INSTANCES / "tiny.json"), "--out", str(out), "--plot", str(plot)])
    assert '"schedule"' in out.read_text()
    assert plot.read_text().lstrip().startswith("<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.svg", "r.json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_solve_to_a_full_device_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # /dev/full answers every write with ENOSPC: a real full disk. Before: "internal
    # error: OSError ..." with exit code 1.
    assert _exit_code(["solve", str(INSTANCES / "tiny.json"), "--out", "/dev/full"]) == 2
    assert capsys.readouterr().err == ("error: /dev/full: --out: cannot write the output "
                                       "file: No space left on device (expected free space "
                                       "on its disk)\n")


def test_write_text_replaces_whole_files_and_keeps_devices(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text(link, "new", "--out")
    assert (target.read_text(), link.is_symlink()) == ("new", True)
    write_text(os.devnull, "ignored", "--out")
    assert Path(os.devnull).exists()
    assert not Path(os.devnull).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "link.json"]


def test_checks_name_the_problem(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match=r"f: out: the output folder is a file"):
        check_output_folder(tmp_path / "f")
    with pytest.raises(InputError, match=r"a parent of the output folder is not a folder "
                       r"\(got '.*f'"):
        check_output_folder(tmp_path / "f" / "g" / "h")
    check_output_folder(tmp_path / "new" / "deeper")  # made later, by the write
    assert not (tmp_path / "new").exists()
    # A folder replaced as a whole may hold only what a run writes into it.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    (tmp_path / "run" / "summary.json.tmp").write_text("")
    with pytest.raises(InputError, match=r"out: the output folder holds files that are not "
                       r"a run's \(got 'notes.txt'; expected a new folder, or one holding "
                       r"only summary.json, jobs.csv"):
        check_output_folder(tmp_path / "run", holds=("summary.json", "jobs.csv"))
    check_output_folder(tmp_path / "run")  # (any folder, when nothing replaces it whole)
    (tmp_path / "dir.png").mkdir()
    with pytest.raises(InputError, match=r"plot: the plot is a folder"):
        check_plot_file(tmp_path / "dir.png")


@pytest.mark.slow
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640)])
def test_files_written_whole_get_the_mode_the_umask_gives(tmp_path: Path, umask: int,
                                                          mode: int) -> None:
    # solve --out, bench.json and results.csv were 0600 whatever the
    # umask (mkstemp's mode), while a replay's files were 0644.
    previous = os.umask(umask)
    try:
        main(["solve", str(INSTANCES / "tiny.json"), "--out", str(tmp_path / "r.json")])
        main(["bench", "--trace", str(ROOT / "tests" / "data" / "traces" / "philly_small.csv"),
              "--format", "philly", "--cluster", "v100=4", "--policies", "fifo",
              "--workers", "1", "--no-lp-bound", "--out", str(tmp_path / "b")])
    finally:
        os.umask(previous)
    for path in (tmp_path / "r.json", tmp_path / "b" / "bench.json",
                 tmp_path / "b" / "results.csv", tmp_path / "b" / "report.md",
                 tmp_path / "b" / "runs" / "fifo-s0-l1" / "jobs.csv"):
        assert (path.name, oct(path.stat().st_mode & 0o777)) == (path.name, oct(mode))
