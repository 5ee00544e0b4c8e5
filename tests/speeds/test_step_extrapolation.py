"""The step model's extrapolation on Pollux's real measurements (fitted on one node,
predicting every multi-node row; docs/elastic.md), and ``hetsched fit`` on step profiles.
The figures are the ones measured (benchmarks/elastic.py); the data's tests skip when the
shared data folder is absent."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hetsched.cli.main import cli
from hetsched.core.errors import InputError
from hetsched.speeds.step_extrapolation import Extrapolation, extrapolate
from hetsched.speeds.step_fit import fit_step_model
from hetsched.speeds.step_prior import NetworkPrior
from hetsched.speeds.step_profiles import read_pollux_profile, read_step_profile_csv
from hetsched.speeds.steps import StepModel, StepRow
from tests.helpers import SHARED_DATA, exits_2
from tests.speeds.test_step_model import (
    BATCHES,
    ONE_NODE,
    SIZES,
    SPREAD,
    cluster_jobs,
    rows_of,
    sized_jobs,
)

TRACES = SHARED_DATA / "pollux" / "traces"
#: Median and p90 APE (%) measured per model, network calibrated on the other models
#: per model parameter (the models' sizes from POLLUX_MODEL_PARAMETERS).
MEASURED = {"bert": (4.0, 14.3), "cifar10": (8.2, 18.0), "deepspeech2": (6.4, 16.9),
            "imagenet": (5.9, 16.8), "ncf": (9.7, 24.5), "yolov3": (10.4, 18.0)}
#: The same as a ratio of the within-node sync (the rows' sizes left out).
MEASURED_AS_RATIO = {"bert": (29.9, 35.7), "cifar10": (13.3, 26.6),
                     "deepspeech2": (44.1, 83.9), "imagenet": (15.5, 34.0),
                     "ncf": (20.7, 38.6), "yolov3": (9.1, 24.4)}


def _pollux_rows() -> tuple[StepRow, ...]:
    if not TRACES.is_dir():
        pytest.skip(f"real data folder {TRACES} is absent (it sits beside the project in CI "
                    "and on developer machines)")
    return read_pollux_profile(TRACES)


@pytest.fixture(scope="module")
def calibrated() -> Extrapolation:
    return extrapolate(_pollux_rows())


def test_extrapolation_from_one_node_on_pollux_measurements(calibrated: Extrapolation) -> None:
    overall = calibrated.error()
    # 6,884 rows on 2-16 nodes: 5,323 multi-node placement rows, 1,561 scalability rows
    assert overall.rows == 6884
    # the target: median <= 8 %, p90 <= 20 %
    assert overall.median_ape == pytest.approx(7.6, abs=0.2)
    assert overall.p90_ape == pytest.approx(19.4, abs=0.3)
    for job_type, (median, p90) in MEASURED.items():
        error = calibrated.error(job_type)
        assert (error.median_ape, error.p90_ape) == (pytest.approx(median, abs=0.3),
                                                     pytest.approx(p90, abs=0.5)), job_type
    assert len(calibrated.failures()) == pytest.approx(638, abs=30)
    # each leave-one-out prior, calibrated on five models, finds the same network: 8.2-8.7
    # ns per parameter and 0.66-0.79 of the within-node sync
    for job_type, prior in calibrated.priors.items():
        assert prior.sized, job_type
        assert 8.1e-9 < prior.seconds_per_parameter < 8.8e-9, job_type
        assert 0.65 < prior.node_sync_weight < 0.8, job_type
        assert prior.overlap in (2.0, 2.3), job_type
    predicted, own = calibrated.network_base["deepspeech2"]
    assert (predicted, own) == (pytest.approx(0.701, abs=0.005), pytest.approx(0.617, abs=0.005))
    # the ceiling, each model's own multi-node sync base: what no prior of it could beat
    ceiling = calibrated.ceiling_error()
    assert ceiling is not None
    assert (ceiling.median_ape, ceiling.p90_ape) == (pytest.approx(6.7, abs=0.2),
                                                     pytest.approx(17.8, abs=0.3))
    worst = calibrated.failures()[0]
    assert (worst.row.job_type, worst.row.placement) == ("bert", (4,) * 16)
    assert worst.reason.startswith("sync over-predicted")


def test_the_network_as_a_ratio_extrapolates_worse() -> None:
    """The rows' sizes left out: the network base as a ratio of the within-node sync."""
    rows = [dataclasses.replace(row, model_parameters=None) for row in _pollux_rows()]
    ratio = extrapolate(rows)
    assert not any(prior.sized for prior in ratio.priors.values())
    assert ratio.error().median_ape == pytest.approx(18.9, abs=0.2)
    assert ratio.error().p90_ape == pytest.approx(42.2, abs=0.3)
    for job_type, (median, p90) in MEASURED_AS_RATIO.items():
        error = ratio.error(job_type)
        assert (error.median_ape, error.p90_ape) == (pytest.approx(median, abs=0.3),
                                                     pytest.approx(p90, abs=0.5)), job_type
    assert len(ratio.failures()) == pytest.approx(3284, abs=30)
    # why: each model's own cross-node ratio against the one calibrated on the others
    assert ratio.own_ratio["deepspeech2"] == pytest.approx(1.18, abs=0.02)
    assert ratio.priors["deepspeech2"].cross_ratio == pytest.approx(2.06, abs=0.02)
    assert ratio.own_ratio["imagenet"] == pytest.approx(2.78, abs=0.03)
    worst = ratio.failures()[0]
    assert worst.row.job_type == "deepspeech2"
    assert worst.reason.startswith("sync over-predicted")


