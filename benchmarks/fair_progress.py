"""``progress`` with a bound on finish-time fairness on the bench's four
cells: Gavel's ee9e8c and 6214e9 traces (first 1,000 jobs), loads 0.5 and 1, on
36 V100 + 36 P100 + 36 K80, half the jobs with a synthetic deadline, seed 0 (as
``benchmarks/bench_policies.py``).

For each cell: ``ftf``, plain ``progress`` and ``progress`` with each ``--bounds`` value
of ``rho_bound``. Printed and written to CSV: average JCT, mean and max rho (hetsched.core.
fairness), the share of jobs with rho > 1, deadlines met, and the two ratios of the
target: max rho over ``ftf``'s (goal <= 1.1) and average JCT over plain ``progress``'s
(goal <= 1.1). Every replay is checked by the independent checker (replay() does).

    python benchmarks/fair_progress.py --out benchmarks/results/fair_progress.csv
    python benchmarks/fair_progress.py --quick     # 200 jobs, one cell

Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from common import DATA, row_line, write_csv

TRACES = DATA / "gavel" / "traces"
CLUSTER = "v100=36,p100=36,k80=36"


def run(trace: str, load: float, jobs: int, policy: str, bound: float | None
        ) -> dict[str, object]:
    """One replay's figures."""
    from hetsched.core.settings import ReplaySettings
    from hetsched.registry import rolling
    from hetsched.replaying import replay_trace

    settings = ReplaySettings(limit_jobs=jobs, load=load, deadline_fraction=0.5, seed=0)
    params = {} if bound is None else {"rho_bound": bound}
    made = rolling(policy, time_limit_s=settings.time_limit_s, **params)
    began = time.process_time()
    ran = replay_trace(TRACES / f"{trace}.trace", "gavel", CLUSTER, made, settings=settings)
    cpu = time.process_time() - began
    summary = ran.summary
    rho = list(ran.replay.rho().values())
    name = policy if bound is None else f"{policy}:rho<={bound:g}"
    return {"trace": trace, "load": load, "jobs": jobs, "policy": name,
            "avg_jct_s": summary.avg_jct_s, "mean_rho": sum(rho) / len(rho),
            "max_rho": max(rho), "rho_above_1": sum(r > 1 for r in rho) / len(rho),
            "deadlines_met": summary.deadline_met / max(1, summary.deadline_jobs),
            "completed": summary.completed,
            "preemptions": summary.preemptions, "cpu_s": cpu}


def main() -> None:
    """Run the cells, print the figures, write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default="ee9e8c,6214e9")
    parser.add_argument("--loads", default="0.5,1")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--bounds", default="2,3,4", help="rho_bound values for progress")
    parser.add_argument("--quick", action="store_true", help="200 jobs of ee9e8c, load 1")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not TRACES.is_dir():
        sys.exit(f"{TRACES} is absent: this benchmark needs ../shared/data")
    if args.quick:
        args.traces, args.loads, args.jobs = "ee9e8c", "1", 200
    bounds = [float(b) for b in args.bounds.split(",") if b]
    rows: list[dict[str, object]] = []
    for trace in args.traces.split(","):
        for load in (float(x) for x in args.loads.split(",")):
            cell = [run(trace, load, args.jobs, "ftf", None),
                    run(trace, load, args.jobs, "progress", None),
                    *(run(trace, load, args.jobs, "progress", b) for b in bounds)]
            ftf, plain = cell[0], cell[1]
            for row in cell:
                row["max_rho_over_ftf"] = float(row["max_rho"]) / float(ftf["max_rho"])
                row["avg_jct_over_progress"] = (float(row["avg_jct_s"])
                                                / float(plain["avg_jct_s"]))
                print(row_line(row), flush=True)
            rows.extend(cell)
    if args.out is not None:
        write_csv(args.out, rows)


if __name__ == "__main__":
    main()
