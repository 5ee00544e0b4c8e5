"""What the tests share: the project's paths, the checker as an assertion, the CLI's exit
2, and the instances and profiles several test modules build (imported from here, never
from another test module or from conftest)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from hetsched.core.check import check
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.result import Schedule
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.speeds.profiles import Profile, ProfilePoint

if TYPE_CHECKING:
    from hetsched.bench.engine import Cell, Engine
    from hetsched.bench.runner import BenchOutcome
    from hetsched.bench.settings import BenchSettings
    from hetsched.files.replay_inputs import ReplayInputs
    from hetsched.files.traces import Trace
    from hetsched.formulations.gavel.problem import AllocationProblem
    from hetsched.formulations.progress.problem import RoundProblem
    from hetsched.replaying import ReplayResult

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
#: Real data measured by others lives beside the project (never copied into it).
SHARED_DATA = ROOT.parent / "shared" / "data"


def assert_valid(instance: Instance, schedule: Schedule, *, complete: bool = True) -> None:
    """Fail with the checker's violations if ``schedule`` is not valid for ``instance``."""
    violations = check(instance, schedule, complete=complete)
    assert not violations, "\n".join(map(str, violations))


def exit_code(args: list[str]) -> int:
    """``hetsched`` with ``args`` in this process: its exit code."""
    from hetsched.cli.main import main

    try:
        main(args)
    except SystemExit as exited:
        return int(exited.code or 0)
    return 0


def exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI with ``args``; it must exit 2 without a traceback; its stderr."""
    from hetsched.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "Traceback" not in err
    assert "internal error" not in err
    return err


# --- random small instances (formulation properties, replays) -------------------------

JOB_TYPES = ("cnn", "lm", "rl")


def random_instance(seed: int, jobs: int = 4, *, deadlines: bool = True, arrivals: bool = True,
                    elastic: bool = True, weights: bool = False, gangs: bool = True
                    ) -> Instance:
    """A small random instance: a 2-GPU fast node, a 1-GPU fast node and a 2-GPU slow node;
    jobs of 1 or 2 GPUs with times of a few hundred seconds."""
    rng = np.random.default_rng(seed)
    cluster = Cluster((GpuType("fast"), GpuType("slow")),
                      (Node("f0", "fast", 2), Node("f1", "fast", 1), Node("s0", "slow", 2)))
    rows = []
    for job_type in JOB_TYPES:
        fast = float(rng.integers(5, 20))
        slow = float(rng.integers(2, 15))  # for some job types "slow" is as fast
        for gpu_type, speed in (("fast", fast), ("slow", slow)):
            rows.append((job_type, gpu_type, 1, Placement.PACKED, speed))
            rows.append((job_type, gpu_type, 2, Placement.PACKED, round(speed * 1.7, 2)))
            rows.append((job_type, gpu_type, 2, Placement.SPREAD, round(speed * 1.2, 2)))
    table = ThroughputTable.from_rows(rows)
    job_list = []
    for index in range(jobs):
        arrival = float(rng.integers(0, 200)) if arrivals else 0.0
        gang = int(rng.integers(1, 3)) if gangs else 1
        counts = (1, 2) if elastic and rng.random() < 0.3 else None
        if counts is not None:
            gang = 1
        work = float(rng.integers(1000, 6000))
        deadline = arrival + float(rng.integers(150, 900)) if deadlines and rng.random() < 0.5 \
            else None
        weight = float(rng.integers(1, 4)) if weights else 1.0
        job_list.append(Job(f"j{index}", arrival, str(rng.choice(JOB_TYPES)), gang, work,
                            deadline=deadline, weight=weight, user=f"u{index % 2}",
                            allowed_gpu_counts=counts))
    return Instance(cluster, tuple(job_list), table, name=f"random-{seed}")


# --- instance documents ------------------------------------------------------------------

#: Two single-GPU nodes: the 2-GPU job "wide" runs only spread, which fifo can do and the
#: deadline and allox models cannot (they run gangs packed on one node).
SPREAD_ONLY = {
    "gpu_types": [{"name": "v100"}],
    "nodes": [{"name": "a", "gpu_type": "v100", "num_gpus": 1},
              {"name": "b", "gpu_type": "v100", "num_gpus": 1}],
    "jobs": [{"id": "small", "arrival": 0, "job_type": "cnn", "num_gpus": 1, "work": 100},
             {"id": "wide", "arrival": 0, "job_type": "cnn", "num_gpus": 2, "work": 150}],
    "throughput": [
        {"job_type": "cnn", "gpu_type": "v100", "num_gpus": 1, "placement": "packed",
         "throughput": 10},
        {"job_type": "cnn", "gpu_type": "v100", "num_gpus": 2, "placement": "spread",
         "throughput": 15}],
}


# --- a profile generated exactly by the throughput model ----------------------------------

PACKED, SPREAD = Placement.PACKED, Placement.SPREAD
COUNTS = (1, 2, 4, 8, 16)

#: Compute time per step (s) of three batch sizes of one network on one GPU type.
COMPUTE = {"net (batch size 16)": 0.10, "net (batch size 32)": 0.18, "net (batch size 64)": 0.35}
#: Family overhead per placement: beta (s) and gamma (s per s of step time) for the
#: features log2 n and (n-1)/n.
BETA = {PACKED: (0.004, 0.010), SPREAD: (0.020, 0.050)}
GAMMA = {PACKED: (0.030, 0.000), SPREAD: (0.100, 0.200)}


def step_time(job: str, count: int, placement: Placement) -> float:
    """The generating model: seconds per step of ``job`` on ``count`` GPUs of "g"."""
    phi = (math.log2(count), (count - 1) / count)
    a = COMPUTE[job]
    return a + sum((b + c * a) * f for b, c, f in
                   zip(BETA[placement], GAMMA[placement], phi, strict=True))


def synthetic_profile(counts: tuple[int, ...] = COUNTS,
                      drop: set[tuple[str, int, Placement]] | None = None) -> Profile:
    """Throughputs generated exactly by the model (no noise, no count anomalies)."""
    drop = drop or set()
    points = []
    for job in COMPUTE:
        points.append(ProfilePoint(job, "g", 1, PACKED, 1 / step_time(job, 1, PACKED)))
        for placement in Placement:
            for n in counts:
                if n > 1 and (job, n, placement) not in drop:
                    points.append(ProfilePoint(job, "g", n, placement,
                                               n / step_time(job, n, placement)))
    return Profile(tuple(points))


# --- benches on two engines, and cells that fail on purpose (tests/bench) ---------------

#: The cluster of :func:`engine_trace`.
ENGINE_CLUSTER = "v100=4,k80=4"


def engine_trace(folder: Path, jobs: int = 30) -> Path:
    """A synthetic trace of ``jobs`` jobs on 4 V100 + 4 K80 (ms per replay), in ``folder``."""
    from hetsched.files.generate import GeneratorSettings, generate
    from hetsched.files.traces import write_native

    folder.mkdir(parents=True, exist_ok=True)
    instance = generate(GeneratorSettings(jobs=jobs, gpus={"v100": 4, "k80": 4}, seed=0))
    path = folder / "trace.csv"
    write_native(instance.jobs, path)
    return path


def engine_bench(trace: Path, **changes: object) -> BenchSettings:
    """A bench of :func:`engine_trace` for comparing engines: fifo, srtf, gavel, and gavel
    with POP's 2 partitions (``gavel-pop2``), seeds 0 and 1 (half of the jobs get a
    deadline the seed draws), load 1, no LP bound; ``changes`` override fields."""
    from hetsched.bench.settings import PolicyVariant

    return native_bench(trace, **{
        "cluster": ENGINE_CLUSTER, "policies": ("fifo", "srtf", "gavel", "gavel-pop2"),
        "variants": (PolicyVariant("gavel-pop2", "gavel", (("partitions", 2),)),),
        "seeds": (0, 1), "loads": (1.0,), "time_limit_s": 0.1, "deadline_fraction": 0.5,
        "lp_bound": False, **changes})


def set_faults(trace: Path, **which: str) -> None:
    """Make :func:`faulty_runner` fail the cells ``which`` names (cell -> fault)."""
    import json

    (trace.parent / FAULTS).write_text(json.dumps(which))


#: The file beside a bench's trace that says which cells fail and how (cell name ->
#: "fail-once", "die-once" or "always"), read by :func:`faulty_runner`.
FAULTS = "faults.json"


def faulty_runner(cell: Cell, inputs: ReplayInputs, trace: Trace,
                  executor: Executor | None) -> ReplayResult:
    """A bench runner (hetsched.bench.engine.run_cell) that fails the cells named in
    ``faults.json`` beside the trace, deterministically: each attempt of such a cell
    leaves a marker file ``<cell>.attempt-<n>`` there (so attempts are counted across
    worker processes and Ray workers), and "fail-once" raises on the first attempt,
    "die-once" ends its worker process on the first attempt (a lost task), "always"
    raises on every attempt. Other cells, and later attempts, run as usual."""
    import json
    import os

    from hetsched.bench.engine import run_cell

    folder = Path(inputs.trace_path).parent
    faults = json.loads((folder / FAULTS).read_text()) if (folder / FAULTS).is_file() else {}
    fault = faults.get(cell.name)
    if fault is not None:
        attempt = 1 + len(list(folder.glob(f"{cell.name}.attempt-*")))
        (folder / f"{cell.name}.attempt-{attempt}").touch()
        if fault == "always" or (fault == "fail-once" and attempt == 1):
            raise RuntimeError(f"{cell.name} fails on purpose (attempt {attempt})")
        if fault == "die-once" and attempt == 1:
            os._exit(3)
    return run_cell(cell, inputs, trace, executor)


def attempts(folder: Path, cell: str) -> int:
    """How many times :func:`faulty_runner` started ``cell`` of the trace in ``folder``."""
    return len(list(folder.glob(f"{cell}.attempt-*")))


#: The wall-clock and CPU-time columns of results.csv: the only ones two runs of a bench
#: may differ in.
TIMING_COLUMNS = frozenset({"wall_time_s", "decision_time_p50_s", "decision_time_p95_s",
                            "decision_time_max_s", "cpu_time_s"})


def same_results(one: Path, other: Path) -> None:
    """Fail unless two bench folders hold the same rows of results.csv cell for cell (the
    wall-clock columns aside) and byte-identical run files (summary.json, jobs.csv,
    decisions.csv)."""
    import csv

    def rows(folder: Path) -> dict[tuple[str, str, str], dict[str, str]]:
        with (folder / "results.csv").open(newline="") as handle:
            return {(r["policy"], r["seed"], r["load"]): r for r in csv.DictReader(handle)}

    mine, theirs = rows(one), rows(other)
    assert sorted(mine) == sorted(theirs)
    for key, row in mine.items():
        assert {c: v for c, v in row.items() if c not in TIMING_COLUMNS} == \
            {c: v for c, v in theirs[key].items() if c not in TIMING_COLUMNS}, key
        run = f"{key[0]}-s{key[1]}-l{key[2]}"
        for name in ("summary.json", "jobs.csv", "decisions.csv"):
            assert (one / "runs" / run / name).read_bytes() == \
                (other / "runs" / run / name).read_bytes(), (run, name)


def gangs_instance(jobs: int = 30, seed: int = 7) -> Instance:
    """Where CP-SAT once ended worse than its start plan: 4-GPU gangs on two GPU types
    (two 4-GPU nodes each), jobs arriving every ~2 minutes with deadlines so loose that
    every plan meets them."""
    rng = np.random.default_rng(seed)
    cluster = Cluster((GpuType("fast"), GpuType("slow")),
                      (Node("f0", "fast", 4), Node("f1", "fast", 4), Node("s0", "slow", 4),
                       Node("s1", "slow", 4)))
    rows = []
    for name, fast, slow in (("cnn", 4.0, 1.2), ("lm", 3.0, 1.5), ("rec", 2.0, 1.8)):
        rows += [(name, "fast", 4, Placement.PACKED, fast), (name, "slow", 4,
                                                              Placement.PACKED, slow)]
    table = ThroughputTable.from_rows(rows)
    arrival = 0.0
    job_list = []
    for index in range(jobs):
        arrival += float(rng.exponential(120.0))
        job_list.append(Job(f"j{index}", round(arrival, 1), str(rng.choice(["cnn", "lm", "rec"])),
                            4, float(rng.integers(2000, 20000)), deadline=arrival + 400_000))
    return Instance(cluster, tuple(job_list), table, name="gangs")


# --- errors that name where -------------------------------------------------------------


def raises_input_error(call: Callable[[], object], starts: str,
                       pieces: Iterable[str]) -> InputError:
    """The :class:`InputError` ``call()`` raises, its message asserted to start with
    ``starts`` and to hold every one of ``pieces``."""
    with pytest.raises(InputError) as caught:
        call()
    message = str(caught.value)
    assert message.startswith(starts), message
    for piece in pieces:
        assert piece in message, message
    return caught.value


# --- small benches --------------------------------------------------------------------

#: The built-in catalogue's job types that :func:`catalogue_trace` takes in turn.
CATALOGUE_KINDS = ("image-cnn-small", "rnn-lm", "recommender", "transformer-lm")


def catalogue_trace(path: Path, jobs: int, every_s: float, work: float,
                    deadline_s: float | None = None) -> Path:
    """A native trace at ``path`` of ``jobs`` jobs of :data:`CATALOGUE_KINDS` in turn, one
    every ``every_s``, of 1 and 2 GPUs in turn and ``work`` + 0, 1,500 or 3,000 steps in
    turn; every second job due ``deadline_s`` after its arrival (None: no deadlines)."""
    from hetsched.files.traces import write_native

    write_native([Job(f"j{i}", every_s * i, CATALOGUE_KINDS[i % 4], 1 + (i % 2),
                      work + 1500 * (i % 3),
                      deadline=every_s * i + deadline_s if deadline_s is not None and i % 2
                      else None) for i in range(jobs)], path)
    return path


def native_bench(trace: Path, **values: object) -> BenchSettings:
    """A bench of the native trace ``trace`` on one worker; ``values`` set the other
    fields (hetsched.bench.settings.bench_settings)."""
    from hetsched.bench.settings import bench_settings

    return bench_settings(**{"trace": trace, "trace_format": "native", "workers": 1, **values})


@dataclass(frozen=True)
class FaultyBench:
    """A bench run by :func:`faulty_bench`: its outcome, what it printed, and how many
    times each cell given a fault was started."""

    outcome: BenchOutcome
    printed: str
    attempts: dict[str, int]


def faulty_bench(trace: Path, out: Path, engine: Callable[..., Engine], workers: int,
                 **faults: str) -> FaultyBench:
    """:func:`engine_bench` of ``trace`` run into ``out`` on ``engine(workers=workers,
    runner=faulty_runner)``, the cells of ``faults`` failing as :func:`set_faults` says
    (none given: no cell fails)."""
    import io

    from hetsched.bench.runner import run_bench

    set_faults(trace, **faults)
    stream = io.StringIO()
    outcome = run_bench(engine_bench(trace), out, report=False, stream=stream,
                        engine=engine(workers=workers, runner=faulty_runner))
    return FaultyBench(outcome, stream.getvalue(),
                       {cell: attempts(trace.parent, cell) for cell in faults})


# --- reference solutions by brute force or scipy ---------------------------------------


def best_worth(problem: RoundProblem, choices: Iterable[np.ndarray]) -> float:
    """The best worth of a round ``problem`` over the feasible ``choices`` (masks of its
    options), 0 at least (choosing nothing)."""
    best = 0.0
    for chosen in choices:
        if problem.feasible(chosen):
            best = max(best, problem.worth(chosen))
    return best


def allocation_problem(throughput: list[list[float]], gangs: list[float], capacity: list[float],
                       weights: list[float] | None = None) -> AllocationProblem:
    """An allocation problem of jobs j0, j1, ... on GPU types t0, t1, ...: ``throughput``
    per job and type (steps/s), each job's gang (GPUs), each type's GPUs, the jobs'
    weights (default 1)."""
    from hetsched.formulations.gavel.problem import AllocationProblem

    jobs = len(gangs)
    return AllocationProblem(tuple(f"j{i}" for i in range(jobs)),
                             tuple(f"t{k}" for k in range(len(capacity))),
                             np.array(throughput, dtype=float), np.array(gangs, dtype=float),
                             np.array(capacity, dtype=float),
                             np.ones(jobs) if weights is None else np.array(weights, dtype=float))


def per_job_rows(problem: AllocationProblem
                 ) -> tuple[np.ndarray, np.ndarray, list[tuple[float, float]]]:
    """Gavel's constraints, one variable per (job, type) (row-major), for scipy:
    ``sum_k x_jk <= 1``, ``sum_j s_j x_jk <= C_k``, ``0 <= x <= 1`` (0 where T = 0)."""
    jobs, types = problem.throughput.shape
    rows, bounds = [], []
    for j in range(jobs):
        row = np.zeros(jobs * types)
        row[j * types:(j + 1) * types] = 1.0
        rows.append(row)
        bounds.append(1.0)
    for k in range(types):
        row = np.zeros(jobs * types)
        row[k::types] = problem.scale_factors
        rows.append(row)
        bounds.append(problem.capacity[k])
    upper = [(0.0, 0.0 if problem.throughput[j, k] <= 0 else 1.0)
             for j in range(jobs) for k in range(types)]
    return np.array(rows), np.array(bounds), upper


def speed_rows(problem: AllocationProblem, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``-sum_k T_jk x_jk <= -need_j`` for every job (as scipy's ``A_ub``)."""
    jobs, types = problem.throughput.shape
    rows = np.zeros((jobs, jobs * types))
    for j in range(jobs):
        rows[j, j * types:(j + 1) * types] = -problem.throughput[j]
    return rows, -need


def least_feasible(problem: AllocationProblem, need: Callable[[float], np.ndarray | None],
                   halvings: int) -> float:
    """The least value v > 0 at which an allocation of ``problem`` gives every job at least
    ``need(v)`` steps/s (None: none does), by scipy's LP on :func:`per_job_rows`: 1 doubled
    until one does, then ``halvings`` bisections; the upper end."""
    from scipy.optimize import linprog

    rows, bounds, upper = per_job_rows(problem)

    def reached(value: float) -> bool:
        floor = need(value)
        if floor is None:
            return False
        speed, minus_floor = speed_rows(problem, floor)
        found = linprog(np.zeros(rows.shape[1]), A_ub=np.vstack([rows, speed]),
                        b_ub=np.concatenate([bounds, minus_floor]), bounds=upper,
                        method="highs")
        return bool(found.status == 0)

    low, high = 0.0, 1.0
    while not reached(high):
        high *= 2
    for _ in range(halvings):
        middle = (low + high) / 2
        low, high = (low, middle) if reached(middle) else (middle, high)
    return high
