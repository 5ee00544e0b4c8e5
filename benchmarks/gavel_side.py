"""What the benchmarks set beside Gavel's own simulator share (``fairness.py``,
``gavel_family.py``): the jobs (the first N of ee9e8c), the cluster, the Gavel trace of
exactly those jobs, hetsched's replay of them, and Gavel's per-job JCTs read back.

Gavel's side is run outside this project (stanford-futuredata/gavel, its
``scheduler/scripts/drivers`` simulator on the trace :func:`write_gavel_trace` writes)
and handed in as CSV files of ``job,arrival,jct`` (job i is line i of the trace; more
columns, such as ``cost_usd``, are kept). Only measurements are committed, never Gavel's
code."""

from __future__ import annotations

import csv
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common import DATA

if TYPE_CHECKING:
    import argparse

    from hetsched.files.replay_inputs import TraceJobs
    from hetsched.simulate.record import Replay

TRACE = DATA / "gavel" / "traces" / "ee9e8c.trace"
THROUGHPUT = DATA / "gavel" / "simulation_throughputs.json"
#: One server of 36 GPUs per type: Gavel's simulator runs every gang at the table's
#: (consolidated) throughput wherever its GPUs are, which is hetsched's packed placement;
#: with servers of 4 GPUs hetsched would run an 8-GPU job spread, up to 9x slower.
CLUSTER = "v100=36x36,p100=36x36,k80=36x36"


def read_jobs(limit: int) -> TraceJobs:
    """The jobs, cluster and measured throughput hetsched replays."""
    from hetsched.core.settings import ReplaySettings
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.replay_inputs import trace_jobs

    if not TRACE.is_file():
        sys.exit(f"{TRACE} is absent: this benchmark needs ../shared/data")
    return trace_jobs(TRACE, "gavel", parse_cluster(CLUSTER), throughput_path=THROUGHPUT,
                      settings=ReplaySettings(limit_jobs=limit))


def add_side_arguments(parser: argparse.ArgumentParser, gavel_help: str) -> None:
    """The options of every script set beside Gavel's simulator: ``--jobs``, ``--quick``,
    ``--write-gavel-trace`` and ``--gavel NAME=FILE`` (``gavel_help`` says what FILE holds)."""
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="60 jobs, hetsched's side only")
    parser.add_argument("--write-gavel-trace", type=Path, default=None)
    parser.add_argument("--gavel", action="append", default=[], metavar="NAME=FILE",
                        help=gavel_help)


def jobs_to_replay(args: argparse.Namespace) -> TraceJobs | None:
    """The jobs of :func:`add_side_arguments`' options (``--quick``: 60 and no Gavel
    files); None once ``--write-gavel-trace`` has written them as Gavel's trace instead."""
    if args.quick:
        args.jobs, args.gavel = 60, []
    if args.write_gavel_trace is not None:
        write_gavel_trace(args.write_gavel_trace, args.jobs)
        return None
    return read_jobs(args.jobs)


def write_gavel_trace(path: Path, limit: int) -> None:
    """The jobs hetsched replays as a Gavel 10-field trace (line i is job i): the gang
    sizes hetsched caps where Gavel's table has no throughput."""
    read = read_jobs(limit)
    with path.open("w") as handle:
        for job in read.jobs:
            handle.write("\t".join([job.job_type, "true", "", "-n", "0", str(int(job.work)),
                                    str(job.num_gpus), "1", "-1", repr(job.arrival)]) + "\n")
    print(f"wrote {path}: {len(read.jobs)} jobs")


@dataclass(frozen=True)
class HetschedRun:
    """hetsched's replay of the jobs and what it cost in time."""

    replay: Replay
    finish: dict[str, float]
    wall_s: float
    cpu_s: float


