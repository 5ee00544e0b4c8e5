"""The knowledge setting from the outside (issue 64): ``hetsched replay --knowledge``
and a sweep spec's ``knowledge`` key (top-level or a trace's own), recorded in
summary.json and bench.json; a bad value is one line naming the option or the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.bench.results import read_results
from hetsched.bench.spec import load_sweep
from hetsched.cli.main import main
from hetsched.core.errors import InputError
from tests.helpers import ROOT, engine_trace, exits_2

SAMPLES = ROOT / "tests" / "data" / "traces"
#: three Philly jobs on 4 V100s + 4 K80s
PHILLY = ["replay", str(SAMPLES / "philly_small.csv"), "--format", "philly", "--cluster",
          "v100=4,k80=4"]


def test_a_bad_knowledge_setting_exits_2_in_one_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    err = exits_2([*PHILLY, "--knowledge", "bogus", "--out", str(tmp_path / "r")], capsys)
    assert err == ("error: Invalid value for '--knowledge': 'bogus' is not one of 'truth', "
                   "'estimate', 'none' (see hetsched replay --help)\n")
    assert not (tmp_path / "r").exists()


def test_replay_records_the_setting_and_the_estimates(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    main([*PHILLY, "--knowledge", "estimate", "--out", str(tmp_path / "r")])
    capsys.readouterr()
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["knowledge"] == "estimate"
    estimates = summary["estimates"]
    assert sorted(estimates) == ["estimator", "jobs", "levels", "median_abs_error",
                                 "median_ratio", "over", "p90_abs_error", "setting", "under"]
    assert (estimates["setting"], estimates["estimator"], estimates["jobs"]) == \
        ("estimate", "history", 3)
    assert sum(estimates["levels"].values()) == 3
    assert estimates["levels"]["prior"] >= 1  # the first job had no history
    assert estimates["under"] + estimates["over"] <= 1
    assert 0 <= estimates["median_abs_error"] <= estimates["p90_abs_error"]
    assert 'knowledge = "estimate"\n' in (tmp_path / "r" / "run.toml").read_text()
    assert summary["completed"] == 3


def sweep(knowledge: str) -> str:
    """A spec of one trace (a/trace.csv) run twice: as "a" under the top-level setting
    ``none``, and as "b" under its own ``knowledge``."""
    return ('seeds = [0]\nknowledge = "none"\nlp_bound = false\npolicies = ["fifo", "qssf"]\n'
            '[[traces]]\npath = "a/trace.csv"\nformat = "native"\ncluster = "v100=4,k80=4"\n'
            'name = "a"\n[[traces]]\npath = "a/trace.csv"\nformat = "native"\n'
            f'cluster = "v100=4,k80=4"\nname = "b"\nknowledge = "{knowledge}"\n')


def test_a_sweep_runs_and_records_its_knowledge(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    engine_trace(tmp_path / "a", jobs=6)
    (tmp_path / "sweep.toml").write_text(sweep("estimate"))
    monkeypatch.chdir(tmp_path)
    (a, first), (b, second) = load_sweep(tmp_path / "sweep.toml").benches
    assert (a, first.replay.knowledge, b, second.replay.knowledge) == \
        ("a", "none", "b", "estimate")
    main(["bench", "--spec", "sweep.toml", "--out", "out"])
    printed = capsys.readouterr().out
    for name, knowledge in (("a", "none"), ("b", "estimate")):
        assert f"{name}: 2 runs done, 0 already in results.csv, 0 failed" in printed
        bench = json.loads((tmp_path / "out" / name / "bench.json").read_text())
        assert bench["knowledge"] == knowledge
        rows = read_results(tmp_path / "out" / name / "results.csv")
        assert {(r["policy"], r["knowledge"], r["completed"]) for r in rows} == \
            {("fifo", knowledge, "6"), ("qssf", knowledge, "6")}
        for policy in ("fifo", "qssf"):
            summary = json.loads((tmp_path / "out" / name / "runs" / f"{policy}-s0-l1" /
                                  "summary.json").read_text())
            assert summary["knowledge"] == knowledge
            assert summary["estimates"]["setting"] == knowledge
            assert summary["estimates"]["jobs"] == 6
    # fifo reads no durations: the same runs under either setting
    assert (tmp_path / "out" / "a" / "runs" / "fifo-s0-l1" / "jobs.csv").read_bytes() == \
        (tmp_path / "out" / "b" / "runs" / "fifo-s0-l1" / "jobs.csv").read_bytes()


def test_a_bad_knowledge_in_a_sweep_names_the_key(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    engine_trace(tmp_path / "a", jobs=4)
    path = tmp_path / "sweep.toml"
    path.write_text(sweep("maybe"))
    with pytest.raises(InputError) as bad:
        load_sweep(path)
    assert str(bad.value) == (f"{path}: $.traces[1].knowledge: bad value (got 'maybe'; "
                              "expected one of truth, estimate, none)")
    path.write_text(sweep("none").replace('knowledge = "none"\nlp', 'knowledge = 1\nlp'))
    err = exits_2(["bench", "--spec", str(path), "--out", str(tmp_path / "out")], capsys)
    assert err.count("\n") == 1
    assert "$.knowledge: bad value (got 1; expected one of truth, estimate, none)" in err
    assert not (tmp_path / "out").exists()
