"""Finish-time fairness side by side with Gavel's own simulator: the first 300 jobs of
ee9e8c on 36 V100 + 36 P100 + 36 K80 (one server each, see CLUSTER), no restart
penalty, under hetsched's ``ftf`` and ``ftf-agnostic`` and Gavel's
``finish_time_fairness_perf`` and ``finish_time_fairness``:
average JCT, mean and max rho (hetsched.core.fairness, one definition for both sides,
computed from each job's arrival and finish), and the ratios.

Gavel's side is run outside this project (stanford-futuredata/gavel, fetched; its
``scheduler/scripts/drivers`` simulator on the trace this script writes with
``--write-gavel-trace``, which holds exactly the jobs hetsched replays: the gang sizes
hetsched caps where Gavel's table has no throughput, in Gavel's 10-field layout) and
handed in as CSV files of ``job,arrival,jct`` (``--gavel NAME=FILE``; job ids are the
trace's line order). Only measurements are committed, never Gavel's code.

    python benchmarks/fairness.py --write-gavel-trace /tmp/ee300.trace
    python benchmarks/fairness.py --gavel finish_time_fairness_perf=/tmp/g-perf.csv \\
        --gavel finish_time_fairness=/tmp/g-agn.csv --out benchmarks/results/fairness.csv
    # several round lengths on both sides (Gavel's run with its --round R each):
    python benchmarks/fairness.py --round-lengths 355,358,360,362,365 \\
        --gavel finish_time_fairness_perf@355=/tmp/g-perf-355.csv ...
    python benchmarks/fairness.py --quick     # 60 jobs, hetsched's side only

Prints a line per run and writes CSV. Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from common import DATA, ROOT, row_line, sorted_columns, write_csv
from gavel_side import (
    THROUGHPUT,
    add_side_arguments,
    gavel_finish,
    hetsched_replay,
    jobs_to_replay,
    variant,
)

if TYPE_CHECKING:
    from hetsched.files.replay_inputs import TraceJobs

#: Gavel's policy measured beside each hetsched policy (``:rounds``: not work conserving,
#: hetsched's ``work_conserving=False``; ``:gavel``: realised as Gavel's simulator realises
#: it, ``rounds="gavel"``).
PEERS = {"ftf": "finish_time_fairness_perf", "ftf:rounds": "finish_time_fairness_perf",
         "ftf:gavel": "finish_time_fairness_perf",
         "ftf:central": "finish_time_fairness_perf",
         "ftf-agnostic": "finish_time_fairness",
         "ftf-agnostic:rounds": "finish_time_fairness",
         "ftf-agnostic:gavel": "finish_time_fairness",
         "ftf-agnostic:central": "finish_time_fairness"}


def figures(read: TraceJobs, finish: dict[str, float]) -> dict[str, float]:
    """Average JCT, mean and max rho and the share of jobs with rho > 1."""
    from hetsched.core.fairness import finish_time_fairness

    jobs = read.jobs
    rho = finish_time_fairness(jobs, finish, read.cluster, read.truth)
    arrival = {job.id: job.arrival for job in jobs}
    jct = [finish[j] - arrival[j] for j in finish]
    values = list(rho.values())
    return {"completed": len(finish), "avg_jct_s": sum(jct) / len(jct),
            "mean_rho": sum(values) / len(values), "max_rho": max(values),
            "rho_above_1": sum(1 for v in values if v > 1) / len(values)}


def hetsched_run(read: TraceJobs, policy: str, round_s: float = 360.0) -> dict[str, object]:
    """hetsched's replay of the jobs under ``policy`` (``NAME:rounds``: not work
    conserving; ``NAME:gavel``: Gavel's rounds; ``NAME:central``: Gavel's rounds and the
    central optimum, ``spare="central"``) in rounds of ``round_s``, with no restart
    penalty, the policy shown the measured throughput."""
    ran = hetsched_replay(read, policy, round_s=round_s)
    timing = ran.replay.timing()
    return {"side": "hetsched", "policy": policy, "round_s": round_s,
            **figures(read, ran.finish),
            "decision_p95_s": timing["decision_time_p95_s"],
            "wall_s": ran.wall_s, "cpu_s": ran.cpu_s}


def gavel_run(read: TraceJobs, name: str, path: Path) -> dict[str, object]:
    """Gavel's simulator's JCTs (``job,arrival,jct``; job i is line i of the trace);
    ``name`` is its policy, or ``POLICY@ROUND_S`` for a run with rounds of ROUND_S."""
    policy, _, round_s = name.partition("@")
    return {"side": "gavel", "policy": policy, "round_s": float(round_s or 360.0),
            **figures(read, gavel_finish(read, path))}


def over_rounds(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """For each side and policy run at several round lengths, a row of the means of its
    figures over them (``round_s`` "mean of N"): finish-time ratios move with the phase
    of the rounds (which short jobs arrive just after a reset), on both sides."""
    groups: dict[tuple[str, str], list[dict[str, object]]] = {}
    for row in rows:
        if "round_s" in row:
            groups.setdefault((str(row["side"]), str(row["policy"])), []).append(row)
    means = []
    for (side, policy), runs in groups.items():
        if len(runs) > 1:
            keys = ("avg_jct_s", "mean_rho", "max_rho", "rho_above_1")
            means.append({"side": side, "policy": policy, "round_s": f"mean of {len(runs)}",
                          **{k: sum(float(str(r[k])) for r in runs) / len(runs)
                             for k in keys}})
    return means


def philly_jobs(active: int) -> TraceJobs:
    """The first ``active`` jobs of Philly's trace on 32 + 32 + 32 GPUs, the measured
    throughput."""
    from hetsched.core.settings import ReplaySettings
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.replay_inputs import trace_jobs

    return trace_jobs(DATA / "philly" / "philly.csv", "philly",
                      parse_cluster("v100=32,p100=32,k80=32"), throughput_path=THROUGHPUT,
                      settings=ReplaySettings(limit_jobs=active))


def decision_times(active: int, repeats: int) -> list[dict[str, object]]:
    """Wall seconds of one decision with ``active`` jobs waiting at once (the first jobs
    of Philly's trace, all arrived, on 32 + 32 + 32 GPUs with half of them busy): ``ftf``'s
    (a first solve, then solves after one arrival) and the quota keeper's around
    ``fifo`` (instances/philly_tenants.json), median and p95 over ``repeats`` calls."""
    import statistics

    from hetsched.core.throughput import Placement
    from hetsched.files.tenants import read_tenants
    from hetsched.policies.quotas import TenantKeeper
    from hetsched.policies.rolling import ClusterState, RunningJob
    from hetsched.registry import rolling

    read = philly_jobs(active)
    jobs = [dataclasses.replace(job, arrival=0.0) for job in read.jobs]
    cluster = read.cluster
    # The first jobs that fit run on half of each type's GPUs; the rest wait.
    running: list[RunningJob] = []
    left = {t: cluster.num_gpus(t) // 2 for t in cluster.type_names}
    gpus = {t: [g.id for g in cluster.gpus if g.gpu_type == t] for t in cluster.type_names}
    for job in jobs:
        for gpu_type in cluster.type_names:
            if job.num_gpus <= left[gpu_type] and read.truth.throughput(
                    job.job_type, gpu_type, job.num_gpus, Placement.PACKED) > 0:
                taken = gpus[gpu_type][:job.num_gpus]
                gpus[gpu_type] = gpus[gpu_type][job.num_gpus:]
                left[gpu_type] -= job.num_gpus
                running.append(RunningJob(job, gpu_type, tuple(taken), 0.0, job.work))
                break
    busy = {g for r in running for g in r.gpus}
    pending = tuple(j for j in jobs if j.id not in {r.job.id for r in running})
    state = ClusterState(3600.0, cluster, read.truth, pending, {j.id: j.work for j in pending},
                         tuple(running), frozenset(g.id for g in cluster.gpus) - busy)
    rows: list[dict[str, object]] = []
    tenants = read_tenants(ROOT / "instances" / "philly_tenants.json")
    for label, make in (("ftf", lambda: rolling("ftf")),
                        ("quotas around fifo", lambda: TenantKeeper(rolling("fifo"), tenants))):
        times = []
        for index in range(repeats):
            policy = make()
            if label == "ftf" and index % 2:  # a solve a round after the one before, with
                # one job more (warm-started)
                policy.decide(dataclasses.replace(state, now=state.now - 360.0,
                                                  pending=pending[1:]))
            began = time.perf_counter()
            policy.decide(state)
            times.append(time.perf_counter() - began)
        times.sort()
        rows.append({"side": "hetsched", "policy": f"decision time: {label}",
                     "active_jobs": len(pending) + len(running),
                     "decision_p50_s": statistics.median(times),
                     "decision_p95_s": times[min(len(times) - 1, int(0.95 * len(times)))]})
    return rows


def philly_shares(active: int, policies: list[str]) -> list[dict[str, object]]:
    """Weighted shares on Philly's virtual clusters as tenants: the first ``active`` jobs
    of Philly's trace on 32 + 32 + 32 GPUs, instances/philly_weights.json's weights (4,
    2 and 1 for the busiest six; 1 for the others), restart penalty 30 s; per policy
    (``NAME`` or ``NAME:gavel``, Gavel's rounds) and unit (GPU-seconds, and normalised
    GPU-seconds: each GPU valued by the job's speed there over its equal-share speed), a
    row per tenant (``NAME+preempt``: the table's ``preempt_for_shares`` on): received and
    entitled to by weighted max-min (hetsched.core.shares)
    while two tenants or more have work, then a row "all" over the tenants with at least
    1 % of the entitlement."""
    from hetsched.core.shares import weighted_shares
    from hetsched.core.throughput import Placement
    from hetsched.files.tenants import read_tenants
    from hetsched.registry import rolling
    from hetsched.replaying import replay

    read = philly_jobs(active)
    table = read_tenants(ROOT / "instances" / "philly_weights.json")
    rows: list[dict[str, object]] = []
    for policy in policies:
        named, _, extra = policy.partition("+")
        if extra not in ("", "preempt"):
            sys.exit(f"{policy}: unknown +{extra} (expected +preempt or nothing)")
        name, params = variant(named)
        made = rolling(name, **params)
        kept = dataclasses.replace(table, preempt_for_shares=extra == "preempt")
        began = time.perf_counter()
        ran = replay(read.jobs, read.cluster, made, throughput=read.truth, tenants=kept)
        wall = time.perf_counter() - began
        finish = {r.job.id: r.finish for r in ran.replay.records.values() if r.finish is not None}
        segments = [s for r in ran.replay.records.values() for s in r.segments]
        types = read.cluster.type_names
        speeds = {job.id: {t: read.truth.throughput(job.job_type, t, job.num_gpus,
                                                    Placement.PACKED) for t in types}
                  for job in read.jobs}
        gpus_of = {t: read.cluster.num_gpus(t) for t in types}
        for unit, extra in (("gpu_s", {}), ("normalised", {"speeds": speeds,
                                                          "gpus_of": gpus_of})):
            shares = weighted_shares(read.jobs, finish, segments, table.weights(),
                                     len(read.cluster.gpus), **extra)  # type: ignore[arg-type]
            total = sum(share.entitled_gpu_s for share in shares)
            counted = [sh for sh in shares if sh.entitled_gpu_s >= 0.01 * total]
            label = f"shares ({unit}): {policy}"
            for share in shares:
                rows.append({"side": "hetsched", "policy": label, "tenant": share.tenant,
                             "weight": share.weight, "received_gpu_s": share.received_gpu_s,
                             "entitled_gpu_s": share.entitled_gpu_s,
                             "received_over_entitled": share.ratio})
            rows.append({"side": "hetsched", "policy": label, "tenant": "all",
                         "completed": len(finish), "wall_s": wall,
                         "tenants_counted": len(counted),
                         "worst_deviation": max(abs(sh.ratio - 1.0) for sh in counted)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_side_arguments(parser, "Gavel's per-job JCTs for its policy NAME")
    parser.add_argument("--policies", default="ftf,ftf:rounds,ftf:gavel,ftf-agnostic,"
                        "ftf-agnostic:rounds,ftf-agnostic:gavel,gavel",
                        help="NAME, NAME:rounds (only the rounds start jobs) or NAME:gavel "
                        "(realised as Gavel's simulator does: rounds='gavel')")
    parser.add_argument("--decision-times", type=int, default=0, metavar="N",
                        help="also time one decision of ftf and of the quota keeper with N "
                        "active jobs (the target: 2,000)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--philly-shares", type=int, default=0, metavar="N",
                        help="also measure weighted shares on the first N Philly jobs "
                        "(the target: 2,000), policies of --share-policies")
    parser.add_argument("--share-policies",
                        default="gavel,gavel:gavel,gavel-water-filling,gavel-water-filling:gavel,"
                        "gavel-water-filling-gpus,gavel-water-filling-gpus:gavel,"
                        "gavel-water-filling-gpus:flat,gavel-water-filling-gpus:gavel-flat,"
                        "gavel-water-filling-gpus+preempt,"
                        "gavel-water-filling-gpus:gavel+preempt,gavel-water-filling-gpus:whole,"
                        "gavel-water-filling-gpus:whole+preempt")
    parser.add_argument("--round-lengths", default="360",
                        help="hetsched's rounds (s), comma separated: each policy runs "
                        "at each (Gavel's side: --gavel POLICY@ROUND_S=FILE)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    read = jobs_to_replay(args)
    if read is None:
        return
    lengths = [float(x) for x in args.round_lengths.split(",")]
    rows = [hetsched_run(read, policy, round_s) for policy in args.policies.split(",")
            if policy for round_s in lengths]
    if args.decision_times:
        rows += decision_times(args.decision_times, args.repeats)
    if args.philly_shares:
        rows += philly_shares(args.philly_shares, args.share_policies.split(","))
    for item in args.gavel:
        name, _, file = item.partition("=")
        rows.append(gavel_run(read, name, Path(file)))
    rows += over_rounds(rows)
    # (a policy at several round lengths is compared by the means over them)
    by_policy = {(str(r["side"]), str(r["policy"])): r for r in rows}
    for ours, theirs in PEERS.items():
        mine, peer = by_policy.get(("hetsched", ours)), by_policy.get(("gavel", theirs))
        if mine is not None and peer is not None:
            for key in ("avg_jct_s", "mean_rho", "max_rho"):
                mine[f"{key}_vs_gavel"] = float(str(mine[key])) / float(str(peer[key]))
    for row in rows:
        print(row_line(row))
    if args.out is not None:
        write_csv(args.out, rows, sorted_columns(rows, ("side", "policy")))


if __name__ == "__main__":
    main()
