"""``hetsched fit`` and instance files that reference a fitted model (``throughput_model``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.instance import load_instance
from hetsched.speeds.fit import fit_throughput_model
from hetsched.speeds.model import FittedThroughputModel
from hetsched.speeds.model_file import load_model, save_model
from hetsched.speeds.profiles import Profile, write_profile_csv
from tests.helpers import ROOT, exit_code, synthetic_profile


def test_fit_writes_a_model_and_reports_leave_one_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile_path, model_path, plot_path = (tmp_path / "p.csv", tmp_path / "m.json",
                                           tmp_path / "loo.png")
    write_profile_csv(synthetic_profile(counts=(1, 2, 4, 8)), profile_path)
    code = exit_code(["fit", str(profile_path), "-o", str(model_path), "--report",
                "--plot", str(plot_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "held-out points: 18" in out
    median = re.search(r"^median APE: ([0-9.]+)%$", out, re.MULTILINE)
    p90 = re.search(r"^p90 APE: ([0-9.]+)%$", out, re.MULTILINE)
    assert median is not None
    assert p90 is not None
    assert float(median.group(1)) == 0.0  # exact synthetic data
    assert float(p90.group(1)) == 0.0
    assert "worst 10:" in out
    assert load_model(model_path).job_types == ("net (batch size 16)", "net (batch size 32)",
                                                "net (batch size 64)")
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_without_report_prints_no_accuracy(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    write_profile_csv(synthetic_profile(), tmp_path / "p.csv")
    assert exit_code(["fit", str(tmp_path / "p.csv"), "-o", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "median APE" not in out
    assert "(6 own-data, 0 family-shape, 0 single-gpu-only, 0 no-data) from 27 measurements" \
        in out


@pytest.mark.parametrize(("text", "piece"), [
    ("job_type,gpu_type\n", "missing column 'num_gpus'"),
    ("job_type,gpu_type,num_gpus,placement,throughput\nr,g,1,packed,-4\n", "bad throughput"),
])
def test_fit_bad_profile_exits_2_with_one_line(tmp_path: Path, text: str, piece: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    assert exit_code(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert piece in err
    assert str(path) in err
    assert not (tmp_path / "m.json").exists()


def _instance_with_model(tmp_path: Path, reference: object) -> Path:
    """instances/tiny.json with its throughput replaced by a model fitted on its table."""
    doc = json.loads((ROOT / "instances" / "tiny.json").read_text())
    table = load_instance(ROOT / "instances" / "tiny.json").throughput
    assert isinstance(table, ThroughputTable)
    rows = table.rows()
    # Add 2- and 4-GPU measurements so the model has multi-GPU data to fit.
    rows += [(j, g, n, p, v * n * 0.8) for j, g, c, p, v in table.rows() if c == 1
             for n in (2, 4) for p in Placement]
    (tmp_path / "models").mkdir()
    save_model(fit_throughput_model(Profile.from_rows(rows)), tmp_path / "models" / "m.json")
    del doc["throughput"]
    doc["throughput_model"] = reference
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("reference", "kind"), [
    ("models/m.json", FittedThroughputModel),
    ({"file": "models/m.json", "mode": "fitted"}, FittedThroughputModel),
    ({"file": "models/m.json", "mode": "measured"}, ThroughputTable),
])
def test_instance_takes_throughput_from_a_model_file(
        tmp_path: Path, reference: object, kind: type,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _instance_with_model(tmp_path, reference)
    instance = load_instance(path)
    assert isinstance(instance.throughput, kind)
    # 4 packed GPUs measured at 0.8 x 4 x the 1-GPU speed of 8.0 steps/s on a V100.
    assert instance.throughput.throughput("image-cnn-large", "v100", 4, Placement.PACKED) == \
        pytest.approx(25.6, rel=0.02)
    assert exit_code(["solve", str(path)]) == 0
    assert "checker: OK" in capsys.readouterr().out


@pytest.mark.parametrize(("change", "pieces"), [
    (lambda d: d.update(throughput="table.csv"),
     ["$: both throughput and throughput_model given"]),
    (lambda d: d.pop("throughput_model"), ["$: missing field 'throughput'", "throughput_model"]),
    (lambda d: d.update(throughput_model="models/absent.json"),
     ["$.throughput_model", "throughput model file does not exist", "absent.json"]),
    (lambda d: d.update(throughput_model={"file": "models/m.json", "mode": "guessed"}),
     ["$.throughput_model.mode", "'guessed'", '"fitted", "measured"']),
    (lambda d: d.update(throughput_model=["models/m.json"]),
     ["$.throughput_model", "bad throughput_model", "{file, mode: fitted or measured}"]),
    (lambda d: d["jobs"][1].update(job_type="gan"),
     ["$.jobs[1].job_type", "not in the throughput model models/m.json", "'gan'"]),
    (lambda d: d["gpu_types"][0].update(name="h100"),
     ["$.gpu_types[0].name", "'h100'", "one of k80, v100"]),
])
def test_bad_model_reference_exits_2(tmp_path: Path, change: object, pieces: list[str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = _instance_with_model(tmp_path, "models/m.json")
    doc = json.loads(path.read_text())
    change(doc)  # type: ignore[operator]
    if doc["gpu_types"][0]["name"] == "h100":
        for node in doc["nodes"]:
            node["gpu_type"] = "h100" if node["gpu_type"] == "v100" else node["gpu_type"]
    path.write_text(json.dumps(doc))
    assert exit_code(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    for piece in pieces:
        assert piece in err


def test_model_file_errors_name_the_model_file(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _instance_with_model(tmp_path, "models/m.json")
    model_path = tmp_path / "models" / "m.json"
    doc = json.loads(model_path.read_text())
    doc["series"][0]["coefficients"][0] = -1
    model_path.write_text(json.dumps(doc))
    assert exit_code(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(model_path) in err
    assert "$.series[0].coefficients[0]" in err

