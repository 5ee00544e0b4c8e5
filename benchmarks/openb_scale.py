"""Alibaba's openb trace on its own cluster, timed: every pod of a pod list
on the real 1,213-node, 6,212-GPU inventory, one ``hetsched replay`` per policy, each
timed end to end (reading, simulation, checking, bounds, writing) in a fresh process.
Target: fifo, srtf, gavel and the optimisation policy (progress) each at most 60 s on
the 2-core machine.

The clusterdata files are not shipped with hetsched: ``--openb DIR`` must hold
``openb_node_list_gpu_node.csv`` and the pod lists (``cluster-trace-gpu-v2023/csv`` of
alibaba/clusterdata). The GPU models the built-in catalogue lacks are mapped as in
docs/traces.md (``v100m16=v100,v100m32=v100,a10=v100,g2=v100,g3=a100``).

Prints one line per policy and writes ``benchmarks/results/openb_scale.csv``: policy,
pod list, jobs, end-to-end wall seconds, the simulation's wall seconds, decisions,
decision time p50/p95/max (s), average JCT (s), fallbacks.

Usage: python benchmarks/openb_scale.py --openb DIR [--pods default,gpuspec33]
       [--policies fifo,srtf,gavel,progress] [--limit-jobs N] [--csv OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, write_csv

ALIASES = "v100m16=v100,v100m32=v100,a10=v100,g2=v100,g3=a100"
FIELDS = ("policy", "pods", "jobs", "end_to_end_s", "simulation_s", "decisions",
          "decision_p50_s", "decision_p95_s", "decision_max_s", "avg_jct_s", "fallbacks",
          "load_before")


def replay(openb: Path, pods: str, policy: str, out: Path,
           limit: int | None) -> tuple[float, dict[str, object], dict[str, float]]:
    """One replay in a fresh process: its end-to-end seconds, summary and timing."""
    args = [sys.executable, "-m", "hetsched", "replay",
            str(openb / f"openb_pod_list_{pods}.csv"), "--format", "openb", "--cluster",
            f"openb:{openb / 'openb_node_list_gpu_node.csv'}", "--gpu-alias", ALIASES,
            "--policy", policy, "--out", str(out)]
    if limit is not None:
        args += ["--limit-jobs", str(limit)]
    began = time.perf_counter()
    subprocess.run(args, cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - began
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    timing = json.loads((out / "timing.json").read_text(encoding="utf-8"))
    return wall, summary, timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openb", type=Path, required=True)
    parser.add_argument("--pods", default="default")
    parser.add_argument("--policies", default="fifo,srtf,gavel,progress")
    parser.add_argument("--limit-jobs", type=int, default=None)
    parser.add_argument("--csv", type=Path, default=RESULTS / "openb_scale.csv")
    args = parser.parse_args()
    if not (args.openb / "openb_node_list_gpu_node.csv").is_file():
        sys.exit(f"{args.openb}: no openb_node_list_gpu_node.csv (clusterdata's "
                 "cluster-trace-gpu-v2023/csv)")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for pods in args.pods.split(","):
            for policy in args.policies.split(","):
                load = os.getloadavg()[0]
                wall, summary, timing = replay(args.openb, pods, policy,
                                               Path(folder) / f"{pods}-{policy}",
                                               args.limit_jobs)
                row = {"policy": policy, "pods": pods, "jobs": summary["jobs"],
                       "end_to_end_s": round(wall, 1),
                       "simulation_s": round(timing["wall_time_s"], 1),
                       "decisions": summary["decisions"],
                       "decision_p50_s": round(timing["decision_time_p50_s"], 5),
                       "decision_p95_s": round(timing["decision_time_p95_s"], 5),
                       "decision_max_s": round(timing["decision_time_max_s"], 4),
                       "avg_jct_s": round(float(summary["avg_jct_s"]), 1),
                       "fallbacks": summary["fallbacks"], "load_before": round(load, 2)}
                rows.append(row)
                print(f"{pods:10} {policy:9} {row['jobs']:>5} jobs  {wall:6.1f} s end to end "
                      f"({row['simulation_s']} s simulation), {row['decisions']} decisions, "
                      f"p95 {row['decision_p95_s']} s, max {row['decision_max_s']} s "
                      f"(load average {load:.1f} before)", flush=True)
    write_csv(args.csv, rows, FIELDS)


if __name__ == "__main__":
    main()
