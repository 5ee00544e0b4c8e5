"""Every policy on Gavel's ee9e8c and 6214e9 traces (first
1,000 jobs each) on 36 V100 + 36 P100 + 36 K80 at two loads and two seeds, through
``hetsched bench``.

It runs one bench per trace into ``OUT/<trace>/`` (results.csv, report.md, plots;
rerunning resumes), their runs in one queue (:func:`hetsched.bench.runner.run_benches`), then
prints the figures: the policy with the lowest average JCT and the highest
deadline-met ratio per load, where ``progress`` and ``deadline`` rank, each
heterogeneity-aware policy against its ``-agnostic`` variant, and the wall time. It
writes ``OUT/bench_policies.csv`` (every row of every trace).

At load 1 the first 1,000 jobs already offer more work than the cluster has while they
arrive (offered load 1.13 on ee9e8c, 1.37 on 6214e9; report.md prints it), so the
default loads are 0.5 (busy, but a good policy keeps up) and 1 (overloaded). Gavel's
7-field traces have no SLOs: half of the jobs get a synthetic deadline (docs/traces.md).

    python benchmarks/bench_policies.py                      # the full target (~30 min)
    python benchmarks/bench_policies.py --quick              # 200 jobs, seed 0 (minutes)
    python benchmarks/bench_policies.py --jobs 200 --policies fifo,deadline,allox \\
        --traces ee9e8c --loads 1                            # a quick check
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import time
from pathlib import Path

from hetsched.bench.results import is_heuristic, read_results
from hetsched.bench.runner import run_benches
from hetsched.bench.settings import BenchSettings
from hetsched.bench.spec import parse_loads, parse_policies, parse_seeds
from hetsched.core.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "gavel" / "traces"
OUT = ROOT / "benchmarks" / "results" / "bench"
TRACES = ("ee9e8c", "6214e9")
CLUSTER = "v100=36,p100=36,k80=36"
#: About ten policies: the baselines of the field, the exact models, and the
#: heterogeneity-agnostic variants to compare against (Gavel's 3.5x).
POLICIES = ("fifo,srtf,edf,tiresias,gandiva,gavel,gavel-agnostic,optimus,allox,deadline,"
            "deadline-agnostic,progress,progress-agnostic")
#: The optimisation policies whose rank the figures report.
RANKED = ("progress", "deadline")


def _mean(rows: list[dict[str, str]], policy: str, column: str) -> float:
    values = [float(r[column]) for r in rows if r["policy"] == policy and r.get(column)]
    return sum(values) / len(values) if values else math.nan


def _deadline_ratio(rows: list[dict[str, str]], policy: str) -> float:
    met = _mean(rows, policy, "deadline_met")
    jobs = _mean(rows, policy, "deadline_jobs")
    return met / jobs if jobs > 0 else math.nan


def figures(trace: str, rows: list[dict[str, str]]) -> list[str]:
    """The figures for one trace, a line each."""
    lines = []
    for load in sorted({r["load"] for r in rows}, key=float):
        group = [r for r in rows if r["load"] == load]
        policies = list(dict.fromkeys(r["policy"] for r in group))
        jct = {p: _mean(group, p, "avg_jct_s") for p in policies}
        met = {p: _deadline_ratio(group, p) for p in policies}
        ranked = sorted(policies, key=lambda p: jct[p])
        by_met = sorted(policies, key=lambda p: -met[p] if math.isfinite(met[p]) else 0)
        lines.append(f"{trace} load {load}: avg JCT (h) " + ", ".join(
            f"{p} {jct[p] / 3600:,.1f}" for p in ranked))
        if any(math.isfinite(v) for v in met.values()):
            lines.append(f"{trace} load {load}: deadlines met " + ", ".join(
                f"{p} {100 * met[p]:.1f}%" for p in by_met))
        for name in RANKED:
            if name not in jct:
                continue
            lines.append(
                f"{trace} load {load}: {name} ranks {ranked.index(name) + 1} of "
                f"{len(ranked)} by avg JCT"
                + (f", {by_met.index(name) + 1} by deadlines met"
                   if any(math.isfinite(v) for v in met.values()) else ""))
        heuristics = [p for p in policies if is_heuristic(p) and math.isfinite(jct[p])]
        if heuristics:
            best = min(heuristics, key=lambda p: jct[p])
            lines.append(f"{trace} load {load}: best heuristic {best}; "
                         + ", ".join(f"{p} {jct[p] / jct[best]:.2f}x" for p in policies
                                     if not is_heuristic(p)))
        for policy in policies:
            agnostic = f"{policy}-agnostic"
            if agnostic in jct:
                lines.append(f"{trace} load {load}: {agnostic} / {policy} avg JCT = "
                             f"{jct[agnostic] / jct[policy]:.2f}x")
        # results.csv carries each run's timing.json figures (wall_time_s) beside its
        # summary.json ones; a run without them counts 0.
        wall = sum(float(r.get("wall_time_s") or 0.0) for r in group)
        lines.append(f"{trace} load {load}: replay wall time {wall / 60:.1f} min in total")
    return lines


def main() -> None:
    """Run the bench on each trace and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(TRACES))
    parser.add_argument("--jobs", type=int, default=1000, help="first N jobs of each trace")
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--loads", default="0.5,1")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=0.1,
                        help="solver time limit per decision (s)")
    parser.add_argument("--deadline-fraction", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--quick", action="store_true",
                        help="a small version: the first 200 jobs, seed 0, into "
                        "benchmarks/results/bench_quick (minutes)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.seeds = 200, "0"
        if args.out == OUT:
            args.out = OUT.parent / "bench_quick"
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        policies = parse_policies(args.policies)
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    began = time.monotonic()
    combined: list[dict[str, str]] = []
    lines: list[str] = []
    traces = args.traces.split(",")
    # One bench per trace, their runs in one queue on one engine (the long runs of both
    # traces first: no trace waits for the other's last run).
    benches = [(BenchSettings(
        trace=DATA / f"{trace}.trace", trace_format="gavel", cluster=CLUSTER,
        policies=policies, seeds=parse_seeds(args.seeds), loads=parse_loads(args.loads),
        workers=args.workers, limit_jobs=args.jobs, time_limit_s=args.time_limit,
        deadline_fraction=args.deadline_fraction), args.out / f"{trace}-{args.jobs}")
        for trace in traces]
    outcomes = run_benches(benches, names=traces)
    for trace, (_, out), outcome in zip(traces, benches, outcomes, strict=True):
        rows = read_results(out / "results.csv")
        combined += [{"trace": trace, **r} for r in rows]
        lines += figures(trace, rows)
        print(f"{trace}: {outcome.ran} runs, {outcome.skipped} resumed, "
              f"{len(outcome.failed)} failed; report {outcome.report}")
    elapsed = time.monotonic() - began
    columns = list(dict.fromkeys(k for r in combined for k in r))
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "bench_policies.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(combined)
    print("\n".join(lines))
    print(f"bench wall time: {elapsed / 60:.1f} min (resumed runs not counted); wrote "
          f"{args.out / 'bench_policies.csv'}")


if __name__ == "__main__":
    main()
