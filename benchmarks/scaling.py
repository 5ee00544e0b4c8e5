"""Scaling of the ``deadline`` and ``allox`` models, their targets, and what
heterogeneity-awareness buys on instances/medium.json.

Writes ``benchmarks/results/scaling.csv`` and ``scaling.png`` and prints the
figures. ``--quick`` runs a small sweep (a few minutes on two cores).

    python benchmarks/scaling.py --quick
    python benchmarks/scaling.py --time-limit 30
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import logging
import math
import time
from collections.abc import Iterable
from pathlib import Path

from hetsched.allocation.realise import left_shift
from hetsched.core.check import check
from hetsched.core.records import Instance
from hetsched.core.result import Result, compute_metrics
from hetsched.core.throughput import Placement
from hetsched.files.generate import GeneratorSettings, generate
from hetsched.files.instance import load_instance
from hetsched.solving import SolveOptions, solve

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
FULL_SIZES = (10, 50, 100, 200, 500, 1000, 2000)
QUICK_SIZES = (10, 50, 100)
#: MILP back-ends build models that grow with jobs^2 (deadline) or jobs x slots
#: (allox); beyond these sizes they are skipped, and the CSV says so.
MILP_MAX_JOBS = {"deadline": 50, "allox": 500}


def instance_for(jobs: int, gpus_per_type: int, seed: int = 0, *, single_gpu: bool = False,
                 all_present: bool = False) -> Instance:
    """A generated instance on 3 GPU types (v100, p100, k80), nodes of 4 GPUs.

    ``single_gpu`` makes every job a one-GPU job (AlloX's exact setting) and
    ``all_present`` sets the current time to the last arrival (a re-solve snapshot).
    """
    settings = GeneratorSettings(jobs=jobs, gpus={"v100": gpus_per_type, "p100": gpus_per_type,
                                                  "k80": gpus_per_type},
                                 seed=seed, mean_interarrival_s=30.0)
    instance = generate(settings)
    if single_gpu:
        instance = instance.replace(jobs=tuple(
            dataclasses.replace(job, num_gpus=1, allowed_gpu_counts=None)
            for job in instance.jobs))
    if all_present:
        instance = instance.replace(now=max(job.arrival for job in instance.jobs))
    return instance.replace(name=f"gen-{jobs}-{3 * gpus_per_type}")


def gpus_per_type(jobs: int) -> int:
    """Cluster size for a sweep point: 32 GPUs per type up to 200 jobs, then growing."""
    return max(4, 4 * math.ceil(32 * max(1.0, jobs / 200) / 4))


def record(model: str, backend: str, instance: Instance, result: Result | None,
           note: str = "") -> dict[str, object]:
    """One CSV row."""
    row: dict[str, object] = {"model": model, "backend": backend, "jobs": len(instance.jobs),
                              "gpus": instance.cluster.num_gpus(), "note": note}
    if result is None:
        return row | {"status": "SKIPPED"}
    violations = check(instance, result.schedule, complete=result.is_feasible())
    row |= {"status": result.status.value, "objective": result.objective,
            "bound": result.bound, "gap": result.gap, "runtime_s": round(result.runtime_s, 3),
            "avg_jct_s": result.metrics.avg_jct_s if result.metrics else None,
            "checker_violations": len(violations)}
    return row


def sweep(sizes: Iterable[int], time_limit: float, threads: int) -> list[dict[str, object]]:
    """Solve time and final gap against the number of jobs, each model x back-end."""
    rows = []
    for jobs in sizes:
        per_type = gpus_per_type(jobs)
        deadline_instance = instance_for(jobs, per_type)
        allox_instance = instance_for(jobs, per_type, single_gpu=True, all_present=True)
        for model, backends, instance in (
            ("deadline", ("cpsat", "highs", "cbc"), deadline_instance),
            ("allox", ("matching", "highs", "cbc"), allox_instance),
        ):
            for backend in backends:
                if backend in ("highs", "cbc") and jobs > MILP_MAX_JOBS[model]:
                    rows.append(record(model, backend, instance, None, "too large for the MILP"))
                    continue
                result = solve(instance, model, SolveOptions(
                    backend=backend, time_limit_s=time_limit, threads=threads))
                rows.append(record(model, backend, instance, result))
                print_row(rows[-1])
    return rows


def print_row(row: dict[str, object]) -> None:
    gap = row.get("gap")
    gap_text = "-" if gap is None else f"{100 * float(str(gap)):.2f}%"
    print(f"{row['model']:9s} {row['backend']:9s} jobs {row['jobs']:5} gpus {row['gpus']:4} "
          f"{row.get('status', ''):10s} obj {row.get('objective', float('nan')):>14.6g} "
          f"gap {gap_text:>8s} time {row.get('runtime_s', '-')!s:>8s} s "
          f"violations {row.get('checker_violations', '-')}", flush=True)


def targets(time_limit: float, threads: int) -> list[dict[str, object]]:
    """The two targets: deadline 200 jobs / 96 GPUs, allox 1000 jobs / 300 GPUs."""
    rows = []
    instance = instance_for(200, 32)
    result = solve(instance, "deadline", SolveOptions(
        backend="cpsat", time_limit_s=time_limit, threads=threads, gap=0.01))
    rows.append(record("deadline", "cpsat", instance, result, "target: 1% gap in <= 30 s"))
    print_row(rows[-1])
    instance = instance_for(1000, 100, single_gpu=True, all_present=True)
    result = solve(instance, "allox", SolveOptions(backend="matching"))
    rows.append(record("allox", "matching", instance, result, "target: exact in <= 10 s"))
    print_row(rows[-1])
    return rows


class SlowestType:
    """A throughput model that gives every GPU type the speed of the slowest type on
    which the job can run (the heterogeneity-agnostic view)."""

    def __init__(self, instance: Instance) -> None:
        self.inner = instance.throughput
        self.types = instance.cluster.type_names

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        speeds = [self.inner.throughput(job_type, t, num_gpus, placement) for t in self.types]
        positive = [s for s in speeds if s > 0]
        if self.inner.throughput(job_type, gpu_type, num_gpus, placement) <= 0 or not positive:
            return 0.0
        return min(positive)


def agnostic(instance: Instance, model: str, backend: str, time_limit: float,
             threads: int) -> float:
    """Average JCT (s) of ``model`` planned as if every type were the slowest, then run
    on the real cluster: same GPUs, same start order, real durations."""
    blind = instance.replace(throughput=SlowestType(instance))
    planned = solve(blind, model,
                    SolveOptions(backend=backend, time_limit_s=time_limit, threads=threads))
    order = sorted(planned.schedule, key=lambda a: (a.start, a.job))
    real = left_shift(instance, [(a.job, a.gpu_type, a.gpus) for a in order])
    assert not check(instance, real)
    return compute_metrics(instance, real).avg_jct_s


def heterogeneity(time_limit: float, threads: int) -> list[dict[str, object]]:
    """Average JCT on medium.json: deadline and allox, aware vs agnostic, and fifo."""
    instance = load_instance(ROOT / "instances" / "medium.json")
    fifo = solve(instance, model="fifo")
    rows = []
    fifo_jct = fifo.metrics.avg_jct_s if fifo.metrics else math.nan
    print(f"medium.json: fifo average JCT {fifo_jct:,.0f} s")
    for model, backend in (("deadline", "cpsat"), ("allox", "matching")):
        aware = solve(instance, model,
                      SolveOptions(backend=backend, time_limit_s=time_limit, threads=threads))
        aware_jct = aware.metrics.avg_jct_s if aware.metrics else math.nan
        blind_jct = agnostic(instance, model, backend, time_limit, threads)
        print(f"medium.json: {model:8s} average JCT {aware_jct:,.0f} s ({aware.status}); "
              f"heterogeneity ignored {blind_jct:,.0f} s; fifo / {model} = "
              f"{fifo_jct / aware_jct:.2f}x; ignored / aware = {blind_jct / aware_jct:.2f}x")
        rows.append(record(model, backend, instance, aware,
                           f"medium: fifo {fifo_jct:.1f} s, agnostic {blind_jct:.1f} s"))
    return rows


def plot(rows: list[dict[str, object]], path: Path) -> None:
    """Solve time and gap against jobs, one line per model x back-end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    series: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        if row.get("status") not in (None, "SKIPPED") and not str(row["note"]):
            series.setdefault(f"{row['model']}/{row['backend']}", []).append(row)
    for label, points in series.items():
        xs = [int(str(p["jobs"])) for p in points]
        left.plot(xs, [float(str(p["runtime_s"])) for p in points], marker="o", label=label)
        right.plot(xs, [100 * float(str(p["gap"])) if p["gap"] is not None else math.nan
                        for p in points], marker="o", label=label)
    for axis, title in ((left, "solve time (s)"), (right, "final gap (%)")):
        axis.set_xscale("log")
        axis.set_xlabel("jobs")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
    left.set_yscale("log")
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sweep, a few minutes")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="per-solve limit in s (default 5 quick, 30 full)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-targets", action="store_true")
    parser.add_argument("--no-heterogeneity", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    limit = args.time_limit or (5.0 if args.quick else 30.0)
    began = time.perf_counter()
    rows = sweep(QUICK_SIZES if args.quick else FULL_SIZES, limit, args.threads)
    if not args.no_targets:
        rows += targets(30.0 if not args.quick else limit, args.threads)
    if not args.no_heterogeneity:
        rows += heterogeneity(limit, args.threads)
    OUT.mkdir(parents=True, exist_ok=True)
    fields = ["model", "backend", "jobs", "gpus", "status", "objective", "bound", "gap",
              "runtime_s", "avg_jct_s", "checker_violations", "note"]
    with (OUT / "scaling.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, OUT / "scaling.png")
    print(f"wrote {OUT / 'scaling.csv'} and {OUT / 'scaling.png'} "
          f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
