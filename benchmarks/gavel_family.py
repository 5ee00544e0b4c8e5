"""Gavel's family of policies side by side with Gavel's own simulator: the first
300 jobs of ee9e8c on 36 V100 + 36 P100 + 36 K80 (one server each: gavel_side.CLUSTER), no restart
penalty, each policy of Gavel's family in hetsched beside Gavel's own (PEERS): average
JCT overall and by gang size (1, 2, 4, 8 GPUs), hetsched's over Gavel's, and for the cost
policy the total cost and cost per completed job on both sides (Gavel's GCP prices,
PRICES, set on both).

Gavel's side is run outside this project (stanford-futuredata/gavel, its
``scheduler/scripts/drivers`` simulator on the trace ``--write-gavel-trace`` writes:
exactly the jobs hetsched replays) and handed in as CSV files of ``job,arrival,jct``
(``--gavel NAME=FILE``, or ``--gavel-dir`` holding ``ee9e8c_<jobs>_NAME.csv``; a
``cost_usd`` column, the job's cost as Gavel's simulator counts it, gives Gavel's
cost). Only measurements are committed, never Gavel's code; docs/policies.md ("Beside
Gavel's simulator") gives the commit and command lines.

    python benchmarks/gavel_family.py --write-gavel-trace /tmp/ee300.trace
    python benchmarks/gavel_family.py --gavel-dir benchmarks/results/gavel_jcts \\
        --out benchmarks/results/gavel_family.csv
    python benchmarks/gavel_family.py --quick     # 60 jobs, hetsched's side only

Prints a line per run and writes CSV. Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from common import row_line, sorted_columns, write_csv
from gavel_side import (
    add_side_arguments,
    gavel_finish,
    hetsched_replay,
    jobs_to_replay,
    read_gavel_jobs,
)

if TYPE_CHECKING:
    from hetsched.files.replay_inputs import TraceJobs

#: Gavel's policy beside each of hetsched's (``NAME:SUFFIX``: gavel_side.VARIANTS).
#: ``max_min_fairness_perf_two_stage``: Gavel's simulator with its max-min LP followed by
#: hetsched's second stage; ``min_total_duration_perf_hetsched_bisection``: Gavel's
#: simulator with its min-total-duration allocation computed by hetsched's code
#: (``min-total-duration:bisection``'s) (docs/policies.md, "Beside Gavel's simulator").
PEERS = (("gavel", "max_min_fairness_perf"), ("gavel:rounds", "max_min_fairness_perf"),
         ("gavel:gavel", "max_min_fairness_perf"), ("gavel:central", "max_min_fairness_perf"),
         ("gavel", "max_min_fairness_perf_two_stage"),
         ("gavel-agnostic", "max_min_fairness"),
         ("gavel-max-sum", "max_sum_throughput_perf"),
         ("gavel-max-sum-raw", "max_sum_throughput_perf"),
         ("fifo-fastest", "fifo_perf"), ("fifo-fastest:rounds", "fifo_perf"),
         ("fifo-fastest:gavel", "fifo_perf"), ("fifo-packed", "fifo_packed"),
         ("min-total-duration:gavel", "min_total_duration_perf"),
         ("min-total-duration:central", "min_total_duration_perf"),
         ("min-total-duration:bisection", "min_total_duration_perf"),
         ("min-total-duration:bisection", "min_total_duration_perf_hetsched_bisection"),
         ("max-throughput-per-cost:gavel", "max_sum_throughput_normalized_by_cost_perf"),
         ("isolated:gavel", "isolated"),
         ("min-total-duration", "min_total_duration_perf"),
         ("max-throughput-per-cost", "max_sum_throughput_normalized_by_cost_perf"),
         ("max-throughput-per-cost-raw", "max_sum_throughput_normalized_by_cost_perf"),
         ("isolated", "isolated"))
#: USD per GPU-hour: Gavel's GCP prices (its scheduler/utils.py,
#: read_per_instance_type_spot_prices_json), on both sides.
PRICES = "v100=0.74,p100=0.43,k80=0.135"
GANGS = (1, 2, 4, 8)


def figures(read: TraceJobs, finish: dict[str, float]) -> dict[str, object]:
    """Completed jobs, average JCT (s), and average JCT of the jobs of each gang size."""
    arrival = {job.id: job.arrival for job in read.jobs}
    gang = {job.id: job.num_gpus for job in read.jobs}
    jct = {job_id: end - arrival[job_id] for job_id, end in finish.items()}
    row: dict[str, object] = {"completed": len(jct),
                              "avg_jct_s": sum(jct.values()) / len(jct) if jct else math.nan}
    for size in GANGS:
        sized = [value for job_id, value in jct.items() if gang[job_id] == size]
        row[f"avg_jct_{size}gpu_s"] = sum(sized) / len(sized) if sized else math.nan
        row[f"jobs_{size}gpu"] = len(sized)
    return row


def hetsched_run(read: TraceJobs, policy: str) -> dict[str, object]:
    """hetsched's replay under ``policy`` (``NAME:rounds``: not work conserving;
    ``NAME:gavel``: Gavel's rounds), with Gavel's prices on the cluster's types."""
    ran = hetsched_replay(read, policy, prices=PRICES)
    metrics = ran.replay.metrics()
    return {"side": "hetsched", "policy": policy, **figures(read, ran.finish),
            "total_cost_usd": metrics.total_cost_usd,
            "cost_per_job_usd": metrics.cost_per_job_usd,
            "preemptions": metrics.preemptions, "wall_s": ran.wall_s, "cpu_s": ran.cpu_s}


