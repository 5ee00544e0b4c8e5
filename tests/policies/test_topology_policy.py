"""The ``topology`` policy: FIFO admission with exact placement; instance files that name
nvidia-smi topologies; ``hetsched topology show``."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from hetsched import SolveOptions, solve
from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.core.result import Status
from hetsched.files.instance import load_instance
from hetsched.files.interconnect import link_factor
from tests.helpers import INSTANCES, assert_valid

ROWS = [
    # job type, GPUs, placement, steps/s: the 4-GPU gang loses 40% when spread.
    {"job_type": "cnn", "gpu_type": "v100", "num_gpus": 1, "placement": "packed",
     "throughput": 10.0},
    {"job_type": "cnn", "gpu_type": "v100", "num_gpus": 4, "placement": "packed",
     "throughput": 36.0},
    {"job_type": "cnn", "gpu_type": "v100", "num_gpus": 4, "placement": "spread",
     "throughput": 21.6},
]


def dgx1_instance(folder: Path, shared: Path, **extra: object) -> Path:
    shutil.copy(shared / "topology" / "dgx1-v100.nvidia-smi-topo.txt", folder / "dgx1.txt")
    doc = {
        "gpu_types": [{"name": "v100"}],
        "nodes": [{"name": "dgx", "gpu_type": "v100", "num_gpus": 8}],
        "jobs": [
            {"id": "a", "arrival": 0, "job_type": "cnn", "num_gpus": 1, "work": 1000},
            {"id": "b", "arrival": 0, "job_type": "cnn", "num_gpus": 1, "work": 1000},
            {"id": "c", "arrival": 0, "job_type": "cnn", "num_gpus": 4, "work": 36000},
        ],
        "throughput": ROWS,
        "topologies": {"v100": "dgx1.txt"},
        **extra,
    }
    path = folder / "inst.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("backend", ["cpsat", "cbc", "highs"])
def test_one_batch_is_placed_optimally_and_beats_first_fit(
    tmp_path: Path, shared_data: Path, backend: str
) -> None:
    instance = load_instance(dgx1_instance(tmp_path, shared_data))
    result = solve(instance, "topology", SolveOptions(backend=backend))
    assert_valid(instance, result.schedule)
    # All three jobs start at 0 in one batch, so the placement optimum is a proven optimum.
    assert result.status is Status.OPTIMAL
    # Sensitivity of c: 1 - 21.6/36 = 0.4. Best 4 GPUs of a DGX-1: a cube face, 3 NV1 +
    # 3 NV2 pairs = 3/25 + 3/50 = 0.18 s/GB; weighted 0.072. The 1-GPU jobs weigh 0.
    assert result.objective == pytest.approx(0.4 * 0.18)
    assert result.bound == pytest.approx(0.4 * 0.18, abs=1e-5)
    placed = result.schedule.by_job()["c"].gpus
    assert set(placed) in ({f"dgx/{i}" for i in range(4)}, {f"dgx/{i}" for i in range(4, 8)})
    # First fit puts a, b on GPUs 0, 1 and c on 2-5, whose slowest link is SYS (6 GB/s):
    # c then runs at 36 x (1 - 0.4 x ln(25/6)/ln(25/5)) steps/s; on a cube face at 36.
    extra = result.extra
    first_fit_c = 36 * (1 - 0.4 * math.log(25 / 6) / math.log(25 / 5))
    assert extra["predicted_throughput"]["c"] == pytest.approx(36.0)
    assert extra["first_fit_predicted_throughput_total"] == pytest.approx(20 + first_fit_c)
    assert extra["predicted_throughput_total"] == pytest.approx(56.0)


def test_link_factor_end_points() -> None:
    assert link_factor(0.4, 50.0) == 1.0
    assert link_factor(0.4, 25.0) == 1.0
    assert link_factor(0.4, 5.0) == pytest.approx(0.6)  # the spread speed
    assert link_factor(0.4, 1.0) == pytest.approx(0.6)
    assert link_factor(0.0, 6.0) == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small.json", "medium.json"])
def test_topology_policy_on_examples_is_valid_and_fifo(name: str) -> None:
    instance = load_instance(INSTANCES / name)
    result = solve(instance, "topology", SolveOptions(time_limit_s=10, deterministic=True))
    assert_valid(instance, result.schedule)
    by_job = result.schedule.by_job()
    ordered = sorted(instance.jobs, key=lambda j: (j.arrival, j.id))
    starts = [by_job[j.id].start for j in ordered]
    assert starts == sorted(starts)
    assert result.extra["all_batches_optimal"]
    assert result.bound == pytest.approx(result.objective, abs=1e-5)


@pytest.mark.parametrize(
    ("change", "pieces"),
    [
        ({"topologies": {"k80": "dgx1.txt"}}, ["$.topologies.k80", "no node has this GPU type"]),
        ({"topologies": {"v100": "nope.txt"}}, ["$.topologies.v100", "does not exist"]),
        ({"nodes": [{"name": "dgx", "gpu_type": "v100", "num_gpus": 4}]},
         ["$.nodes[0].num_gpus", "8 GPUs"]),
        ({"network_gbps": 0}, ["$.network_gbps", "> 0"]),
    ],
)
def test_bad_topology_references(tmp_path: Path, shared_data: Path, change: dict[str, object],
                                 pieces: list[str]) -> None:
    path = dgx1_instance(tmp_path, shared_data)
    doc = json.loads(path.read_text())
    doc.update(change)
    if "nodes" in change:
        doc["jobs"] = doc["jobs"][:2]
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as error:
        load_instance(path)
    for piece in pieces:
        assert piece in str(error.value)


def test_topology_show(shared_data: Path, capsys: pytest.CaptureFixture[str],
                       tmp_path: Path) -> None:
    main(["topology", "show", str(shared_data / "topology" / "dgx1-v100.nvidia-smi-topo.txt"),
          "--plot", str(tmp_path / "g.png")])
    out = capsys.readouterr().out
    assert "GPU0      X   NV1   NV1   NV2   NV2   SYS   SYS   SYS" in out
    assert "NV2 8 (50 GB/s), NV1 8 (25 GB/s), SYS 12 (6 GB/s)" in out
    assert (tmp_path / "g.png").stat().st_size > 10_000
    bad = tmp_path / "bad.txt"
    bad.write_text("\tGPU0\tGPU1\nGPU0\t X \tQQ\nGPU1\tQQ\t X \n")
    with pytest.raises(SystemExit) as exited:
        main(["topology", "show", str(bad)])
    assert exited.value.code == 2
    assert "line 2, column 10: unknown link kind" in capsys.readouterr().err


def test_deadline_then_topology_placement(tmp_path: Path, shared_data: Path) -> None:
    # The deadline model puts all three jobs on the DGX-1 at time 0; its own realisation
    # takes the lowest free GPUs (a: 0, b: 1, c: 2-5, slowest link SYS). The topology
    # step re-chooses GPUs inside the node without moving any job in time.
    instance = load_instance(dgx1_instance(tmp_path, shared_data))
    plain = solve(instance, "deadline",
                  SolveOptions(backend="cpsat", time_limit_s=20, deterministic=True))
    placed = solve(instance, "deadline",
                   SolveOptions(backend="cpsat", time_limit_s=20, deterministic=True),
                   placement="topology")
    assert_valid(instance, placed.schedule)
    assert placed.objective == pytest.approx(plain.objective)
    times = {a.job: (a.start, a.finish) for a in placed.schedule}
    assert times == {a.job: (a.start, a.finish) for a in plain.schedule}
    assert set(plain.schedule.by_job()["c"].gpus) == {f"dgx/{i}" for i in range(2, 6)}
    assert set(placed.schedule.by_job()["c"].gpus) in (
        {f"dgx/{i}" for i in range(4)}, {f"dgx/{i}" for i in range(4, 8)})
    first_fit_c = 36 * (1 - 0.4 * math.log(25 / 6) / math.log(25 / 5))
    assert placed.extra["first_fit_predicted_throughput_total"] == pytest.approx(20 + first_fit_c)
    assert placed.extra["predicted_throughput_total"] == pytest.approx(56.0)


def test_unknown_placement_is_an_input_error() -> None:
    instance = load_instance(INSTANCES / "tiny.json")
    with pytest.raises(InputError, match="unknown placement"):
        solve(instance, model="fifo", placement="magic")
