"""The bench's engines (hetsched.bench.engine, hetsched.bench.local_engine): a failed or lost
cell is tried again once and then reported, never losing the bench; the local path never
imports ray; --engine and --address are checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.bench.engine import ATTEMPTS, Cell, likely_longest_first
from hetsched.bench.local_engine import LocalEngine
from hetsched.bench.results import read_results
from hetsched.bench.runner import make_engine, run_bench
from hetsched.core.errors import InputError
from hetsched.core.settings import ReplaySettings
from tests.helpers import (
    ENGINE_CLUSTER,
    ROOT,
    engine_bench,
    engine_trace,
    exits_2,
    faulty_bench,
    same_results,
)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return engine_trace(tmp_path / "t")


@pytest.fixture
def clean(tmp_path: Path, trace: Path) -> Path:
    """The bench of :func:`settings` run with no fault, in this process: the reference."""
    out = tmp_path / "clean"
    run_bench(engine_bench(trace), out, report=False)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_cell_that_fails_once_is_tried_again_and_recorded(
        tmp_path: Path, trace: Path, clean: Path, workers: int) -> None:
    ran = faulty_bench(trace, tmp_path / "b", LocalEngine, workers,
                       **{"srtf-s1-l1": "fail-once", "gavel-pop2-s0-l1": "fail-once"})
    assert (ran.outcome.ran, ran.outcome.failed, ran.outcome.interrupted) == (8, (), False)
    assert ran.attempts == {"srtf-s1-l1": 2, "gavel-pop2-s0-l1": 2}
    assert "srtf-s1-l1: RuntimeError: srtf-s1-l1 fails on purpose (attempt 1): trying it " \
        "again" in ran.printed
    # The retried cells give what a clean bench gives, cell for cell.
    same_results(tmp_path / "b", clean)


@pytest.mark.slow
def test_a_cell_that_always_fails_is_reported_once_tried_twice_and_the_rest_recorded(
        tmp_path: Path, trace: Path) -> None:
    ran = faulty_bench(trace, tmp_path / "b", LocalEngine, 1, **{"fifo-s0-l1": "always"})
    assert (ran.outcome.ran, ran.outcome.failed, ran.outcome.interrupted) == \
        (7, ("fifo-s0-l1",), False)
    assert ran.attempts["fifo-s0-l1"] == ATTEMPTS == 2
    assert "fifo-s0-l1: FAILED: RuntimeError: fifo-s0-l1 fails on purpose (attempt 2)" in \
        ran.printed
    rows = read_results(tmp_path / "b" / "results.csv")
    assert ("fifo", "0") not in {(r["policy"], r["seed"]) for r in rows}
    assert len(rows) == 7
    # A rerun tries the failed cell again (and only it).
    again = faulty_bench(trace, tmp_path / "b", LocalEngine, 1).outcome
    assert (again.ran, again.skipped, again.failed) == (1, 7, ())


@pytest.mark.slow
def test_a_killed_worker_loses_no_finished_cell_and_the_bench_completes(
        tmp_path: Path, trace: Path, clean: Path) -> None:
    # The worker running gavel-s0-l1 dies (os._exit) on its first attempt: the pool
    # breaks, every cell running in it is lost; they are tried again in a new pool.
    ran = faulty_bench(trace, tmp_path / "b", LocalEngine, 2, **{"gavel-s0-l1": "die-once"})
    assert (ran.outcome.ran, ran.outcome.failed, ran.outcome.interrupted) == (8, (), False)
    assert ran.attempts == {"gavel-s0-l1": 2}
    assert "WorkerLostError" in ran.printed
    same_results(tmp_path / "b", clean)


@pytest.mark.slow
def test_the_local_engine_never_imports_ray(tmp_path: Path) -> None:
    trace = engine_trace(tmp_path / "t", jobs=6)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from hetsched.cli.main import main\n"
        "try:\n"
        f"    main(['bench', '--trace', {str(trace)!r}, '--format', 'native', '--cluster',\n"
        f"          {ENGINE_CLUSTER!r}, '--policies', 'fifo,gavel', '--workers', '2',\n"
        f"          '--no-lp-bound', '--out', {str(tmp_path / 'b')!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print('ray' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert len(read_results(tmp_path / "b" / "results.csv")) == 2


def test_engines_and_addresses_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match=r"unknown engine.*one of local, ray"):
        make_engine("spark")
    with pytest.raises(InputError, match="an address is for the ray engine"):
        make_engine("local", address="10.0.0.1:6379")
    assert isinstance(make_engine("local", workers=3), LocalEngine)
    # Without ray installed, --engine ray says how to get it (one line, exit 2).
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "hetsched.bench.ray_engine", raising=False)
    with pytest.raises(InputError, match=r'ray is not installed.*pip install -e "\.\[ray\]"'):
        make_engine("ray")


def test_cli_engine_ray_without_ray_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    trace = engine_trace(tmp_path / "t", jobs=4)
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "hetsched.bench.ray_engine", raising=False)
    err = exits_2(["bench", "--trace", str(trace), "--format", "native",
                   "--cluster", ENGINE_CLUSTER,
                   "--policies", "fifo", "--engine", "ray", "--out", str(tmp_path / "b")],
                  capsys)
    assert "--engine: ray is not installed" in err
    assert not (tmp_path / "b").exists()


def test_replay_takes_an_engine_only_for_pop_partitions(
        tmp_path: Path, trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["replay", str(trace), "--format", "native", "--cluster", ENGINE_CLUSTER,
              "--policy", "gavel", "--out", str(tmp_path / "r")]
    err = exits_2([*common, "--engine", "ray"], capsys)
    assert "--engine: a replay runs only POP's partitions on an engine (got 'ray'; " \
        "expected --partitions K > 1 with it, or no --engine)" in err
    err = exits_2([*common, "--partitions", "2", "--address", "10.0.0.1:6379"], capsys)
    assert "--address: an address is for the ray engine" in err
    assert not (tmp_path / "r").exists()


def test_cells_start_likely_longest_first() -> None:
    # Exact models (a solver at each decision) first, then the higher load; otherwise the
    # planned order: list scheduling longest first keeps both slots busy to the end.
    cells = [Cell(f"{policy}-s{seed}-l{load:g}", policy, 0, "0", f"0/s{seed}", policy, (),
                  ReplaySettings(seed=seed, load=load))
             for load in (0.5, 1.0) for policy in ("fifo", "deadline-agnostic", "gavel",
                                                   "allox") for seed in (0, 1)]
    assert [cell.name for cell in likely_longest_first(cells)] == [
        "deadline-agnostic-s0-l1", "deadline-agnostic-s1-l1", "allox-s0-l1", "allox-s1-l1",
        "deadline-agnostic-s0-l0.5", "deadline-agnostic-s1-l0.5", "allox-s0-l0.5",
        "allox-s1-l0.5", "fifo-s0-l1", "fifo-s1-l1", "gavel-s0-l1", "gavel-s1-l1",
        "fifo-s0-l0.5", "fifo-s1-l0.5", "gavel-s0-l0.5", "gavel-s1-l0.5"]