def gavel_run(read: TraceJobs, name: str, path: Path) -> dict[str, object]:
    """Gavel's simulator's figures from its per-job CSV (cost if it has ``cost_usd``)."""
    finish = gavel_finish(read, path)
    row: dict[str, object] = {"side": "gavel", "policy": name, **figures(read, finish)}
    costs = [job["cost_usd"] for job in read_gavel_jobs(read, path).values()
             if "cost_usd" in job]
    if costs:
        row["total_cost_usd"] = sum(costs)
        row["cost_per_job_usd"] = sum(costs) / len(finish) if finish else math.nan
    return row


def ratios(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """A row per pair of PEERS measured: hetsched's figures over Gavel's."""
    by_policy = {(str(r["side"]), str(r["policy"])): r for r in rows}
    keys = ("avg_jct_s", *(f"avg_jct_{size}gpu_s" for size in GANGS), "cost_per_job_usd")
    made: list[dict[str, object]] = []
    for ours, theirs in PEERS:
        mine, peer = by_policy.get(("hetsched", ours)), by_policy.get(("gavel", theirs))
        if mine is None or peer is None:
            continue
        row: dict[str, object] = {"side": "hetsched/gavel", "policy": ours,
                                  "gavel_policy": theirs}
        for key in keys:
            if key in mine and key in peer:
                row[key] = float(str(mine[key])) / float(str(peer[key]))
        made.append(row)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_side_arguments(parser, "Gavel's per-job JCTs (and cost) for its policy NAME")
    parser.add_argument("--gavel-dir", type=Path, default=None,
                        help="a folder of ee9e8c_<jobs>_NAME.csv, one per Gavel policy NAME "
                        "of PEERS (those present are read)")
    parser.add_argument("--policies", default=",".join(dict.fromkeys(ours for ours, _ in PEERS)),
                        help="NAME, NAME:rounds (only the rounds start jobs) or NAME:gavel "
                        "(realised as Gavel's simulator does)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    read = jobs_to_replay(args)
    if read is None:
        return
    rows: list[dict[str, object]] = []
    for policy in filter(None, args.policies.split(",")):
        rows.append(hetsched_run(read, policy))
    if args.gavel_dir is not None:
        for name in dict.fromkeys(theirs for _, theirs in PEERS):
            path = args.gavel_dir / f"ee9e8c_{args.jobs}_{name}.csv"
            if path.is_file():
                args.gavel.append(f"{name}={path}")
    for item in args.gavel:
        name, _, file = item.partition("=")
        rows.append(gavel_run(read, name, Path(file)))
    rows += ratios(rows)
    for row in rows:
        print(row_line(row))
    if args.out is not None:
        write_csv(args.out, rows, sorted_columns(rows, ("side", "policy", "gavel_policy")))


if __name__ == "__main__":
    main()
