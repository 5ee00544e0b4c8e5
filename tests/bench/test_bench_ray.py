"""``hetsched bench --engine ray`` (hetsched.bench.ray_engine) on a 2-CPU local Ray: the same
results as the local engine cell for cell, inputs put in the object store once, failed
and lost tasks tried again once, POP's partitions as Ray tasks."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from hetsched.bench.local_engine import LocalEngine
from hetsched.bench.runner import run_bench
from hetsched.cli.main import main
from tests.helpers import (
    ENGINE_CLUSTER,
    engine_bench,
    engine_trace,
    exits_2,
    faulty_bench,
    same_results,
)

ray = pytest.importorskip("ray", reason="ray is the optional extra of --engine ray: "
                          "pip install -e '.[ray]'")

from hetsched.bench.ray_engine import RayEngine, RayPartitionExecutor  # noqa: E402


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return engine_trace(tmp_path / "t")


# --- first, with no Ray running: the engine starts its own -------------------------------


def test_cli_engine_ray_starts_a_local_ray_and_matches_the_local_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = engine_trace(tmp_path / "t", jobs=12)
    assert not ray.is_initialized()
    handler = signal.getsignal(signal.SIGTERM)
    common = ["bench", "--trace", str(trace), "--format", "native", "--cluster", ENGINE_CLUSTER,
              "--policies", "fifo,srtf,gavel", "--seeds", "0,1", "--load", "1,2",
              "--deadline-fraction", "0.5", "--no-lp-bound"]
    main([*common, "--engine", "ray", "--workers", "2", "--out", str(tmp_path / "ray")])
    out = capsys.readouterr()
    assert "12 runs done, 0 already in results.csv, 0 failed" in out.out
    assert "[12/12]" in out.err  # a progress line per finished cell
    main([*common, "--engine", "local", "--workers", "1", "--out", str(tmp_path / "local")])
    same_results(tmp_path / "ray", tmp_path / "local")
    # The bench stopped the Ray it started, and gave SIGTERM back to its own handler.
    assert not ray.is_initialized()
    assert signal.getsignal(signal.SIGTERM) == handler
    # Resumable: a rerun on Ray finds every cell in results.csv (and starts no Ray).
    main([*common, "--engine", "ray", "--workers", "2", "--out", str(tmp_path / "ray")])
    assert "0 runs done, 12 already in results.csv" in capsys.readouterr().out
    assert not ray.is_initialized()


@pytest.mark.parametrize(("address", "problem"), [
    ("127.0.0.1:1", "cannot reach Ray"), ("head-without-port", "bad Ray address")])
def test_an_address_nobody_listens_on_exits_2_at_once(
        tmp_path: Path, trace: Path, address: str, problem: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["bench", "--trace", str(trace), "--format", "native",
                   "--cluster", ENGINE_CLUSTER,
                   "--policies", "fifo", "--engine", "ray", "--address", address,
                   "--out", str(tmp_path / "b")], capsys)
    assert f"--address: {problem}" in err
    assert f"'{address}'" in err


def _niceness() -> int:
    return os.nice(0)


def test_a_local_ray_runs_its_workers_at_the_benchs_priority() -> None:
    # Ray's default (nice 15) made replays yield to every other process on a shared
    # machine; the local Ray the engine starts runs them at the bench's own niceness.
    with RayEngine(workers=1).connected():
        assert ray.get(ray.remote(_niceness).remote()) == os.nice(0)
    assert "RAY_worker_niceness" not in os.environ
    assert not ray.is_initialized()


# --- then on one local Ray of 2 CPUs, started for the rest of the module ----------------


@pytest.fixture(scope="module")
def local_ray() -> object:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")
    yield ray
    ray.shutdown()


def test_ray_engine_matches_the_local_engine_cell_for_cell(
        tmp_path: Path, trace: Path, local_ray: object, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    # fifo, srtf, gavel and gavel with POP's 2 partitions (Ray tasks nested in the cell's
    # task), seeds 0 and 1 (which draw different deadlines), loads 1 and 2: 16 cells.
    bench = engine_bench(trace, loads=(1.0, 2.0))
    put = ray.put
    puts: list[type] = []

    def counted(value: object, **kwargs: object) -> object:
        puts.append(type(value))
        return put(value, **kwargs)

    monkeypatch.setattr(ray, "put", counted)
    outcome = run_bench(bench, tmp_path / "ray", report=False, engine=RayEngine(workers=2))
    assert (outcome.ran, outcome.failed, outcome.interrupted) == (16, (), False)
    # The inputs went to the object store once each, not once per task: the cluster and
    # throughput model once, the jobs once per seed.
    assert sorted(t.__name__ for t in puts) == ["ReplayInputs", "Trace", "Trace"]
    run_bench(bench, tmp_path / "local", report=False, engine=LocalEngine(1))
    same_results(tmp_path / "ray", tmp_path / "local")
    summary = json.loads((tmp_path / "ray" / "runs" / "gavel-pop2-s0-l1" / "summary.json")
                         .read_text())
    assert (summary["policy"], summary["policy_params"], summary["partitions"]) == \
        ("gavel", {"partitions": 2}, 2)


def test_failed_and_lost_ray_tasks_are_tried_once_more(
        tmp_path: Path, trace: Path, local_ray: object) -> None:
    run_bench(engine_bench(trace), tmp_path / "clean", report=False, engine=LocalEngine(1))
    # srtf-s0-l1 raises once; the worker of gavel-s1-l1 dies on its first attempt (as a
    # killed Ray worker does); fifo-s1-l1 fails every time.
    ran = faulty_bench(trace, tmp_path / "b", RayEngine, 2,
                       **{"srtf-s0-l1": "fail-once", "gavel-s1-l1": "die-once",
                          "fifo-s1-l1": "always"})
    assert (ran.outcome.ran, ran.outcome.failed, ran.outcome.interrupted) == \
        (7, ("fifo-s1-l1",), False)
    assert ran.attempts == {"srtf-s0-l1": 2, "gavel-s1-l1": 2, "fifo-s1-l1": 2}
    assert "gavel-s1-l1: WorkerLostError" in ran.printed
    assert "fifo-s1-l1: FAILED: RuntimeError: fifo-s1-l1 fails on purpose (attempt 2)" in \
        ran.printed
    # No finished cell lost; a rerun does the failed one, and all equal the clean bench.
    again = faulty_bench(trace, tmp_path / "b", RayEngine, 2).outcome
    assert (again.ran, again.skipped, again.failed) == (1, 7, ())
    same_results(tmp_path / "b", tmp_path / "clean")


def test_replay_partitions_on_ray_give_the_local_files(
        tmp_path: Path, trace: Path, local_ray: object,
        capsys: pytest.CaptureFixture[str]) -> None:
    common = ["replay", str(trace), "--format", "native", "--cluster", ENGINE_CLUSTER, "--policy",
              "gavel", "--partitions", "2"]
    main([*common, "--engine", "ray", "--out", str(tmp_path / "ray")])
    main([*common, "--out", str(tmp_path / "local")])
    capsys.readouterr()
    for name in ("summary.json", "jobs.csv", "decisions.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == \
            (tmp_path / "local" / name).read_bytes(), name
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["partitions"] == 2
    assert summary["pop_solves"] > 0


def test_the_partition_executor_maps_in_order(local_ray: object) -> None:
    executor = RayPartitionExecutor()
    assert list(executor.map(pow, [2, 3, 4], [3, 2, 1])) == [8, 9, 4]
    assert executor.submit(divmod, 17, 5).result(timeout=60) == (3, 2)
