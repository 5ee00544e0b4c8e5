"""The CLI end to end: solve (table and JSON), validate, generate."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from solver.cli import format_gpus, main
from tests.conftest import INSTANCES, ROOT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "solver", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_solve_prints_plan_and_metrics() -> None:
    done = run("solve", "instances/small.json")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "job  type" in out
    assert "checker: OK" in out
    for line in ("status: FEASIBLE", "average JCT:", "p95 JCT:", "makespan:", "deadlines met:",
                 "GPU utilisation:"):
        assert line in out
    assert len(re.findall(r"^j\d+ ", out, flags=re.MULTILINE)) == 20


def test_solve_json_has_the_promised_keys(tmp_path: Path) -> None:
    out_file = tmp_path / "r.json"
    done = run("solve", "instances/medium.json", "--json", "--out", str(out_file))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    for key in ("status", "objective", "bound", "gap", "runtime_s", "metrics", "schedule"):
        assert key in document
    assert document["status"] == "FEASIBLE"
    assert len(document["schedule"]) == 200
    assert set(document["schedule"][0]) == {"job", "gpu_type", "gpus", "start", "finish"}
    assert document["violations"] == []
    assert json.loads(out_file.read_text())["objective"] == document["objective"]


def test_generate_then_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "g.json"
    main(["generate", "--jobs", "12", "--gpus", "a100=8,t4=8", "--seed", "5", "-o", str(target)])
    main(["validate", str(target)])
    out = capsys.readouterr().out
    assert f"{target}: OK (12 jobs, 16 GPUs, 4 nodes, types a100, t4)" in out


def test_same_seed_same_file_other_seed_other_file(tmp_path: Path) -> None:
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        main(["generate", "--jobs", "30", "--gpus", "v100=8,k80=8", "--seed", seed,
              "--name", "x", "-o", str(tmp_path / f"{name}.json")])
    a, b, c = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "abc")
    assert a["jobs"] == b["jobs"]
    assert a["jobs"] != c["jobs"]


def test_unknown_model_lists_the_available_ones() -> None:
    done = run("solve", "instances/tiny.json", "--model", "nope")
    assert done.returncode == 2
    assert "unknown model" in done.stderr
    assert "fifo" in done.stderr
    assert "Traceback" not in done.stderr


def test_format_gpus() -> None:
    assert format_gpus(["n0/0", "n0/1", "n0/2", "n1/5"]) == "n0/0-2+n1/5"
    assert format_gpus(["v100-1/3", "v100-1/0", "v100-1/1"]) == "v100-1/0-1,3"


def test_instances_folder_is_what_the_readme_uses() -> None:
    assert (INSTANCES / "small.json").is_file()
    assert "hetsched solve instances/small.json" in (ROOT / "README.md").read_text()
