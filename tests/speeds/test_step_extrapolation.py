"""The step model's extrapolation on Pollux's real measurements (fitted on one node,
predicting every multi-node row; docs/elastic.md), and ``hetsched fit`` on step profiles.
The figures are the ones measured (benchmarks/elastic.py); the data's tests skip when the
shared data folder is absent."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hetsched.cli.main import cli
from hetsched.speeds.step_extrapolation import Extrapolation, extrapolate
from hetsched.speeds.step_profiles import read_pollux_profile
from tests.helpers import SHARED_DATA, exits_2
from tests.speeds.test_step_model import ONE_NODE, SPREAD, cluster_jobs, rows_of

TRACES = SHARED_DATA / "pollux" / "traces"
#: Median and p90 APE (%) measured per model, network calibrated on the other models.
MEASURED = {"bert": (29.9, 35.7), "cifar10": (13.3, 26.6), "deepspeech2": (44.1, 83.9),
            "imagenet": (15.5, 34.0), "ncf": (20.7, 38.6), "yolov3": (9.1, 24.4)}


@pytest.fixture(scope="module")
def calibrated() -> Extrapolation:
    if not TRACES.is_dir():
        pytest.skip(f"real data folder {TRACES} is absent (it sits beside the project in CI "
                    "and on developer machines)")
    return extrapolate(read_pollux_profile(TRACES))


def test_extrapolation_from_one_node_on_pollux_measurements(calibrated: Extrapolation) -> None:
    overall = calibrated.error()
    # 6,884 rows on 2-16 nodes: 5,323 multi-node placement rows, 1,561 scalability rows
    assert overall.rows == 6884
    # short of the target (median 8 %, p90 20 %): one node does not tell the network
    assert overall.median_ape == pytest.approx(18.9, abs=0.2)
    assert overall.p90_ape == pytest.approx(42.2, abs=0.3)
    for job_type, (median, p90) in MEASURED.items():
        error = calibrated.error(job_type)
        assert (error.median_ape, error.p90_ape) == (pytest.approx(median, abs=0.3),
                                                     pytest.approx(p90, abs=0.5)), job_type
    assert len(calibrated.failures()) == pytest.approx(3284, abs=30)
    # why: each model's own cross-node ratio against the one calibrated on the others
    assert calibrated.own_ratio["deepspeech2"] == pytest.approx(1.18, abs=0.02)
    assert calibrated.priors["deepspeech2"].cross_ratio == pytest.approx(2.06, abs=0.02)
    assert calibrated.own_ratio["imagenet"] == pytest.approx(2.78, abs=0.03)
    worst = calibrated.failures()[0]
    assert worst.row.job_type == "deepspeech2"
    assert worst.reason.startswith("sync over-predicted")


def test_pollux_rule_extrapolates_worse(calibrated: Extrapolation) -> None:
    rule = extrapolate(read_pollux_profile(TRACES), "pollux-rule")
    assert rule.error().rows == calibrated.error().rows
    assert rule.error().median_ape == pytest.approx(21.7, abs=0.2)
    assert rule.error().p90_ape == pytest.approx(48.9, abs=0.3)


def test_fit_prints_the_extrapolation_of_pollux_folder(
        calibrated: Extrapolation, tmp_path: Path) -> None:
    output = tmp_path / "steps.json"
    outcome = CliRunner().invoke(cli, ["fit", str(TRACES), "--report", "-o", str(output)])
    assert outcome.exit_code == 0, outcome.output
    out = outcome.output
    assert "6 step models from 7103 rows (across nodes: 6 measured, 0 calibrated, " \
        "0 pollux-rule)" in out
    assert "predicting 6884 rows on several nodes of 6 job types" in out
    assert re.search(r"^median APE: 18\.9%$", out, re.MULTILINE)
    assert re.search(r"^p90 APE: 42\.[0-9]%$", out, re.MULTILINE)
    assert re.search(r"^  deepspeech2: 44\.[0-9]% / 8[0-9]\.[0-9]%, ", out, re.MULTILINE)
    assert "Pollux's rule instead: median APE 21.7%" in out
    doc = json.loads(output.read_text())
    assert [m["job_type"] for m in doc["models"]] == sorted(MEASURED)
    assert doc["priors"]["t4"]["transfer_error"]["rows"] == 6884


def test_fit_of_a_tidy_step_profile_without_output(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    lines = ["job_type,gpu_type,num_gpus,placement,local_batch_size,step_time,sync_time,"
             "node_gpus"]
    for job in cluster_jobs():
        for row in rows_of(job, ONE_NODE + SPREAD):
            lines.append(f"{row.job_type},t4,{row.num_gpus},"
                         f"{'packed' if row.num_nodes == 1 else 'spread'},{row.local_bsz:g},"
                         f"{row.step_time!r},{row.sync_time!r},"
                         f"{'+'.join(map(str, row.placement))}")
    path.write_text("\n".join(lines) + "\n")
    outcome = CliRunner().invoke(cli, ["fit", str(path), "--report"])
    assert outcome.exit_code == 0, outcome.output
    out = outcome.output
    assert "3 step models from 225 rows (across nodes: 3 measured" in out
    assert "median APE: 0.0%" in out
    assert "failing rows: 0 of 165 (none)" in out


def test_fit_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "p.csv"
    profile.write_text("job_type,gpu_type,num_gpus,placement,throughput\nnet,t4,1,packed,2\n")
    err = exits_2(["fit", str(profile)], capsys)  # a throughput profile still needs -o
    assert "Missing option '-o' / '--output'" in err
    folder = tmp_path / "traces"
    (folder / "toy").mkdir(parents=True)
    (folder / "toy" / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n1,4,0.5,0.6\n")
    err = exits_2(["fit", str(folder), "--plot", str(tmp_path / "x.png")], capsys)
    assert "--plot draws the leave-one-out of throughput profiles" in err
    err = exits_2(["fit", str(folder)], capsys)
    assert "toy/placements.csv: line 2.sync_time: sync_time not below step_time" in err
