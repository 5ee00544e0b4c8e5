"""Every rolling policy with and without the shipped tenant table (docs/fairness.md).

The first 300 jobs of Philly (``../shared/data/philly/philly.csv``) on 32 V100 + 32 P100 +
32 K80, each policy replayed twice: as it is, and within ``instances/philly_tenants.json``
(six virtual clusters with nominal quotas of every type, no borrowing limit: any idle
GPU may be borrowed). A quota keeper that idles GPUs shows as a lower utilisation and a
longer average JCT with the table; the quotas kept show as 0 GPU-seconds of violation.
The table's weights (4, 2 and 1) change what a weighing policy allocates whether or not
quotas are kept, so ``--weights-only`` adds a third replay per policy, with the table's
weights and no quota: the table against it is the quota keeper's own effect.

Prints a line per policy and writes ``benchmarks/results/tenants.csv`` (one row per
policy: average JCT and utilisation with and without the table, their ratios, the
violations, the keeper's counts), resuming a CSV that has some policies already. Every
replay passes the checker (``hetsched.replay`` checks it). Needs ../shared/data.

    python benchmarks/tenants.py                        # every rolling policy
    python benchmarks/tenants.py --policies gavel,fifo --limit-jobs 100
    python benchmarks/tenants.py --weights-only --policies isolated \
        --out benchmarks/results/tenants_weights.csv
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
import time
from pathlib import Path

from hetsched.core.settings import ReplaySettings
from hetsched.core.tenants import Tenant, TenantTable
from hetsched.files.replay_inputs import read_jobs, replay_inputs
from hetsched.files.tenants import read_tenants
from hetsched.policies.quotas import with_tenants
from hetsched.registry import ENTRIES
from hetsched.replaying import replay, rolling_policy

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "philly" / "philly.csv"
TABLE = ROOT / "instances" / "philly_tenants.json"
CLUSTER = "v100=32,p100=32,k80=32"
OUT = ROOT / "benchmarks" / "results" / "tenants.csv"
FIELDS = ("policy", "jobs", "avg_jct_s", "avg_jct_s_tenants", "jct_ratio", "utilization",
          "utilization_tenants", "utilization_ratio", "quota_violation_gpu_s",
          "quota_violation_gpu_s_untended", "quota_dropped_starts",
          "quota_redirected_starts", "quota_reclaims", "wall_s", "wall_s_tenants",
          "avg_jct_s_weights", "utilization_weights", "wall_s_weights", "jct_over_weights",
          "utilization_over_weights")

log = logging.getLogger("benchmarks.tenants")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rolling = sorted(name for name, entry in ENTRIES.items() if entry.policy is not None)
    parser.add_argument("--policies", default=",".join(rolling))
    parser.add_argument("--limit-jobs", type=int, default=300)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--weights-only", action="store_true",
                        help="also each policy with the table's weights and no quota")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not TRACE.exists():
        log.error("needs %s", TRACE)
        return 2
    settings = ReplaySettings(limit_jobs=args.limit_jobs)
    inputs = replay_inputs(TRACE, "philly", CLUSTER, throughput_path=None, settings=settings)
    jobs = read_jobs(inputs, settings).jobs
    table = read_tenants(TABLE)
    weights = TenantTable(tuple(Tenant(t.name, t.weight) for t in table.tenants))
    runs: list[tuple[str, TenantTable | None]] = [("", None), ("_tenants", table)]
    if args.weights_only:
        runs.append(("_weights", weights))
    done: dict[str, dict[str, str]] = {}
    if args.out.exists():
        with args.out.open(newline="") as handle:
            done = {row["policy"]: row for row in csv.DictReader(handle)
                    if int(row["jobs"]) == len(jobs)
                    and (row.get("avg_jct_s_weights") or not args.weights_only)}
    rows = list(done.values())
    for policy in args.policies.split(","):
        if policy in done:
            log.info("%s: kept from %s", policy, args.out)
            continue
        figures: dict[str, float | int | str] = {"policy": policy, "jobs": len(jobs)}
        for suffix, tenants in runs:
            started = time.monotonic()
            made = with_tenants(rolling_policy(policy), tenants)
            ran = replay(jobs, inputs.cluster, made, throughput=inputs.truth,
                         model=inputs.model, colocation=inputs.colocation, tenants=tenants,
                         keep_tenants=False)
            summary = ran.summary
            figures[f"wall_s{suffix}"] = round(time.monotonic() - started, 1)
            figures[f"avg_jct_s{suffix}"] = summary.avg_jct_s
            figures[f"utilization{suffix}"] = summary.utilization
            if tenants is None:  # what the policy alone breaks of the quotas
                ran.tenants = table
                figures["quota_violation_gpu_s_untended"] = \
                    ran.summary.quota_violation_gpu_s
            elif suffix == "_tenants":
                figures["quota_violation_gpu_s"] = summary.quota_violation_gpu_s
                counts = made.figures()
                for key in ("quota_dropped_starts", "quota_redirected_starts",
                            "quota_reclaims"):
                    figures[key] = str(counts.get(key, ""))
        figures["jct_ratio"] = float(figures["avg_jct_s_tenants"]) / float(figures["avg_jct_s"])
        figures["utilization_ratio"] = float(figures["utilization_tenants"]) / float(
            figures["utilization"])
        if args.weights_only:
            figures["jct_over_weights"] = float(figures["avg_jct_s_tenants"]) / float(
                figures["avg_jct_s_weights"])
            figures["utilization_over_weights"] = float(figures["utilization_tenants"]) / \
                float(figures["utilization_weights"])
            log.info("%-30s weights only: avg JCT %.1f h, utilisation %.3f; the table over "
                     "it: x%.3f, x%.3f", policy, float(figures["avg_jct_s_weights"]) / 3600,
                     figures["utilization_weights"], figures["jct_over_weights"],
                     figures["utilization_over_weights"])
        log.info("%-30s avg JCT %.1f h -> %.1f h (x%.3f), utilisation %.3f -> %.3f (x%.3f), "
                 "violations %.0f GPU-s (untended %.0f)", policy,
                 float(figures["avg_jct_s"]) / 3600, float(figures["avg_jct_s_tenants"]) / 3600,
                 figures["jct_ratio"], figures["utilization"], figures["utilization_tenants"],
                 figures["utilization_ratio"], figures["quota_violation_gpu_s"],
                 figures["quota_violation_gpu_s_untended"])
        rows.append({key: str(value) for key, value in figures.items()})
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, FIELDS)
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
