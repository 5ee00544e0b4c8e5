"""The CLI end to end: solve (table and JSON), validate, generate."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hetsched.cli.main import main
from hetsched.cli.printing import format_gpus
from tests.helpers import INSTANCES, ROOT, SPREAD_ONLY, exit_code


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hetsched", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def _write(tmp_path: Path, name: str, doc: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("model", ["deadline", "allox"])
def test_solve_without_a_schedule_exits_3_and_draws_no_chart(
        model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "spread.json", SPREAD_ONLY)
    chart = tmp_path / "gantt.png"
    with pytest.raises(SystemExit) as exited:
        main(["solve", str(path), "--model", model, "--plot", str(chart)])
    assert exited.value.code == 3
    out, err = capsys.readouterr()
    assert "status: INFEASIBLE" in out
    assert "checker: no schedule to check" in out
    lines = err.strip().splitlines()
    assert lines[0] == f"no schedule to draw: {chart} not written"
    assert lines[1].startswith(f"no schedule: {model} returned INFEASIBLE: ")
    assert "wide" in lines[1]
    assert not chart.exists()
    with pytest.raises(SystemExit) as exited:
        main(["solve", str(path), "--model", model, "--json"])
    assert exited.value.code == 3
    document = json.loads(capsys.readouterr().out)
    assert (document["status"], document["schedule"], document["violations"]) == \
        ("INFEASIBLE", [], [])
    main(["solve", str(path), "--model", "fifo"])  # fifo runs "wide" spread: exit 0
    assert "checker: OK" in capsys.readouterr().out


def test_validate_model_warns_about_jobs_the_model_cannot_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "spread.json", SPREAD_ONLY)
    tiny = str(INSTANCES / "tiny.json")
    with pytest.raises(SystemExit) as exited:
        main(["validate", tiny, str(path), "--model", "deadline"])
    assert exited.value.code == 3
    out, err = capsys.readouterr()
    assert out.splitlines()[1] == f"{path}: OK (2 jobs, 2 GPUs, 2 nodes, types v100)"
    assert err.splitlines() == [
        f"warning: {path}: $.jobs[1]: the deadline model cannot run job wide: no packed "
        "configuration (all its GPUs on one node) has throughput > 0; the deadline model "
        "runs gangs packed"]
    main(["validate", tiny, str(path), "--model", "fifo"])  # fifo runs both: exit 0
    assert capsys.readouterr().err == ""
    main(["validate", tiny, "--model", "allox"])
    with pytest.raises(SystemExit) as exited:  # a bad file wins: exit 2
        main(["validate", str(path), str(ROOT / "tests/data/bad/huge_now.json"), "--model",
              "allox"])
    assert exited.value.code == 2


#: The largest accepted values (docs/instance-format.md, "Ranges"): now and arrivals at
#: 1e10 s, deadlines at 1e10 s, work 1e12 steps at 1e9 steps/s, 10 steps at 1e-9 steps/s
#: (1e10 s), weights 1e-3 and 1e3, a node of 1,024 GPUs, memory 1e7 GB, price 1e6.
EDGES: dict[str, Any] = {
    "now": 1e10,
    "gpu_types": [{"name": "fast", "memory_gb": 1e7, "price_per_hour": 1e6}, {"name": "slow"}],
    "nodes": [{"name": "big", "gpu_type": "fast", "num_gpus": 1024, "cpus": 1000000,
               "memory_gb": 1e7},
              {"name": "s0", "gpu_type": "slow", "num_gpus": 1},
              {"name": "s1", "gpu_type": "slow", "num_gpus": 1}],
    "jobs": [
        {"id": "early", "arrival": 0, "job_type": "quick", "num_gpus": 1, "work": 1e12,
         "deadline": 1e10, "weight": 1e3},
        {"id": "late", "arrival": 1e10, "job_type": "quick", "num_gpus": 1, "work": 1e12,
         "weight": 1e-3},
        {"id": "crawl", "arrival": 1e10, "job_type": "crawl", "num_gpus": 1, "work": 10,
         "weight": 1e3},
        {"id": "gang", "arrival": 5e9, "job_type": "quick", "num_gpus": 2, "work": 1e12,
         "deadline": 1e10, "allowed_gpu_counts": [1, 2]},
    ],
    "throughput": [
        {"job_type": j, "gpu_type": g, "num_gpus": n, "placement": p, "throughput": v}
        for j, g, n, p, v in [("quick", "fast", 1, "packed", 1e9),
                              ("quick", "fast", 2, "packed", 1e9),
                              ("quick", "slow", 1, "packed", 1e3),
                              ("quick", "slow", 2, "spread", 1e3),
                              ("crawl", "slow", 1, "packed", 1e-9),
                              ("crawl", "fast", 1, "packed", 2e-9)]],
}


@pytest.mark.slow
@pytest.mark.parametrize("model", [["fifo"], ["deadline", "--backend", "cpsat"], ["allox"]])
def test_the_largest_accepted_values_solve_or_end_cleanly(
        model: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "edges.json", EDGES)
    code = exit_code(["solve", str(path), "--model", *model, "--time-limit", "2", "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 3), err
    assert "internal error" not in err
    document = json.loads(out)
    if code == 0:
        assert document["violations"] == []
        assert len(document["schedule"]) == 4
        # The crawling job takes 1e10 s on the slow GPUs, 5e9 s on the fast one.
        crawl = next(a for a in document["schedule"] if a["job"] == "crawl")
        assert crawl["finish"] - crawl["start"] == pytest.approx(
            5e9 if crawl["gpu_type"] == "fast" else 1e10)
    else:
        assert document["schedule"] == []
        assert err.startswith("no schedule: ")
    if model == ["fifo"]:
        assert code == 0


def test_solve_says_what_the_objective_measures_and_what_is_proven(
        capsys: pytest.CaptureFixture[str]) -> None:
    # topology printed "status: FEASIBLE", "gap: 0%" and an objective
    # without a unit; the gap is of the placements only (FIFO admission is not optimised).
    from hetsched.cli.main import main

    main(["solve", str(ROOT / "instances" / "small.json"), "--model", "topology"])
    lines = capsys.readouterr().out.splitlines()
    assert "status: FEASIBLE" in lines
    assert any(line.startswith("objective: ") and line.endswith(
        "(communication cost of the placements, s per GB weighted by sensitivity)")
        for line in lines)
    assert "gap: 0% (each admitted batch's placement; the FIFO admission order is not " \
        "optimised)" in lines
    main(["solve", str(ROOT / "instances" / "tiny.json"), "--model", "fifo"])
    assert "objective: 13,258.1 (total weighted completion time, s)" in \
        capsys.readouterr().out.splitlines()


def test_a_job_run_in_segments_has_one_jct_on_its_last_segment(
        capsys: pytest.CaptureFixture[str]) -> None:
    # Each run segment of a preempted job showed its own JCT and
    # "met" (a first segment's "jct 11,651 s, met" though the job finished later).
    from hetsched.cli.main import main

    main(["solve", str(ROOT / "instances" / "congested.json"), "--model", "srtf"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if re.fullmatch(r"j[0-9]{2}", line.split(" ", 1)[0])]
    by_job: dict[str, list[list[str]]] = {}
    for row in rows:
        by_job.setdefault(row[0], []).append(row)
    segmented = {job: runs for job, runs in by_job.items() if len(runs) > 1}
    assert segmented  # srtf preempts on congested.json
    for job, runs in segmented.items():
        assert [run[1] for run in runs] == [f"({k}/{len(runs)})" for k in
                                            range(1, len(runs) + 1)]
        # job, (k/n), type, GPUs, arrival, start, finish: no JCT, no deadline verdict
        assert [len(run) for run in runs[:-1]] == [7] * (len(runs) - 1)
        assert len(runs[-1]) > 7, job
    assert len(by_job) == 20


@pytest.mark.parametrize(("value", "text"), [
    (766250.06, "766,250.1"), (1658629.2, "1,658,629.2"), (4.56112e6, "4,561,120.0"),
    (30.0, "30"), (2.5, "2.5"), (0.439407, "0.439407"), (0.000144742, "0.000145"),
    (0.0, "0"), (None, "-"), (math.nan, "-"), (2000, "2,000"), (True, "true"),
])
def test_every_number_is_written_in_one_style(value: object, text: str) -> None:
    # One output mixed 766,250, 1.65863e+06 and None.
    from hetsched.cli.printing import format_number

    assert format_number(value) == text


def test_replay_prints_no_exponent_and_no_none(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from hetsched.cli.main import main

    main(["replay", str(ROOT / "tests" / "data" / "traces" / "philly_small.csv"), "--format",
          "philly", "--cluster", "v100=4,k80=4", "--out", str(tmp_path / "r")])
    lines = capsys.readouterr().out.splitlines()
    values = [line.split(": ", 1)[1] for line in lines if ": " in line
              and not line.startswith(("wrote", "note", "warning"))]
    assert values
    assert not [v for v in values if re.search(r"[0-9]e[+-][0-9]|None", v)]
    assert "round_s: -" in lines  # fifo has no rounds


def philly_tenants(folder: Path) -> Path:
    """Two tenants of the Philly sample's virtual clusters, c1 (its 1- and 2-GPU jobs) and
    c2 (its 4-GPU job), each guaranteed 2 V100s."""
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "tenants.json"
    table.write_text(json.dumps({"tenants": [
        {"name": "c1", "weight": 1, "quotas": {"v100": {"nominal": 2}}},
        {"name": "c2", "weight": 1, "quotas": {"v100": {"nominal": 2}}}]}))
    return table


def test_a_tenant_replay_prints_its_fairness_figures(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    trace = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
    main(["replay", str(trace), "--format", "philly", "--cluster", "v100=4,k80=4",
          "--tenants", str(philly_tenants(tmp_path)), "--out", str(tmp_path / "r")])
    lines = capsys.readouterr().out.splitlines()
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    for key in ("tenant_jain_index", "quota_violation_gpu_s", "max_rho",
                "quota_dropped_starts", "quota_reclaims"):
        value = summary[key]
        assert isinstance(value, int | float)
        assert math.isfinite(value)
        printed = f"{value:,}" if isinstance(value, int) else (
            f"{value:,.1f}" if value >= 1000 else None)
        (line,) = [line for line in lines if line.startswith(f"{key}: ")]
        if printed is not None:
            assert line == f"{key}: {printed}"
        else:
            assert math.isclose(float(line.split(": ")[1]), value, rel_tol=1e-5)
    # Without tenants, no such line.
    main(["replay", str(trace), "--format", "philly", "--cluster", "v100=4,k80=4", "--out",
          str(tmp_path / "plain")])
    assert "tenant_jain_index" not in capsys.readouterr().out
