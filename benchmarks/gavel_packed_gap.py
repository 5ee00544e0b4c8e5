"""Why ``gavel-packed`` trails ``gavel`` (docs/policies.md, "gavel-packed against gavel").

The first N jobs of Gavel's ee9e8c trace (Gavel's measured throughputs and co-location
pairs) on 36 V100 + 36 P100 + 36 K80, under six variants that change one thing at a time
between ``gavel`` (hetsched's work-conserving rounds, the max-min floor then the greatest
sum of normalised rates: ``spare="two-stage"``) and ``gavel-packed`` as registered
(Gavel's simulator's rounds, the interior max-min optimum Gavel's ECOS returns, pairs of
one-GPU jobs packed on one GPU):

    gavel                          hetsched's rounds, two-stage
    gavel rounds=gavel             Gavel's rounds, two-stage
    gavel rounds=gavel central     Gavel's rounds, interior optimum
    gavel-packed                   Gavel's rounds, interior optimum, packing
    gavel-packed two-stage         Gavel's rounds, two-stage, packing
    gavel central                  hetsched's rounds, interior optimum

Prints each variant's average, p50 and p95 JCT, utilisation, preemptions and pairs
started, and writes ``benchmarks/results/gavel_packed_gap.csv``. Every replay passes the
checker. Needs ../shared/data.

    python benchmarks/gavel_packed_gap.py                   # 20 and 200 jobs
    python benchmarks/gavel_packed_gap.py --jobs 200 --restart-penalty 0
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
from pathlib import Path

from hetsched.core.settings import ReplaySettings
from hetsched.files.replay_inputs import read_jobs, replay_inputs
from hetsched.replaying import replay, rolling_policy

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "gavel" / "traces" / "ee9e8c.trace"
CLUSTER = "v100=36,p100=36,k80=36"
OUT = ROOT / "benchmarks" / "results" / "gavel_packed_gap.csv"
#: (label, registered policy, its settings)
VARIANTS: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("gavel", "gavel", {}),
    ("gavel rounds=gavel", "gavel", {"rounds": "gavel"}),
    ("gavel rounds=gavel central", "gavel", {"rounds": "gavel", "spare": "central"}),
    ("gavel-packed", "gavel-packed", {}),
    ("gavel-packed two-stage", "gavel-packed", {"spare": "two-stage"}),
    ("gavel central", "gavel", {"spare": "central"}),
)
FIELDS = ("jobs", "restart_penalty_s", "variant", "avg_jct_s", "p50_jct_s", "p95_jct_s",
          "utilization", "preemptions", "pairs_started", "over_gavel")

log = logging.getLogger("benchmarks.gavel_packed_gap")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="20,200")
    parser.add_argument("--restart-penalty", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not TRACE.exists():
        log.error("needs %s", TRACE)
        return 2
    rows: list[dict[str, object]] = []
    for count in (int(n) for n in args.jobs.split(",")):
        settings = ReplaySettings(limit_jobs=count)
        inputs = replay_inputs(TRACE, "gavel", CLUSTER, throughput_path=None,
                               settings=settings)
        jobs = read_jobs(inputs, settings).jobs
        run = ReplaySettings(restart_penalty_s=args.restart_penalty)
        first = 0.0
        for label, name, params in VARIANTS:
            policy = rolling_policy(name, run, params=params)
            summary = replay(jobs, inputs.cluster, policy, throughput=inputs.truth,
                             model=inputs.model, settings=run,
                             colocation=inputs.colocation).summary
            first = first or summary.avg_jct_s
            pairs = policy.figures().get("gavel_packed_pairs_started", 0)
            row = {"jobs": count, "restart_penalty_s": args.restart_penalty,
                   "variant": label, "avg_jct_s": round(summary.avg_jct_s, 1),
                   "p50_jct_s": round(summary.p50_jct_s, 1),
                   "p95_jct_s": round(summary.p95_jct_s, 1),
                   "utilization": round(summary.utilization, 4),
                   "preemptions": summary.preemptions, "pairs_started": pairs,
                   "over_gavel": round(summary.avg_jct_s / first, 4)}
            rows.append(row)
            log.info("%4d jobs  %-28s avg JCT %9.1f h (x%.3f)  p50 %7.1f h  p95 %7.1f h  "
                     "util %.3f  preemptions %6d  pairs %6s", count, label,
                     summary.avg_jct_s / 3600, row["over_gavel"], summary.p50_jct_s / 3600,
                     summary.p95_jct_s / 3600, summary.utilization, summary.preemptions,
                     pairs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    log.info("wrote %s", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
