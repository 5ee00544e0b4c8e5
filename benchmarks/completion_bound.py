"""The time-indexed LP lower bound on the average JCT, measured on
the bench's job sets.

Inputs: the jobs ``benchmarks/bench_policies.py`` replays with seed 0 (Gavel's
``ee9e8c`` and ``6214e9`` traces, the first 1,000 jobs, half with a synthetic deadline,
which the bound ignores), read as the replays read them
(``hetsched.files.replay_inputs.trace_jobs``:
measured throughput, arrivals scaled by the load), on 36 V100 + 36 P100 + 36 K80, loads
0.5 and 1; then 2,000 jobs, for the time. For each: the LP's size (grid intervals,
blocks, columns, rows, tangent cuts), build and HiGHS time, the bound on the average JCT
against the isolated bound (``avg JCT >= mean isolated duration``) and against the best
average JCT the bench measured (``benchmarks/results/bench/bench_policies.csv``, mean
over seeds; how far the best policy is from the bound). Times are wall clock on a
shared 2-core machine (one HiGHS thread).

Prints a table and writes ``benchmarks/results/completion_bound.csv``.

    python benchmarks/completion_bound.py                  # both traces, 1,000 and 2,000
    python benchmarks/completion_bound.py --jobs 1000 --traces ee9e8c --loads 1
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import time
from pathlib import Path

from hetsched.core.settings import ReplaySettings
from hetsched.files.cluster_spec import parse_cluster
from hetsched.files.replay_inputs import trace_jobs
from hetsched.formulations.completion import CompletionBoundSettings, completion_bound

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "gavel" / "traces"
BENCH = ROOT / "benchmarks" / "results" / "bench" / "bench_policies.csv"
OUT = ROOT / "benchmarks" / "results" / "completion_bound.csv"
CLUSTER = "v100=36,p100=36,k80=36"


def best_policies(path: Path) -> dict[tuple[str, str], tuple[str, float]]:
    """(trace, load) -> (policy, mean avg JCT over seeds) of the lowest mean in the
    bench's combined CSV (its 1,000-job runs)."""
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    values: dict[tuple[str, str, str], list[float]] = {}
    for row in rows:
        if row.get("avg_jct_s") and row.get("completed") == row.get("jobs"):
            key = (Path(row.get("trace", "")).stem, f"{float(row['load']):g}", row["policy"])
            values.setdefault(key, []).append(float(row["avg_jct_s"]))
    best: dict[tuple[str, str], tuple[str, float]] = {}
    for (trace, load, policy), jcts in values.items():
        mean = sum(jcts) / len(jcts)
        if (trace, load) not in best or mean < best[(trace, load)][1]:
            best[(trace, load)] = (policy, mean)
    return best


def main() -> None:
    """Measure every (trace, jobs, load) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="ee9e8c,6214e9")
    parser.add_argument("--jobs", default="1000,2000")
    parser.add_argument("--loads", default="0.5,1")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    cluster = parse_cluster(CLUSTER)
    settings = CompletionBoundSettings(weighted=False)
    best = best_policies(BENCH)
    table: list[dict[str, object]] = []
    header = (f"{'trace':7} {'jobs':>5} {'load':>4} {'interv':>6} {'blocks':>6} "
              f"{'columns':>7} {'rows':>6} {'cuts':>5} {'build s':>7} {'LP s':>6} "
              f"{'isolated h':>10} {'LP h':>7} {'LP/iso':>6} {'best h':>7} {'best/LP':>7}"
              "  best policy, status")
    print(header)
    for jobs in (int(n) for n in args.jobs.split(",")):
        for trace in args.traces.split(","):
            for load in (float(v) for v in args.loads.split(",")):
                read = trace_jobs(DATA / f"{trace}.trace", "gavel", cluster,
                                  settings=ReplaySettings(seed=0, limit_jobs=jobs,
                                                          deadline_fraction=0.5, load=load))
                began = time.perf_counter()
                bound = completion_bound(read.jobs, cluster, read.truth, settings=settings)
                wall = time.perf_counter() - began
                policy, best_jct = best.get((trace, f"{load:g}"), ("", math.nan)) \
                    if jobs == 1000 else ("", math.nan)
                row: dict[str, object] = {
                    "trace": trace, "jobs": bound.jobs, "load": load, "cluster": CLUSTER,
                    "intervals": bound.intervals, "blocks": bound.blocks,
                    "columns": bound.columns, "rows": bound.rows, "cuts": bound.cuts,
                    "extensions": bound.extensions, "iterations": bound.iterations,
                    "build_s": round(bound.build_s, 2), "lp_s": round(bound.lp_s, 2),
                    "wall_s": round(wall, 2), "status": bound.status,
                    "isolated_avg_jct_s": round(bound.isolated_avg_jct_s, 1),
                    "lp_avg_jct_s": round(bound.avg_jct_s, 1),
                    "lp_over_isolated": round(bound.avg_jct_over_isolated, 4),
                    "best_policy": policy,
                    "best_avg_jct_s": round(best_jct, 1) if math.isfinite(best_jct) else "",
                    "best_over_lp": round(best_jct / bound.avg_jct_s, 4)
                    if math.isfinite(best_jct) else ""}
                table.append(row)
                print(f"{trace:7} {bound.jobs:5d} {load:4g} {bound.intervals:6d} "
                      f"{bound.blocks:6d} {bound.columns:7d} {bound.rows:6d} "
                      f"{bound.cuts:5d} {bound.build_s:7.1f} {bound.lp_s:6.1f} "
                      f"{bound.isolated_avg_jct_s / 3600:10.2f} "
                      f"{bound.avg_jct_s / 3600:7.2f} {bound.avg_jct_over_isolated:6.3f} "
                      f"{best_jct / 3600:7.2f} {best_jct / bound.avg_jct_s:7.3f}  "
                      f"{policy or '-'}, {bound.status}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, list(table[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
