"""Co-location pairs measured on their own (hetsched.speeds.pairs, ``--pairs``): both
directions of each row, over the profile's pairs, the default only where none is
measured; a replay of two jobs sharing an H100 at the measured factors, past the
checker; bad files name the line, the column and the value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.files.traces import write_native
from hetsched.speeds.pairs import COLUMNS, read_pairs_csv
from tests.helpers import exits_2

HEADER = ",".join(COLUMNS)


def test_a_row_gives_both_directions(tmp_path: Path) -> None:
    # a beside b: 6 of its 10 steps/s alone (0.6); b beside a: 9 of 12 (0.75). A pair
    # measured faster than alone (noise) is held at 1: sharing never speeds a job up.
    path = tmp_path / "pairs.csv"
    path.write_text(f"{HEADER}\na,b,h100,6,9,10,12\nc,c,h100,11,11,10,10\n")
    assert read_pairs_csv(path) == {("h100", "a", "b"): 0.6, ("h100", "b", "a"): 0.75,
                                    ("h100", "c", "c"): 1.0}


@pytest.mark.parametrize(("body", "pieces"), [
    ("a,b,h100,6,9,0,12", ["line 2, alone", "'0'"]),
    ("a,b,h100,6,x,10,12", ["line 2, other_throughput", "'x'"]),
    (",b,h100,6,9,10,12", ["line 2, job_type", "empty cell"]),
    ("", ["no pairs"]),
])
def test_a_bad_pairs_file_names_the_line_and_column(tmp_path: Path, body: str,
                                                    pieces: list[str]) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text(f"{HEADER}\n{body}\n" if body else f"{HEADER}\n")
    with pytest.raises(InputError) as caught:
        read_pairs_csv(path)
    for piece in [str(path), *pieces]:
        assert piece in str(caught.value)
    path.write_text("job_type,gpu_type\na,h100\n")
    with pytest.raises(InputError, match="missing columns"):
        read_pairs_csv(path)


def test_the_h100_pairs_read_as_measured(shared_data: Path) -> None:
    # The README's example: an LM at batch 10 beside a Transformer at batch 32 keeps
    # 177.5215 / 217.373 = 0.817 of its speed alone, the Transformer 21.7446 / 26.6508 =
    # 0.816; two ResNet-50 at batch 64 keep 0.45 each.
    pairs = read_pairs_csv(shared_data / "h100" / "h100_pairs.csv")
    assert len(pairs) == 100  # 55 rows: 45 pairs of two types (both ways), 10 with itself
    lm, tf = "LM (batch size 10)", "Transformer (batch size 32)"
    assert pairs[("h100", lm, tf)] == pytest.approx(177.5215 / 217.373)
    assert pairs[("h100", tf, lm)] == pytest.approx(21.7446 / 26.6508)
    resnet = "ResNet-50 (batch size 64)"
    assert pairs[("h100", resnet, resnet)] == pytest.approx(0.45, abs=0.01)


def test_a_replay_shares_an_h100_at_the_measured_factors(shared_data: Path,
                                                         tmp_path: Path) -> None:
    # One H100, two half-GPU jobs from 0: the LM (194.0292 steps/s alone on the H100 of
    # h100_throughputs.csv) beside the Transformer (24.6056 alone) runs at 0.8167 of its
    # speed, the Transformer at 0.8159. The LM's 15,850 steps take 15,850 / (194.0292 x
    # 0.8167) = 100.0 s; without --pairs both run at the default factor, 0.9.
    lm, tf = "LM (batch size 10)", "Transformer (batch size 32)"
    write_native([Job("lm", 0.0, lm, 1, 15850.0, gpu_share=0.5),
                  Job("tf", 0.0, tf, 1, 5000.0, gpu_share=0.5)], tmp_path / "t.csv")
    base = ["replay", str(tmp_path / "t.csv"), "--format", "native", "--cluster", "h100=1",
            "--policy", "fifo", "--throughput",
            str(shared_data / "h100" / "h100_throughputs.csv")]
    # (a replay runs the independent checker, at the same factors: a violation fails it)
    main([*base, "--pairs", str(shared_data / "h100" / "h100_pairs.csv"),
          "--out", str(tmp_path / "measured")])
    main([*base, "--out", str(tmp_path / "default")])
    finish = {}
    for name in ("measured", "default"):
        rows = (tmp_path / name / "jobs.csv").read_text().splitlines()
        header = rows[0].split(",")
        for row in rows[1:]:
            cells = dict(zip(header, row.split(","), strict=False))
            finish[(name, cells["job"])] = float(cells["finish"])
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["completed"] == 2
    assert finish[("measured", "lm")] == pytest.approx(
        15850 / (194.0292 * 177.5215 / 217.373), rel=1e-6)
    assert finish[("default", "lm")] == pytest.approx(15850 / (194.0292 * 0.9), rel=1e-6)


def test_a_missing_pairs_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    write_native([Job("a", 0.0, "image-cnn-small", 1, 100.0)], tmp_path / "t.csv")
    err = exits_2(["replay", str(tmp_path / "t.csv"), "--format", "native", "--cluster",
                   "v100=1", "--policy", "fifo", "--pairs", str(tmp_path / "none.csv"),
                   "--out", str(tmp_path / "o")], capsys)
    assert "none.csv" in err
    assert "cannot read the pairs file" in err


def test_a_bench_runs_with_the_pairs_of_its_spec(shared_data: Path, tmp_path: Path) -> None:
    # The replay above as a bench: the spec's pairs reach every run (the LM finishes at
    # the measured factor's time, not the default's), and a missing file is refused
    # before anything runs.
    from hetsched.bench.spec import load_sweep

    lm, tf = "LM (batch size 10)", "Transformer (batch size 32)"
    write_native([Job("lm", 0.0, lm, 1, 15850.0, gpu_share=0.5),
                  Job("tf", 0.0, tf, 1, 5000.0, gpu_share=0.5)], tmp_path / "t.csv")
    spec = tmp_path / "sweep.toml"
    text = (f'pairs = "{shared_data / "h100" / "h100_pairs.csv"}"\nlp_bound = false\n'
            f'[[traces]]\npath = "t.csv"\nformat = "native"\ncluster = "h100=1"\n'
            f'throughput = "{shared_data / "h100" / "h100_throughputs.csv"}"\nname = "h"\n'
            '[[policies]]\nname = "fifo"\n')
    spec.write_text(text)
    ((_, settings),) = load_sweep(spec).benches
    assert settings.pairs == (shared_data / "h100" / "h100_pairs.csv").resolve()
    main(["bench", "--spec", str(spec), "--out", str(tmp_path / "out")])
    rows = (tmp_path / "out" / "h" / "runs" / "fifo-s0-l1" / "jobs.csv").read_text()
    header, *lines = rows.splitlines()
    cells = {line.split(",")[0]: dict(zip(header.split(","), line.split(","), strict=False))
             for line in lines}
    assert float(cells["lm"]["finish"]) == pytest.approx(
        15850 / (194.0292 * 177.5215 / 217.373), rel=1e-6)
    spec.write_text(text.replace("h100_pairs.csv", "none.csv"))
    with pytest.raises(InputError, match="no such pairs file"):
        load_sweep(spec)
