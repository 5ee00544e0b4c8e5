"""Space sharing: ``progress-packed`` (two whole one-GPU jobs packed on
one GPU at their measured co-location speeds when the round's MILP finds the pair worth
more) beside plain ``progress`` on Gavel's ee9e8c trace at load 2 on 8 V100 + 8 P100 +
8 K80, with Gavel's table and its 1,881 measured pairs.

For each cell and policy, printed and written to CSV: average and p95 JCT, makespan,
utilisation, jobs started packed, the pairs that ran together (two packed run segments
overlapping on one GPU) and the least measured combined rate among them (the sum of each
job's speed factor beside the other; the target: never 1 or below), and average JCT over
plain ``progress``'s (the target: below 1). Every replay passes the independent checker
(replay_trace() runs it; packed runs are checked at their pair's factors).

    python benchmarks/packing.py --out benchmarks/results/packing.csv
    python benchmarks/packing.py --quick     # 150 jobs, load 2
    python benchmarks/packing.py --plot benchmarks/results/packing.csv   # the plot only

With ``--out``, a bar chart of the average JCTs beside the CSV (``.png``).

Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "data" / "gavel" / "traces"
CLUSTER = "v100=8,p100=8,k80=8"


def packed_pairs(ran: Any) -> list[tuple[str, str, str, float]]:
    """The pairs that ran packed together: (GPU type, job type, job type, measured
    combined rate), one row per overlap of two packed segments on a GPU."""
    jobs = {job_id: record.job for job_id, record in ran.records.items()}
    by_gpu: dict[str, list[Any]] = {}
    for record in ran.records.values():
        for segment in record.segments:
            if segment.packed:
                by_gpu.setdefault(segment.gpus[0], []).append(segment)
    found = []
    for segments in by_gpu.values():
        segments.sort(key=lambda s: s.start)
        for k, one in enumerate(segments):
            for two in segments[k + 1:]:
                if two.start >= one.finish:
                    break
                if two.job != one.job and min(one.finish, two.finish) - two.start > 1e-6:
                    a, b = jobs[one.job].job_type, jobs[two.job].job_type
                    rate = ran.colocation.combined(one.gpu_type, a, b)
                    found.append((one.gpu_type, a, b, -1.0 if rate is None else rate))
    return found


def run(trace: str, load: float, jobs: int, policy: str) -> dict[str, Any]:
    """One replay's figures."""
    from hetsched.core.settings import ReplaySettings
    from hetsched.registry import rolling
    from hetsched.replaying import replay_trace

    settings = ReplaySettings(limit_jobs=jobs, load=load, seed=0)
    made = rolling(policy, time_limit_s=settings.time_limit_s)
    began = time.process_time()
    ran = replay_trace(TRACES / f"{trace}.trace", "gavel", CLUSTER, made,
                       settings=settings).replay
    cpu = time.process_time() - began
    summary = ran.summary()
    pairs = packed_pairs(ran)
    rates = [rate for *_, rate in pairs]
    return {"trace": trace, "load": load, "jobs": jobs, "policy": policy,
            "avg_jct_s": summary["avg_jct_s"], "p95_jct_s": summary["p95_jct_s"],
            "makespan_s": summary["makespan_s"], "utilization": summary["utilization"],
            "completed": summary["completed"], "preemptions": summary["preemptions"],
            "packed_starts": made.figures().get("progress_packed_starts", 0),
            "pairs_run": len(pairs), "least_combined_rate": min(rates, default=float("nan")),
            "pairs_at_or_below_1": sum(rate <= 1.0 for rate in rates),
            "decision_p95_s": ran.timing()["decision_time_p95_s"],
            "cpu_s": cpu}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Average JCT of each cell under both policies, as bars, at ``path`` (PNG)."""
    from matplotlib.figure import Figure

    cells = list(dict.fromkeys((str(r["jobs"]), str(r["load"])) for r in rows))
    figure = Figure(figsize=(7.0, 4.0))
    ax = figure.add_subplot()
    width = 0.38
    for offset, policy in ((-width / 2, "progress"), (width / 2, "progress-packed")):
        heights = [next(float(r["avg_jct_s"]) / 3600.0 for r in rows
                        if (str(r["jobs"]), str(r["load"])) == cell and r["policy"] == policy)
                   for cell in cells]
        ax.bar([k + offset for k in range(len(cells))], heights, width, label=policy)
    ax.set_xticks(range(len(cells)), [f"{jobs} jobs, load {load}" for jobs, load in cells])
    ax.set_ylabel("average JCT (h)")
    ax.set_title("ee9e8c on 8 V100 + 8 P100 + 8 K80: packing two jobs on a GPU")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> None:
    """Run the cells, print the figures, write the CSV (and its plot)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default="ee9e8c")
    parser.add_argument("--loads", default="1,2")
    parser.add_argument("--jobs", default="300,1000")
    parser.add_argument("--quick", action="store_true", help="150 jobs of ee9e8c, load 2")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None, metavar="CSV",
                        help="only draw the plot of an earlier run's CSV")
    args = parser.parse_args()
    if args.plot is not None:
        with args.plot.open(newline="") as handle:
            plot(list(csv.DictReader(handle)), args.plot.with_suffix(".png"))
        return
    if not TRACES.is_dir():
        sys.exit(f"{TRACES} is absent: this benchmark needs ../shared/data")
    if args.quick:
        args.traces, args.loads, args.jobs = "ee9e8c", "2", "150"
    rows: list[dict[str, Any]] = []
    for trace in args.traces.split(","):
        for jobs in (int(x) for x in args.jobs.split(",")):
            for load in (float(x) for x in args.loads.split(",")):
                cell = [run(trace, load, jobs, "progress"),
                        run(trace, load, jobs, "progress-packed")]
                for row in cell:
                    row["avg_jct_over_progress"] = row["avg_jct_s"] / cell[0]["avg_jct_s"]
                    print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                    for k, v in row.items()), flush=True)
                rows.extend(cell)
                if args.out is not None:  # after every cell: nothing lost if stopped
                    with args.out.open("w", newline="") as handle:
                        writer = csv.DictWriter(handle, list(rows[0]))
                        writer.writeheader()
                        writer.writerows(rows)
    if args.out is not None:
        print(f"wrote {args.out}")
        plot(rows, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
