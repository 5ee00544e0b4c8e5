"""Gavel's ``_packed`` policies side by side with Gavel's own simulator: Gavel's
``max_min_fairness_packed`` beside hetsched's ``gavel-packed`` and its ``fifo_packed``
beside ``fifo-packed`` (and each side's unpacked policy, ``max_min_fairness_perf``
beside ``gavel:central``, ``fifo_perf`` beside ``fifo-fastest:gavel``, for the effect of
packing)
on the one-GPU jobs among the first 300 of ee9e8c (169 jobs), on 36 + 36 + 36 and on
8 + 8 + 8 GPUs, no restart penalty, the policies shown the measured table and its pairs.

One-GPU jobs only: Gavel's packed policies stop on a trace mixing gang sizes (the
per-job time rows reshaped to one length, ``scheduler/policies/policy.py:178-180`` and
``policies/max_min_fairness.py:321-324`` at c4fa400: "Invalid reshape dimensions" at the
fourth active job of ee9e8c's first 300; docs/policies.md).

Gavel's side is run outside this project on the trace ``--write-gavel-trace`` writes
(line i is job i) and handed in as ``job,arrival,jct`` CSVs in ``--gavel-dir``, named
``ee9e8c_300_1gpu_<GPUs per type>_<Gavel policy>.csv``. Only measurements are committed.

    python benchmarks/gavel_packed_side.py --write-gavel-trace /tmp/ee169_1gpu.trace
    python benchmarks/gavel_packed_side.py --gavel-dir benchmarks/results/gavel_jcts \\
        --out benchmarks/results/gavel_packed.csv

Prints a line per run and writes CSV. Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from common import write_csv
from gavel_side import (
    THROUGHPUT,
    TRACE,
    HetschedRun,
    gavel_finish,
    hetsched_replay,
    read_gavel_jobs,
)

#: (hetsched's policy, Gavel's policy). ``..._hetsched_gavel``, ``..._hetsched``: Gavel's
#: simulator with its policy's allocation computed by hetsched's code
#: (min-total-duration-packed:inside's, max-throughput-per-cost-packed:raw's), the rest of
#: its simulator as it is (docs/policies.md).
PEERS = (("gavel-packed", "max_min_fairness_packed"), ("gavel:central", "max_min_fairness_perf"),
         ("fifo-packed", "fifo_packed"), ("fifo-fastest:gavel", "fifo_perf"),
         ("ftf-packed", "finish_time_fairness_packed"),
         ("ftf:central", "finish_time_fairness_perf"),
         ("min-total-duration-packed", "min_total_duration_packed"),
         ("min-total-duration-packed:inside", "min_total_duration_packed"),
         ("min-total-duration-packed:inside", "min_total_duration_packed_hetsched_gavel"),
         ("min-total-duration:central", "min_total_duration_perf"),
         ("max-throughput-per-cost-packed", "max_sum_throughput_normalized_by_cost_packed_SLOs"),
         ("max-throughput-per-cost-packed:raw",
          "max_sum_throughput_normalized_by_cost_packed_SLOs"),
         ("max-throughput-per-cost-packed:raw-exact",
          "max_sum_throughput_normalized_by_cost_packed_SLOs"),
         ("max-throughput-per-cost-packed:raw-exact",
          "max_sum_throughput_normalized_by_cost_packed_SLOs_hetsched"),
         ("max-throughput-per-cost:gavel", "max_sum_throughput_normalized_by_cost_perf"),
         ("gavel-water-filling-packed", "max_min_fairness_water_filling_packed"),
         ("gavel-water-filling:gavel", "max_min_fairness_water_filling_perf"))
#: USD per GPU-hour on both sides (gavel_family.PRICES: Gavel's prices).
PRICES = "v100=0.74,p100=0.43,k80=0.135"
#: GPUs per type (one server each, as Gavel's simulator counts them).
SIZES = (36, 8)
JOBS = 300


def one_gpu_jobs(size: int):  # type: ignore[no-untyped-def]
    """The one-GPU jobs of ee9e8c's first 300 on ``size`` GPUs of each type (TraceJobs)."""
    from hetsched.core.settings import ReplaySettings
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.replay_inputs import trace_jobs

    cluster = ",".join(f"{t}={size}x{size}" for t in ("v100", "p100", "k80"))
    read = trace_jobs(TRACE, "gavel", parse_cluster(cluster), throughput_path=THROUGHPUT,
                      settings=ReplaySettings(limit_jobs=JOBS))
    return dataclasses.replace(read, jobs=tuple(j for j in read.jobs if j.num_gpus == 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-gavel-trace", type=Path, default=None)
    parser.add_argument("--gavel-dir", type=Path, default=None)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--policies", default=None,
                        help="hetsched's policies of PEERS to run (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    chosen = None if args.policies is None else set(args.policies.split(","))
    if args.write_gavel_trace is not None:
        read = one_gpu_jobs(SIZES[0])
        with args.write_gavel_trace.open("w") as handle:
            for job in read.jobs:
                handle.write("\t".join([job.job_type, "true", "", "-n", "0",
                                        str(int(job.work)), "1", "1", "-1",
                                        repr(job.arrival)]) + "\n")
        print(f"wrote {args.write_gavel_trace}: {len(read.jobs)} jobs")
        return
    rows: list[dict[str, object]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        read = one_gpu_jobs(size)
        runs: dict[str, HetschedRun] = {}
        for ours, theirs in PEERS:
            if chosen is not None and ours not in chosen:
                continue
            ran = runs.get(ours) or hetsched_replay(read, ours, prices=PRICES)
            runs[ours] = ran
            arrival = {job.id: job.arrival for job in read.jobs}
            mine = sum(ran.finish[j] - arrival[j] for j in ran.finish) / len(ran.finish)
            packed = sum(s.packed for r in ran.replay.records.values() for s in r.segments)
            row: dict[str, object] = {
                "gpus_per_type": size, "jobs": len(read.jobs), "policy": ours,
                "gavel_policy": theirs, "hetsched_avg_jct_s": round(mine, 1),
                "hetsched_packed_segments": packed, "hetsched_cpu_s": round(ran.cpu_s, 2),
                "hetsched_cost_per_job_usd": round(ran.replay.metrics().cost_per_job_usd, 2)}
            path = None if args.gavel_dir is None else \
                args.gavel_dir / f"ee9e8c_{JOBS}_1gpu_{size}_{theirs}.csv"
            if path is not None and path.is_file():
                finish = gavel_finish(read, path)
                theirs_jct = sum(finish[j] - arrival[j] for j in finish) / len(finish)
                row.update({"gavel_completed": len(finish),
                            "gavel_avg_jct_s": round(theirs_jct, 1),
                            "hetsched_over_gavel": round(mine / theirs_jct, 4)})
                costs = [job["cost_usd"] for job in read_gavel_jobs(read, path).values()
                         if "cost_usd" in job]
                if costs:  # (Gavel charges each job of a pair the whole GPU)
                    row["gavel_cost_per_job_usd"] = round(sum(costs) / len(finish), 2)
            print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
            rows.append(row)
    if args.out is not None:
        write_csv(args.out, rows, list(dict.fromkeys(k for row in rows for k in row)))


if __name__ == "__main__":
    main()