#: How a policy is realised beside Gavel, by the suffix of ``NAME:SUFFIX``: ``rounds``,
#: only the rounds start jobs; ``gavel``, Gavel's simulator's rounds; ``central``, those
#: rounds and the interior optimum ECOS returns; ``bisection``, those rounds at the
#: makespan Gavel's bisection stops at (min-total-duration); ``lp``, ``ftf``'s LP iteration;
#: ``flat``/``gavel-flat``, water-filling over jobs alone; ``whole``, hetsched's rounds
#: taking the jobs allocated all of their time first (``keep_whole``).
VARIANTS: dict[str, dict[str, object]] = {
    "": {}, "rounds": {"work_conserving": False}, "gavel": {"rounds": "gavel"},
    "central": {"rounds": "gavel", "spare": "central"},
    "bisection": {"rounds": "gavel", "spare": "gavel"}, "lp": {"spare": "lp"},
    "flat": {"hierarchical": False}, "gavel-flat": {"rounds": "gavel", "hierarchical": False},
    "whole": {"keep_whole": True},
    # (the packed policies, which always run Gavel's rounds)
    "inside": {"spare": "gavel"}, "raw": {"normalized": False},
    "exact": {"share_digits": None}, "raw-exact": {"normalized": False, "share_digits": None}}


def variant(policy: str) -> tuple[str, dict[str, object]]:
    """``NAME:SUFFIX`` as the registered policy's name and its parameters (VARIANTS)."""
    name, _, suffix = policy.partition(":")
    if suffix not in VARIANTS:
        sys.exit(f"{policy}: unknown suffix {suffix!r} (expected one of "
                 f"{', '.join(repr(k) for k in VARIANTS)})")
    return name, VARIANTS[suffix]


def hetsched_replay(read: TraceJobs, policy: str, *, prices: str | None = None,
                    **params: object) -> HetschedRun:
    """hetsched's replay of the jobs under ``policy`` (a registered policy's ``NAME`` or
    ``NAME:SUFFIX``, :func:`variant`; made with ``params`` too) with no restart penalty,
    the policy shown the measured throughput (Gavel's simulator gives its policies the
    table's throughputs, its "oracle") and the table's measured pairs (``gavel-packed``);
    ``prices`` (``v100=0.74,...``, USD per GPU-hour) set on the cluster's types (None:
    none)."""
    from hetsched.core.settings import ReplaySettings
    from hetsched.registry import rolling
    from hetsched.replaying import replay

    name, preset = variant(policy)
    made = rolling(name, **preset, **params)
    began, cpu = time.perf_counter(), time.process_time()
    ran = replay(read.jobs, read.cluster, made, throughput=read.truth,
                 settings=ReplaySettings(restart_penalty_s=0.0, prices=prices or {}),
                 colocation=read.colocation).replay
    finish = {r.job.id: r.finish for r in ran.records.values() if r.finish is not None}
    return HetschedRun(ran, finish, time.perf_counter() - began, time.process_time() - cpu)


def read_gavel_jobs(read: TraceJobs, path: Path) -> dict[str, dict[str, float]]:
    """Gavel's simulator's figures per job id (``jct`` in s, absent for a job it did not
    complete, and any further column), from ``job,arrival,jct[,...]`` (job i is line i
    of the trace); exits if an arrival is not hetsched's (not the same trace)."""
    jobs = read.jobs
    figures: dict[str, dict[str, float]] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            job = jobs[int(row["job"])]
            if abs(float(row["arrival"]) - job.arrival) > 1e-6 * max(1.0, job.arrival):
                sys.exit(f"{path}: job {row['job']} arrives at {row['arrival']}, hetsched's "
                         f"at {job.arrival}: not the same trace")
            figures[job.id] = {key: float(value) for key, value in row.items()
                               if key not in ("job", "arrival") and value not in ("", "None")}
    return figures


def gavel_finish(read: TraceJobs, path: Path) -> dict[str, float]:
    """Each job's finish in Gavel's simulator (arrival + JCT), completed jobs only."""
    arrival = {job.id: job.arrival for job in read.jobs}
    return {job_id: arrival[job_id] + row["jct"]
            for job_id, row in read_gavel_jobs(read, path).items() if "jct" in row}
