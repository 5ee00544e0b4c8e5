"""What GPU sharing changes on Alibaba's openb trace: the same pods on a
contended subset of the real openb nodes, with fractional GPUs (a pod asking for
``gpu_milli`` < 1000 gets that share of one GPU, co-located pods at the co-location
factor, docs/traces.md) and without (every share rounded up to a whole GPU), side by
side: average queueing time, average and p95 JCT, the GPUs in use (physical GPU-hours
with any pod on them, the peak number at once) and the GPU-hours the pods held
(a share counts its share). CPUs and memory are enforced in both.

The subset: every ``--every``-th node of ``openb_node_list_gpu_node.csv`` (default 40:
31 nodes, 147 GPUs), arrivals ``--load`` times as fast (default 10 and 20): the real
trace keeps its 1,213 nodes busy a few percent of the time, so contention needs both.

The clusterdata files are not shipped: ``--openb DIR`` holds them (see
benchmarks/openb_scale.py). Prints one line per run and writes
``benchmarks/results/openb_sharing.csv``.

Usage: python benchmarks/openb_sharing.py --openb DIR [--every 40] [--load 10,20]
       [--policies fifo,sjf] [--pods default] [--csv OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, write_csv

ALIASES = "v100m16=v100,v100m32=v100,a10=v100,g2=v100,g3=a100"
FIELDS = ("policy", "load", "sharing", "nodes", "gpus", "jobs", "share_jobs", "avg_queue_s",
          "avg_jct_s", "p95_jct_s", "busy_gpu_hours", "peak_busy_gpus", "held_gpu_hours",
          "makespan_s", "wall_s")


def subset(nodes: Path, every: int, out: Path) -> tuple[int, int]:
    """Write every ``every``-th node of the node list to ``out``; (nodes, GPUs)."""
    with nodes.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    kept = [row for k, row in enumerate(rows[1:]) if k % every == 0]
    with out.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows([rows[0], *kept])
    return len(kept), sum(int(row[3] or 0) for row in kept)


def gpu_use(jobs_csv: Path) -> tuple[float, int, float]:
    """From jobs.csv: GPU-hours with any pod on the GPU (the union of the pods' runs per
    GPU; no policy here preempts, so each pod runs from start to finish on its GPUs), the
    peak number of GPUs in use at once, and the GPU-hours held (a share its share)."""
    with jobs_csv.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    runs: dict[str, list[tuple[float, float]]] = {}
    held = 0.0
    for row in rows:
        held += float(row["gpu_seconds"])
        for gpu in row["gpus"].split():
            runs.setdefault(gpu, []).append((float(row["start"]), float(row["finish"])))
    busy = 0.0
    edges: list[tuple[float, int]] = []
    for intervals in runs.values():
        intervals.sort()
        start, end = intervals[0]
        for left, right in intervals[1:]:
            if left > end:
                busy += end - start
                edges += [(start, 1), (end, -1)]
                start, end = left, right
            else:
                end = max(end, right)
        busy += end - start
        edges += [(start, 1), (end, -1)]
    peak = now = 0
    for _, step in sorted(edges):
        now += step
        peak = max(peak, now)
    return busy / 3600, peak, held / 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openb", type=Path, required=True)
    parser.add_argument("--every", type=int, default=40)
    parser.add_argument("--load", default="10,20")
    parser.add_argument("--policies", default="fifo,sjf",
                        help="non-preemptive ones: jobs.csv then gives each pod's one run")
    parser.add_argument("--pods", default="default")
    parser.add_argument("--csv", type=Path, default=RESULTS / "openb_sharing.csv")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        nodes = Path(folder) / "nodes.csv"
        count, gpus = subset(args.openb / "openb_node_list_gpu_node.csv", args.every, nodes)
        print(f"every {args.every}th node: {count} nodes, {gpus} GPUs")
        for load in args.load.split(","):
            for policy in args.policies.split(","):
                for sharing in (True, False):
                    out = Path(folder) / f"{policy}-{load}-{sharing}"
                    began = time.perf_counter()
                    subprocess.run([
                        sys.executable, "-m", "hetsched", "replay",
                        str(args.openb / f"openb_pod_list_{args.pods}.csv"), "--format",
                        "openb", "--cluster", f"openb:{nodes}", "--gpu-alias", ALIASES,
                        "--policy", policy, "--load", load,
                        "--gpu-sharing" if sharing else "--no-gpu-sharing", "--out", str(out)],
                        cwd=ROOT, check=True, capture_output=True)
                    wall = time.perf_counter() - began
                    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
                    busy, peak, held = gpu_use(out / "jobs.csv")
                    row = {"policy": policy, "load": load, "sharing": sharing,
                           "nodes": count, "gpus": gpus, "jobs": summary["jobs"],
                           "share_jobs": summary["gpu_share_jobs"],
                           "avg_queue_s": round(summary["avg_queue_s"], 1),
                           "avg_jct_s": round(summary["avg_jct_s"], 1),
                           "p95_jct_s": round(summary["p95_jct_s"], 1),
                           "busy_gpu_hours": round(busy, 1), "peak_busy_gpus": peak,
                           "held_gpu_hours": round(held, 1),
                           "makespan_s": round(summary["makespan_s"], 1),
                           "wall_s": round(wall, 1)}
                    rows.append(row)
                    print(f"{policy:6} load {load:>3} {'shares' if sharing else 'whole ':6} "
                          f"queue {row['avg_queue_s']:>10,.0f} s  JCT {row['avg_jct_s']:>10,.0f}"
                          f" s (p95 {row['p95_jct_s']:>11,.0f})  busy {busy:>9,.0f} GPU-h "
                          f"(peak {peak}), held {held:>9,.0f} GPU-h  [{wall:.0f} s]",
                          flush=True)
    write_csv(args.csv, rows, FIELDS)


if __name__ == "__main__":
    main()
