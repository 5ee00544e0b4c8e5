"""Learned throughputs against Gavel's measurements (issue 62, item 3): "with the model
knowing none of a trace's job types at the start, after each (type, GPU type) has run
once the model is within 10 % of the truth".

The truth is Gavel's measured table (../shared/data/gavel/simulation_throughputs.json,
read as `hetsched replay` and benchmarks/slurm_fidelity.py read it with Gavel's ee9e8c
trace on v100=8,p100=8,k80=8). The jobs are the trace's first --jobs; the keys scored
are every (job type, GPU type, GPU count) they use, on each GPU type of the cluster,
packed and (2 GPUs or more) spread, wherever Gavel measured a positive throughput.

"Knowing none of the trace's job types" is read three ways, one LearnedThroughput each
(hetsched.speeds.learned), its prior being:
  catalogue    the built-in catalogue on the cluster's types: what `hetsched slurm run`
               reads when given no --throughput, the operator's case; its six job
               classes have none of Gavel's names, and its speeds are documented
               relative speeds, not Gavel's.
  gavel-rest   Gavel's table without the slice's job types: measurements of the same
               GPUs on other networks (with 100 jobs, one job type is left).
  none         nothing: the cluster's GPU types only.
Each is scored at four stages:
  before       no run yet: every answer is the bootstrap (or the fallback);
  one-type     each job type has run once, on one GPU type (the cluster's types in
               turn, by the job type's first appearance), at its first job's GPU count,
               packed: the other types are borrowed;
  each-type    each (job type, GPU type) has run once, at the job type's first job's
               count, packed: the target's stage; the other counts are scaled;
  each-key     each (job type, GPU type, count) the slice uses has run once, packed:
               only spread placements are scaled.
An observation is a run of --run-seconds trace seconds at the true throughput times
1 + N(0, --noise) (seeded), fed as `observe(..., steps, seconds)`.

Printed: per prior and stage, the keys scored, the median and max relative error,
how many are within 10 %, and the rules that answered (measured, count-scaled,
type-borrowed, prior, bootstrap, fallback). --out writes these rows; --keys-out every
key's truth, answer and rule.

    python benchmarks/learned_throughput.py --out benchmarks/results/learned_throughput.csv \
        --replay srtf,fifo-fastest,gavel,progress \
        --replay-out benchmarks/results/learned_throughput_replays.csv

With --replay POLICIES (comma-separated), the slice is also replayed on the cluster
(restart penalty 30 s) three times per policy, the policy seeing: the truth (Gavel's
table), the learned model (the catalogue prior) learning as the jobs run, as `hetsched
replay --learn catalogue` does (hetsched.simulate.learning: every run observed from its
resume at every decision and at its end, as the agent observes a job's report; the
policy plans with a frozen table rebuilt when something was learned), and the same
model never learning (the bootstrap alone). The policy sees the model's answers only
where Gavel measured a positive throughput (PolicyView's mask, as in every replay): a
bootstrap elsewhere would start a job the simulator refuses. Printed: the average JCT
of each, and of the learned and never-learning replays against the truth's.

Measured (100 jobs, 25 job types, 160 packed keys and 84 spread; results/
learned_throughput.csv): before any run the bootstrap is 69-87 % off (median; 3-9 of
the 160 packed keys within 10 %). After each (job type, GPU type) ran once (each-type),
the median packed error is 4.4-4.9 % and 92-94 of 160 keys are within 10 %: all 74
measured keys (the noise), but only 18-20 of the 85 at a GPU count not run, whatever
the prior: Gavel's scaling differs from network to network and is not monotone (LM at
batch 10 on V100s: 82, 163, 121, 615 steps/s on 1, 2, 4, 8 GPUs), and even the median
scaling of the job's own family (its other batch sizes, measured) puts only 40 of these
85 within 10 %. Once each (type, GPU type, count) ran (each-key), 160 of 160 packed keys
are within 10 % (median 1.5 %, max 5 %, the 2 % noise); the spread keys, never run
here, stay 28-45 % off. So the target holds for what has run, not for counts borrowed.
Replays (results/learned_throughput_replays.csv): the learned model records every run
exactly (max error 2e-12); learning costs srtf 2.0 % of average JCT against seeing the
truth from the start, gavel 9.0 %, progress 0.8 %, fifo-fastest 23.6 %, against 33.4,
24.2, 24.3 and 23.6 % when never learning: a job learns only where it runs, and a policy
that trusts the bootstrap's ranking of GPU types (fifo-fastest) never tries the others.
(An earlier wrapper of the policy gave 22-26 %: it changed the model's answers under the
same object, and the policies' caches, kept per model object, went stale.)
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from common import DATA, row_line, write_csv

from hetsched.core.throughput import Placement, PolicyView, ThroughputModel, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.files.generate import catalogue_table
from hetsched.files.replay_inputs import TraceJobs, trace_jobs
from hetsched.registry import rolling
from hetsched.simulate.learning import RunLearner
from hetsched.simulate.simulator import Simulator
from hetsched.speeds.learned import LearnedThroughput

TRACE = DATA / "gavel" / "traces" / "ee9e8c.trace"
THROUGHPUT = DATA / "gavel" / "simulation_throughputs.json"
CLUSTER = "v100=8,p100=8,k80=8"
PRIORS = ("catalogue", "gavel-rest", "none")
STAGES = ("before", "one-type", "each-type", "each-key")
RULES = ("measured", "count-scaled", "type-borrowed", "prior", "bootstrap", "fallback")
#: the target's bound on the relative error
WITHIN = 0.10
#: the replays' restart penalty (trace s): `hetsched replay`'s and the emulator's default
RESTART_PENALTY_S = 30.0

Key = tuple[str, str, int, Placement]


def load(jobs: int) -> tuple[TraceJobs, ThroughputTable, tuple[str, ...],
                             list[tuple[str, int]]]:
    """The trace as a replay reads it, Gavel's table, the cluster's GPU types, and the
    (job type, count) of each of the trace's first ``jobs`` jobs in order."""
    read = trace_jobs(TRACE, "gavel", parse_cluster(CLUSTER), throughput_path=THROUGHPUT)
    truth = read.truth
    if not isinstance(truth, ThroughputTable):
        raise SystemExit(f"expected Gavel's table as the truth, got {type(truth).__name__}")
    return read, truth, tuple(read.cluster.type_names), \
        [(job.job_type, job.num_gpus) for job in read.jobs[:jobs]]


