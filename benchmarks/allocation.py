"""Gavel's allocation LPs at cluster scale, and POP.

Inputs: the first n jobs of Gavel's ``ee9e8c.trace`` (then the other 14 Gavel traces, in
name order, then again from the start), throughputs from Gavel's
``simulation_throughputs.json`` (packed placement), n/4 GPUs of each of v100, p100 and
k80, weights 1: the setting where Gavel's own code (cvxpy + ECOS)
measured 0.014 / 0.043 / 0.133 s (max-min) and 0.013 / 0.041 / 0.090 s (max-sum) at
100 / 500 / 2,000 jobs.

Solvers, each timed as the median of ``--repeats`` cold solves from a built
``AllocationProblem`` to an ``Allocation`` (so building the LP counts):

* ``classes``: hetsched's LP as arrays over job classes on HiGHS (what ``gavel`` uses);
* ``per-job``: the same arrays with one row per job (the form Gavel solves);
* ``pulp``: the readable PuLP model on HiGHS (hetsched's LP before this benchmark; a
  peer measured in the same run), up to ``--pulp-max`` jobs;
* ``cvxpy-ecos``: the same LP written in cvxpy and solved by ECOS, the toolchain of
  Gavel's code (only if cvxpy and ecos are installed: ``pip install cvxpy ecos``), up to
  ``--pulp-max`` jobs; max-min as one stage, like Gavel's;
* ``pop-K``: POP with K partitions (``PartitionedSolver``, per-job sub-problems, solved in
  this process), with the objective it reaches over the monolithic optimum;
  ``pop-K-hash`` (``--plain``): POP's plain hash partition instead of the stratified one;
  ``pop-K-poolP``: the same solved in a process pool of P workers (``--pool``, 2 on this
  2-core machine; the pool is started before the timing, the problems are shipped to
  it at every solve).

Every solver's objective is compared with the ``classes`` optimum (``objective_ratio``).
Prints a table and writes ``benchmarks/results/allocation.csv`` (``--quick``:
``allocation_quick.csv``).

    python benchmarks/allocation.py --quick      # 100, 500, 2,000 jobs (~1 min)
    python benchmarks/allocation.py              # up to 50,000 jobs, POP k = 4, 8, 16
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np
from common import DATA, RESULTS, ROOT, write_csv

from hetsched.core.throughput import Placement
from hetsched.formulations.gavel import (
    Allocation,
    AllocationProblem,
    AllocationSolver,
    GavelLp,
    Objective,
    PartitionedSolver,
)

GAVEL = DATA / "gavel"
TYPES = ("v100", "p100", "k80")
#: Gavel's own code (cvxpy + ECOS) at these sizes (s), for the printed comparison.
GAVEL_REFERENCE = {("max-min", 100): 0.014, ("max-min", 500): 0.043,
                   ("max-min", 2000): 0.133, ("max-sum", 100): 0.013,
                   ("max-sum", 500): 0.041, ("max-sum", 2000): 0.090}
COLUMNS = ("objective", "jobs", "classes", "solver", "median_s", "build_s", "highs_s",
           "runs", "objective_value", "objective_ratio", "gavel_reference_s",
           "ratio_to_gavel", "load_avg_1min", "commit")


def problem(jobs: int) -> AllocationProblem:
    """The benchmark's allocation problem with ``jobs`` active jobs (see the module)."""
    from hetsched.files.replay_inputs import throughput_pair
    from hetsched.files.traces import read_trace

    truth, _ = throughput_pair(GAVEL / "simulation_throughputs.json")
    traces = [GAVEL / "traces" / "ee9e8c.trace",
              *sorted(p for p in (GAVEL / "traces").glob("*.trace") if p.name != "ee9e8c.trace")]
    shapes: list[tuple[str, int]] = []
    for path in traces:
        shapes += [(job.job_type, job.num_gpus)
                   for job in read_trace(path, "gavel", throughput=truth, gpu_types=TYPES).jobs]
        if len(shapes) >= jobs:
            break
    shapes = (shapes * (jobs // len(shapes) + 1))[:jobs]
    speed: dict[tuple[str, int], list[float]] = {}
    for shape in set(shapes):
        row = []
        for gpu_type in TYPES:
            try:
                row.append(float(truth.throughput(shape[0], gpu_type, shape[1],
                                                  Placement.PACKED)))
            except Exception:  # not measured on this type
                row.append(0.0)
        speed[shape] = row
    return AllocationProblem(tuple(f"job{j}" for j in range(jobs)), TYPES,
                             np.array([speed[s] for s in shapes]),
                             np.array([float(s[1]) for s in shapes]),
                             np.full(len(TYPES), jobs / 4), np.ones(jobs))


def cvxpy_solve(problem: AllocationProblem, objective: Objective) -> float:
    """The same LP in cvxpy on ECOS (Gavel's toolchain); max-min in one stage, as Gavel
    solves it. Its objective value."""
    import cvxpy as cp

    x = cp.Variable(problem.throughput.shape)
    equal = problem.equal_share_throughput()
    scaled = problem.throughput / equal[:, None]
    mask = (problem.throughput > 0).astype(float)
    constraints = [x >= 0, cp.multiply(1 - mask, x) == 0, cp.sum(x, axis=1) <= 1,
                   problem.scale_factors @ x <= problem.capacity]
    rho = cp.multiply(problem.scale_factors / problem.weights, cp.sum(cp.multiply(scaled, x),
                                                                      axis=1))
    goal = cp.min(rho) if objective is Objective.MAX_MIN else cp.sum(
        cp.sum(cp.multiply(scaled, x), axis=1))
    program = cp.Problem(cp.Maximize(goal), constraints)
    program.solve(solver=cp.ECOS)
    return float(program.value)


def timed(run: Callable[[], float], repeats: int) -> tuple[float, float]:
    """The median wall time (s) of ``repeats`` calls, and the last call's value."""
    times, value = [], float("nan")
    for _ in range(repeats):
        began = time.perf_counter()
        value = run()
        times.append(time.perf_counter() - began)
    return statistics.median(times), value


def measure(jobs: int, objective: Objective, args: argparse.Namespace) -> list[dict[str, object]]:
    """Every solver's row at one size and objective."""
    instance = problem(jobs)
    rows: list[dict[str, object]] = []
    repeats = args.repeats if jobs <= 10_000 else max(1, args.repeats // 2)

    def row(solver: str, median_s: float, value: float, **extra: object) -> None:
        reference = GAVEL_REFERENCE.get((objective.value, jobs))
        rows.append({"objective": objective.value, "jobs": jobs, "solver": solver,
                     "median_s": round(median_s, 5), "runs": repeats,
                     "objective_value": value, "gavel_reference_s": reference,
                     "ratio_to_gavel": round(median_s / reference, 3) if reference else None,
                     **extra})

    for name, by_class in (("classes", True), ("per-job", False)):
        if not by_class and jobs > args.per_job_max:
            continue
        solver = AllocationSolver(objective, by_class=by_class, warm_start=False)
        builds: list[float] = []
        inside: list[float] = []

        def once(solver: AllocationSolver = solver, builds: list[float] = builds,
                 inside: list[float] = inside) -> float:
            result: Allocation = solver.solve(instance)
            builds.append(solver.last_timing.build_s)
            inside.append(solver.last_timing.highs_s)
            return result.value

        median_s, value = timed(once, repeats)
        row(name, median_s, value, build_s=round(statistics.median(builds), 5),
            highs_s=round(statistics.median(inside), 5),
            classes=len(np.unique(np.column_stack(
                [instance.throughput, instance.scale_factors]), axis=0)))
    if jobs <= args.pulp_max:
        median_s, value = timed(lambda: GavelLp(instance, objective).solve("highs").value,
                                repeats)
        row("pulp", median_s, value)
        if importlib.util.find_spec("cvxpy") and importlib.util.find_spec("ecos"):
            median_s, value = timed(lambda: cvxpy_solve(instance, objective), repeats)
            row("cvxpy-ecos", median_s, value)
    for k in args.partitions:
        if jobs < 100 * k:
            continue
        variants = [(f"pop-{k}", True, None)]
        if args.plain:
            variants.append((f"pop-{k}-hash", False, None))
        for name, stratified, workers in [*variants, (f"pop-{k}-pool{args.pool}", True,
                                                      args.pool or None)]:
            if name.endswith("pool0"):
                continue
            with ProcessPoolExecutor(workers) if workers else nullcontext() as pool:

                def once(stratified: bool = stratified, pool: Executor | None = pool,
                         k: int = k) -> float:
                    # a new solver each time: every solve is cold, as in the other rows
                    return PartitionedSolver(objective, k, by_class=False, compare=False,
                                             stratified=stratified, executor=pool
                                             ).solve(instance).allocation.value

                if pool is not None:
                    once()  # start the workers before timing
                median_s, value = timed(once, repeats)
            row(name, median_s, value)
    best = next(r["objective_value"] for r in rows if r["solver"] == "classes")
    for item in rows:
        value = float(item["objective_value"])  # type: ignore[arg-type]
        item["objective_ratio"] = round(value / float(best), 6)  # type: ignore[arg-type]
    return rows


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100, 500 and 2,000 jobs only")
    parser.add_argument("--sizes", default=None, help="comma-separated job counts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--partitions", default="4,8,16",
                        help="POP's k values (at sizes >= 100 k and >= 10,000 jobs)")
    parser.add_argument("--pulp-max", type=int, default=2000,
                        help="largest size for the pulp and cvxpy peers")
    parser.add_argument("--per-job-max", type=int, default=50_000)
    parser.add_argument("--plain", action="store_true",
                        help="also POP with the plain hash partition (pop-K-hash)")
    parser.add_argument("--pool", type=int, default=2,
                        help="also POP in a process pool of this many workers (0: not)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not (GAVEL / "simulation_throughputs.json").is_file():
        print(f"needs Gavel's data in {GAVEL} (../shared/data beside the project)",
              file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [100, 500, 2000] if args.quick else [100, 500, 2000, 10_000, 50_000])
    partitions = [int(k) for k in args.partitions.split(",") if k]
    args.partitions = partitions
    out = args.out or RESULTS / ("allocation_quick.csv" if args.quick else "allocation.csv")
    rows: list[dict[str, object]] = []
    print(f"{'objective':9} {'jobs':>6} {'solver':11} {'median s':>9} {'build s':>8} "
          f"{'HiGHS s':>8} {'Gavel s':>8} {'x Gavel':>8} {'objective':>10}")
    for jobs in sizes:
        for objective in Objective:
            measured = measure(jobs, objective, argparse.Namespace(
                repeats=args.repeats, pulp_max=args.pulp_max, per_job_max=args.per_job_max,
                pool=args.pool, plain=args.plain,
                partitions=[k for k in partitions if jobs >= 10_000]))
            for item in measured:
                item["load_avg_1min"] = round(os.getloadavg()[0], 2)
                item["commit"] = _commit()
                print(f"{item['objective']!s:9} {jobs:>6} {item['solver']!s:11} "
                      f"{item['median_s']:>9.4f} {_cell(item.get('build_s'))} "
                      f"{_cell(item.get('highs_s'))} {_cell(item.get('gavel_reference_s'))} "
                      f"{_cell(item.get('ratio_to_gavel'), '.2f')} "
                      f"{float(item['objective_ratio']):>10.6f}", flush=True)  # type: ignore[arg-type]
            rows += measured
    write_csv(out, rows, COLUMNS)
    return 0


def _cell(value: object, spec: str = ".4f") -> str:
    return f"{'':>8}" if value is None else f"{float(value):>8{spec}}"  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