def test_pollux_rule_extrapolates_worse(calibrated: Extrapolation) -> None:
    rule = extrapolate(_pollux_rows(), "pollux-rule")
    assert rule.ceiling_error() is None
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
    assert "network across nodes: calibrated on the other job types (leave one job type " \
        "out), per model parameter where stated" in out
    assert re.search(r"^median APE: 7\.[4-8]%$", out, re.MULTILINE)
    assert re.search(r"^p90 APE: 19\.[0-9]%$", out, re.MULTILINE)
    assert re.search(r"^ceiling \(each job type's own multi-node sync base, fitted on the "
                     r"rows predicted\): median APE 6\.[0-9]%, p90 APE 1[78]\.[0-9]%$", out,
                     re.MULTILINE)
    assert re.search(r"^  deepspeech2: 6\.[0-9]% / 1[67]\.[0-9]%, [0-9]+ of 924 failing, "
                     r"0\.70[0-9] s / 0\.61[0-9] s$", out, re.MULTILINE)
    assert "the network as a ratio of the within-node sync instead (no model parameters): " \
        "median APE 18.9%, p90 APE 42.2%" in out
    assert "Pollux's rule instead: median APE 21.7%" in out
    doc = json.loads(output.read_text())
    assert [m["job_type"] for m in doc["models"]] == sorted(MEASURED)
    assert doc["priors"]["t4"]["transfer_error"]["rows"] == 6884
    assert doc["priors"]["t4"]["seconds_per_parameter"] > 0


def _tidy_profile(path: Path, jobs: list[StepModel], sizes: dict[str, str] | None = None
                  ) -> Path:
    """The rows of ``jobs`` on one node and spread as a tidy step profile, with a
    ``model_parameters`` column of ``sizes`` if given."""
    lines = ["job_type,gpu_type,num_gpus,placement,local_batch_size,step_time,sync_time,"
             "node_gpus" + (",model_parameters" if sizes is not None else "")]
    for job in jobs:
        for row in rows_of(job, ONE_NODE + SPREAD):
            lines.append(f"{row.job_type},t4,{row.num_gpus},"
                         f"{'packed' if row.num_nodes == 1 else 'spread'},{row.local_bsz:g},"
                         f"{row.step_time!r},{row.sync_time!r},"
                         f"{'+'.join(map(str, row.placement))}"
                         + (f",{sizes[row.job_type]}" if sizes is not None else ""))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_of_a_tidy_step_profile_without_output(tmp_path: Path) -> None:
    path = _tidy_profile(tmp_path / "steps.csv", cluster_jobs())
    outcome = CliRunner().invoke(cli, ["fit", str(path), "--report"])
    assert outcome.exit_code == 0, outcome.output
    out = outcome.output
    assert "3 step models from 225 rows (across nodes: 3 measured" in out
    assert "median APE: 0.0%" in out
    assert "failing rows: 0 of 165 (none)" in out