def prior_of(name: str, truth: ThroughputTable, gpu_types: Sequence[str],
             job_types: set[str]) -> ThroughputModel | None:
    """The prior ``name`` (see the module)."""
    if name == "catalogue":
        return catalogue_table(list(gpu_types))
    if name == "gavel-rest":
        return ThroughputTable.from_rows(row for row in truth.rows()
                                         if row[0] not in job_types)
    return None


def observations(stage: str, used: list[tuple[str, int]], gpu_types: Sequence[str]
                 ) -> list[tuple[str, str, int]]:
    """The (job type, GPU type, count) runs observed by ``stage`` (see the module)."""
    first: dict[str, int] = {}
    for job_type, count in used:
        first.setdefault(job_type, count)
    if stage == "before":
        return []
    if stage == "one-type":
        return [(job_type, gpu_types[i % len(gpu_types)], count)
                for i, (job_type, count) in enumerate(first.items())]
    if stage == "each-type":
        return [(job_type, gpu, count) for job_type, count in first.items() for gpu in gpu_types]
    return [(job_type, gpu, count) for job_type, count in dict.fromkeys(used)
            for gpu in gpu_types]


def score(args: argparse.Namespace) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The summary rows and the per-key rows (see the module)."""
    _, truth, gpu_types, used = load(args.jobs)
    job_types = {job_type for job_type, _ in used}
    keys: list[Key] = [(job_type, gpu, count, placement)
                       for job_type, count in sorted(set(used)) for gpu in gpu_types
                       for placement in Placement
                       if not (placement is Placement.SPREAD and count == 1)]
    scored = [key for key in keys if truth.throughput(*key) > 0]
    print(f"{args.jobs} jobs of {TRACE.name}: {len(job_types)} job types, "
          f"{len(set(used))} (type, count) pairs, {len(scored)} keys scored "
          f"({len(keys) - len(scored)} that Gavel measured 0 or not at all left out)")
    summary: list[dict[str, object]] = []
    detail: list[dict[str, object]] = []
    for prior_name in args.priors:
        prior = prior_of(prior_name, truth, gpu_types, job_types)
        known = len(job_types & set(getattr(prior, "job_types", ()) or ()))
        if known:
            raise SystemExit(f"prior {prior_name} knows {known} of the slice's job types")
        for stage in STAGES:
            noise = random.Random(args.seed)
            model = LearnedThroughput(prior, gpu_types)
            # a run where Gavel measured nothing (it cannot run there) is not made
            runs = [(job_type, gpu, count, speed)
                    for job_type, gpu, count in observations(stage, used, gpu_types)
                    if (speed := truth.throughput(job_type, gpu, count, Placement.PACKED)) > 0]
            for job_type, gpu, count, speed in runs:
                steps = speed * args.run_seconds * max(0.0, 1 + noise.gauss(0, args.noise))
                model.observe(job_type, gpu, count, Placement.PACKED, steps, args.run_seconds)
            errors: dict[Placement, list[float]] = {p: [] for p in Placement}
            rules: dict[Placement, Counter[str]] = {p: Counter() for p in Placement}
            close: dict[Placement, Counter[str]] = {p: Counter() for p in Placement}
            for key in scored:
                value, rule = model.explain(*key)
                real = truth.throughput(*key)
                error = abs(value - real) / real
                errors[key[3]].append(error)
                rules[key[3]][rule] += 1
                close[key[3]][rule] += error <= WITHIN
                detail.append({"prior": prior_name, "stage": stage, "job_type": key[0],
                               "gpu_type": key[1], "num_gpus": key[2],
                               "placement": key[3].value, "truth": real, "learned": value,
                               "rule": rule, "rel_error": error})
            for placement in Placement:
                found = errors[placement]
                summary.append({
                    "prior": prior_name, "stage": stage, "placement": placement.value,
                    "runs": len(runs), "keys": len(found),
                    "median_rel_error": statistics.median(found),
                    "max_rel_error": max(found),
                    "within_10pct": sum(1 for e in found if e <= WITHIN),
                    **{f"by_{rule}": rules[placement][rule] for rule in RULES},
                    **{f"within_10pct_{rule}": close[placement][rule] for rule in RULES}})
    return summary, detail


def replays(args: argparse.Namespace) -> list[dict[str, object]]:
    """Per policy, the average JCT seen through the truth, the learned model and the
    never-learning one (see the module)."""
    read, truth, gpu_types, _ = load(args.jobs)
    jobs = read.jobs[:args.jobs]
    rows: list[dict[str, object]] = []
    for name in args.replay:
        jct: dict[str, float] = {}
        learned_rows, worst = 0, math.nan
        for sees in ("truth", "learned", "bootstrap"):
            model = LearnedThroughput(catalogue_table(list(gpu_types)), gpu_types)
            learner = RunLearner(model, truth, read.cluster) if sees == "learned" else None
            simulator = Simulator(read.cluster, jobs, rolling(name), truth=truth,
                                  model=truth if sees == "truth" else PolicyView(model, truth),
                                  restart_penalty_s=RESTART_PENALTY_S, learner=learner)
            replay = simulator.run()
            finished = [r.finish - r.job.arrival for r in replay.records.values()
                        if r.finish is not None]
            if len(finished) != len(jobs):
                raise SystemExit(f"{name} seeing {sees}: {len(finished)} of {len(jobs)} "
                                 "jobs finished")
            jct[sees] = statistics.fmean(finished)
            if sees == "learned":
                learned_rows = len(model.rows())
                # the wrapper's accounting: each measured key against Gavel's figure
                worst = max(abs(v - truth.throughput(j, g, n, p)) / truth.throughput(j, g, n, p)
                            for j, g, n, p, v in model.rows())
        rows.append({"policy": name, "jobs": len(jobs), "keys_learned": learned_rows,
                     "learned_max_rel_error": worst,
                     "avg_jct_truth_s": jct["truth"], "avg_jct_learned_s": jct["learned"],
                     "avg_jct_bootstrap_s": jct["bootstrap"],
                     "learned_vs_truth": jct["learned"] / jct["truth"] - 1,
                     "bootstrap_vs_truth": jct["bootstrap"] / jct["truth"] - 1})
    return rows


def print_table(rows: list[dict[str, object]]) -> None:
    """The summary as an aligned table."""
    head = ("prior", "stage", "placement", "runs", "keys", "median", "max", "within 10%",
            "by rule: measured/count/type/boot (within 10%)")
    print("  ".join(f"{h:>11}" for h in head))
    for row in rows:
        rules = "/".join(f"{row[f'by_{rule}']} ({row[f'within_10pct_{rule}']})" for rule in
                         ("measured", "count-scaled", "type-borrowed"))
        boot = sum(int(str(row[f"by_{rule}"])) for rule in ("bootstrap", "fallback"))
        boot_close = sum(int(str(row[f"within_10pct_{rule}"]))
                         for rule in ("bootstrap", "fallback"))
        cells = (row["prior"], row["stage"], row["placement"], row["runs"], row["keys"],
                 f"{float(str(row['median_rel_error'])):.1%}",
                 f"{float(str(row['max_rel_error'])):.0%}",
                 f"{row['within_10pct']}/{row['keys']}", f"  {rules}/{boot} ({boot_close})")
        print("  ".join(f"{c!s:>11}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100, help="the trace's first N jobs")
    parser.add_argument("--priors", type=lambda s: s.split(","), default=list(PRIORS),
                        help="comma-separated, of " + ", ".join(PRIORS))
    parser.add_argument("--run-seconds", type=float, default=600.0,
                        help="trace seconds of each observed run")
    parser.add_argument("--noise", type=float, default=0.02,
                        help="relative standard deviation of an observed run's speed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="the summary as CSV")
    parser.add_argument("--keys-out", type=Path, help="every key's answer as CSV")
    parser.add_argument("--replay", type=lambda s: s.split(","), default=[],
                        help="comma-separated policies to replay (see the module)")
    parser.add_argument("--replay-out", type=Path, help="the replays' rows as CSV")
    parser.add_argument("-v", "--verbose", action="store_true", help="key=value rows too")
    args = parser.parse_args(argv)
    if not TRACE.is_file() or not THROUGHPUT.is_file():
        print(f"needs {TRACE} and {THROUGHPUT} (../shared/data)", file=sys.stderr)
        return 2
    unknown = [p for p in args.priors if p not in PRIORS]
    if unknown or args.jobs < 1 or not math.isfinite(args.run_seconds) \
            or args.run_seconds <= 0 or not 0 <= args.noise < 1:
        parser.error("bad --priors, --jobs, --run-seconds or --noise")
    summary, detail = score(args)
    print_table(summary)
    if args.verbose:
        for row in summary:
            print(row_line(row))
    if args.out:
        write_csv(args.out, summary)
    if args.keys_out:
        write_csv(args.keys_out, detail)
    if args.replay:
        rows = replays(args)
        for row in rows:
            print(row_line(row))
        if args.replay_out:
            write_csv(args.replay_out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
