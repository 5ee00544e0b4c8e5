"""Fit the throughput model to Gavel's measured table: accuracy, ablations and time.

Prints and writes a CSV (one row per experiment) of:
- the leave-one-out (LOO) error of the naive per-series NNLS baselines and of each
  step from them to the chosen model (pooling, weights, covariate, corrections),
- the chosen model with other feature sets (how the features were picked),
- what the model cannot see: every point at one GPU count held out at once
  (interpolation to 2 or 4, extrapolation to 8), a series' every multi-GPU point held out
  (the family-shape fallback), and the transfers the model deliberately does not make
  (another family's shape, the other placement, another GPU type),
- the time to read the table, fit it, and run the LOO.

Usage: python benchmarks/fit_gavel.py [GAVEL_JSON] [--csv OUT.csv] [--repeat N]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hetsched.core.throughput import Placement
from hetsched.speeds.fit import fit_throughput_model
from hetsched.speeds.leave_one_out import leave_one_out
from hetsched.speeds.model import FitSettings, Pooling
from hetsched.speeds.profiles import Profile, read_gavel_throughputs

ROOT = Path(__file__).resolve().parent.parent
GAVEL = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
FIELDS = ("experiment", "detail", "points", "median_ape", "p90_ape", "mean_ape", "max_ape",
          "runtime_s")


def figures(experiment: str, detail: str, apes: list[float], runtime: float) -> dict[str, object]:
    """One CSV row: error statistics (%) of ``apes`` and a runtime (s)."""
    values = np.array(apes, dtype=np.float64)
    return {"experiment": experiment, "detail": detail, "points": len(values),
            "median_ape": round(float(np.median(values)), 3),
            "p90_ape": round(float(np.percentile(values, 90)), 3),
            "mean_ape": round(float(values.mean()), 3), "max_ape": round(float(values.max()), 3),
            "runtime_s": round(runtime, 4)}


def loo_row(experiment: str, detail: str, profile: Profile,
            settings: FitSettings) -> dict[str, object]:
    report = leave_one_out(profile, settings)
    return figures(experiment, detail, [p.ape for p in report.points], report.runtime_s)


def hold_out_count(profile: Profile, count: int,
                   settings: FitSettings) -> list[dict[str, object]]:
    """Every point at ``count`` GPUs held out at once; the model never saw that count.
    Two rows: the model as it is (no count correction at an unmeasured count), and the
    alternative it rejects: the corrections of the neighbouring measured counts
    interpolated in log2 n (carried forward beyond the largest)."""
    started = time.perf_counter()
    held = [p for p in profile.points if p.num_gpus == count and p.throughput > 0]
    model = fit_throughput_model(
        Profile(tuple(p for p in profile.points if p.num_gpus != count)), settings)
    plain, interpolated = [], []
    for point in held:
        predicted = model.throughput(*point.key)
        corrections = model.series[(point.job_type, point.gpu_type, point.placement)].corrections
        below = [(n, f) for n, f in corrections if n < count]
        above = [(n, f) for n, f in corrections if n > count]
        factor = 1.0
        if below and above:
            (n0, f0), (n1, f1) = below[-1], above[0]
            weight = (np.log2(count) - np.log2(n0)) / (np.log2(n1) - np.log2(n0))
            factor = float(np.exp(np.log(f0) + weight * (np.log(f1) - np.log(f0))))
        elif below:
            factor = below[-1][1]
        plain.append(100 * abs(predicted - point.throughput) / point.throughput)
        interpolated.append(100 * abs(predicted * factor - point.throughput) / point.throughput)
    runtime = time.perf_counter() - started
    return [figures("hold out a GPU count", f"all {count}-GPU points", plain, runtime),
            figures("hold out a GPU count", f"all {count}-GPU, corrections interpolated",
                    interpolated, runtime)]


def hold_out_series(profile: Profile, settings: FitSettings) -> dict[str, object]:
    """A series' every multi-GPU point held out at once: the family-shape fallback."""
    started = time.perf_counter()
    apes = []
    series = sorted({(p.job_type, p.gpu_type, p.placement) for p in profile.points
                     if p.num_gpus > 1 and p.throughput > 0})
    for job, gpu, placement in series:
        held = [p for p in profile.points if (p.job_type, p.gpu_type, p.placement) ==
                (job, gpu, placement) and p.num_gpus > 1 and p.throughput > 0]
        rest = Profile(tuple(p for p in profile.points if p not in held))
        model = fit_throughput_model(rest, settings)
        apes += [100 * abs(model.throughput(*p.key) - p.throughput) / p.throughput
                 for p in held]
    return figures("hold out a series", "family-shape fallback", apes,
                   time.perf_counter() - started)