def _sized_profile(path: Path, sizes: dict[str, str]) -> Path:
    return _tidy_profile(path, [job for job, _ in sized_jobs()], sizes)


def test_fit_of_a_tidy_step_profile_stating_model_parameters(tmp_path: Path) -> None:
    # the synthetic cluster whose network is 1 ns per parameter + 0.6 x the within-node
    # sync: each job type predicted exactly from the other two, not as a ratio
    path = _sized_profile(tmp_path / "steps.csv", {k: f"{v:.0f}" for k, v in SIZES.items()})
    outcome = CliRunner().invoke(cli, ["fit", str(path), "--report"])
    assert outcome.exit_code == 0, outcome.output
    out = outcome.output
    assert "per model parameter where stated" in out
    assert re.search(r"^median APE: 0\.0%$", out, re.MULTILINE)
    assert "failing rows: 0 of 165 (none)" in out
    ratio = re.search(r"^the network as a ratio of the within-node sync instead \(no model "
                      r"parameters\): median APE ([0-9.]+)%", out, re.MULTILINE)
    assert ratio is not None
    assert float(ratio.group(1)) > 5.0
    # a blank cell states nothing: c then takes the cross ratio
    rows = read_step_profile_csv(_sized_profile(tmp_path / "blank.csv",
                                                {"a": "20e6", "b": "150e6", "c": ""}))
    assert {row.job_type: row.model_parameters for row in rows} == {
        "a": 20e6, "b": 150e6, "c": None}


def test_bad_model_parameters_name_file_line_and_value(tmp_path: Path) -> None:
    path = _sized_profile(tmp_path / "steps.csv", {"a": "20e6", "b": "-3", "c": "5e7"})
    with pytest.raises(InputError) as caught:
        read_step_profile_csv(path)
    line = 2 + len(ONE_NODE + SPREAD) * len(BATCHES)  # b's first row
    assert str(caught.value) == (f"{path}: line {line}.model_parameters: bad "
                                 "model_parameters (got '-3'; expected the job type's "
                                 "trainable parameters, >= 1)")
    text = path.read_text().splitlines()
    text[2] = text[2].replace(",20e6", ",21e6")
    path.write_text("\n".join(text).replace(",-3", ",150e6") + "\n")
    with pytest.raises(InputError, match=r"line 3\.model_parameters: model_parameters "
                       r"differs within a job type \(got 21000000\.0; expected 2e\+07, as "
                       r"on line 2 for 'a'\)"):
        read_step_profile_csv(path)
    with pytest.raises(InputError, match="rows of one job type state different "
                       "model_parameters"):
        fit_step_model([StepRow("a", "t4", (1,), 4, 0.5, 0.01, model_parameters=1e6),
                        StepRow("a", "t4", (2,), 4, 0.6, 0.1, model_parameters=2e6)])


def test_a_network_prior_written_before_sizes_reads_as_a_ratio() -> None:
    doc = {"cross_ratio": 2.0, "retrogression": 0.02, "overlap": 2.0, "nic_sharing": 0.1,
           "two_node_penalty": 0.2, "job_types": ["a"], "transfer_error": None}
    prior = NetworkPrior.from_dict(doc)
    assert not prior.sized
    assert prior.network_base(0.05, 1e8) == pytest.approx(0.1)  # 2.0 x 0.05, size unused
    sized = NetworkPrior.from_dict({**prior.as_dict(), "seconds_per_parameter": 1e-9,
                                    "node_sync_weight": 0.6})
    assert sized.network_base(0.05, 1e8) == pytest.approx(0.1 + 0.03)
    assert sized.network_base(0.05, None) == pytest.approx(0.1)
    with pytest.raises(InputError, match="not a network prior"):
        NetworkPrior.from_dict({**doc, "seconds_per_parameter": 1e-9})


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