def transfers(profile: Profile) -> list[dict[str, object]]:
    """Errors of shapes the model does not borrow, measured directly on the table:
    another family's relative step time (what a single-GPU-only family would need), the
    other placement's step time times the median spread/packed ratio, and the same job's
    relative step time on another GPU type."""
    speed = {p.key: p.throughput for p in profile.points if p.throughput > 0}
    family = profile.family

    def step(job: str, gpu: str, n: int, placement: Placement) -> float | None:
        value = speed.get((job, gpu, n, placement if n > 1 else Placement.PACKED))
        return n / value if value else None

    held = [key for key in sorted(speed) if key[2] > 1]
    rows = []

    def other_family(key: tuple[str, str, int, Placement]) -> float | None:
        job, gpu, n, placement = key
        ratios = [s / s1 for (j, g, m, p) in speed if g == gpu and m == n and p == placement
                  and family[j] != family[job]
                  for s, s1 in [(step(j, g, m, p), step(j, g, 1, p))] if s and s1]
        base = step(job, gpu, 1, placement)
        return n / (base * statistics.median(ratios)) if ratios and base else None

    def other_placement(key: tuple[str, str, int, Placement]) -> float | None:
        job, gpu, n, placement = key
        flip = Placement.SPREAD if placement is Placement.PACKED else Placement.PACKED
        ratios = [s / o for (j, g, m, p) in speed if g == gpu and m == n and p == placement
                  and family[j] != family[job]
                  for s, o in [(step(j, g, m, p), step(j, g, m, flip))] if s and o]
        base = step(job, gpu, n, flip)
        return n / (base * statistics.median(ratios)) if ratios and base else None

    def other_gpu(key: tuple[str, str, int, Placement]) -> float | None:
        job, gpu, n, placement = key
        ratios = [s / s1 for g in profile.gpu_types if g != gpu
                  for s, s1 in [(step(job, g, n, placement), step(job, g, 1, placement))]
                  if s and s1]
        base = step(job, gpu, 1, placement)
        return n / (base * statistics.median(ratios)) if ratios and base else None

    experiments: dict[str, Callable[[tuple[str, str, int, Placement]], float | None]] = {
        "another family's shape": other_family,
        "the other placement x median ratio": other_placement,
        "the same job on another GPU type": other_gpu,
    }
    for name, predict in experiments.items():
        started = time.perf_counter()
        apes = []
        for key in held:
            predicted = predict(key)
            if predicted is not None:
                apes.append(100 * abs(predicted - speed[key]) / speed[key])
        rows.append(figures("transfer not made", name, apes, time.perf_counter() - started))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gavel", nargs="?", type=Path, default=GAVEL)
    parser.add_argument("--csv", type=Path, default=ROOT / "benchmarks" / "results" /
                        "fit_gavel.csv")
    parser.add_argument("--repeat", type=int, default=10, help="fits to time (median)")
    args = parser.parse_args()

    started = time.perf_counter()
    profile = read_gavel_throughputs(args.gavel)
    read_s = time.perf_counter() - started
    fit_times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        fit_throughput_model(profile)
        fit_times.append(time.perf_counter() - started)
    fit_s = statistics.median(fit_times)

    chosen = FitSettings()
    plain = FitSettings(pooling=Pooling.FAMILY, relative_weights=False,
                        scale_with_step_time=False, count_corrections=False)
    rows = [
        {"experiment": "time", "detail": f"read {args.gavel.name} ({len(profile)} points, "
         f"{len(profile.colocations)} co-location pairs)", "runtime_s": round(read_s, 4)},
        {"experiment": "time", "detail": f"fit the whole table (median of {args.repeat})",
         "runtime_s": round(fit_s, 4)},
    ]
    naive_sets: list[tuple[str, ...]] = [("log2n",), ("ring",), ("log2n", "ring")]
    for features in naive_sets:
        rows.append(loo_row("naive per-series NNLS", "{1, " + ", ".join(features) + "}",
                            profile, FitSettings.naive(features)))
    steps = [
        ("family pooling", plain),
        ("+ relative weights", FitSettings(relative_weights=True, scale_with_step_time=False,
                                           count_corrections=False)),
        ("+ step-time covariate", FitSettings(count_corrections=False)),
        ("+ count corrections (chosen)", chosen),
    ]
    for name, settings in steps:
        rows.append(loo_row("ablation", name, profile, settings))
    feature_sets: list[tuple[str, ...]] = [
        ("log2n",), ("ring",), ("multi", "log2n"), ("multi", "log2n", "ring"),
        ("log2n", "linear"), ("multi", "log2n", "linear")]
    for features in feature_sets:
        rows.append(loo_row("features of the chosen model", "{1, " + ", ".join(features) + "}",
                            profile, FitSettings(features=features)))
    for count in (2, 4, 8):
        rows += hold_out_count(profile, count, chosen)
    rows.append(hold_out_series(profile, chosen))
    rows += transfers(profile)

    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{'experiment':<30} {'detail':<40} {'points':>6} {'median':>7} {'p90':>7} "
          f"{'max':>7} {'time s':>7}")
    for row in rows:
        numbers = " ".join(f"{row[k]:>6.2f}%" if k in row else " " * 7
                           for k in ("median_ape", "p90_ape", "max_ape"))
        print(f"{row['experiment']:<30} {str(row['detail'])[:40]:<40} "
              f"{row.get('points', ''):>6} {numbers} {row['runtime_s']:>7.3f}")
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
