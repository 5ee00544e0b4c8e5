"""hetsched beside Sia's own simulator on Sia's workloads and 64-GPU cluster (issue 63).

Sia (SOSP'23, artifact ``siasosp23/artifacts``, ``sia-simulator/``) is run by
``benchmarks/sia_side.py`` from a scratch checkout at a pinned commit, in its own venv,
as its ``run_experiment.sh`` runs it (``sia``: p = -0.5, lambda_a 0.01, lambda_n 1.1, 60 s
rounds; ``gavel``: 360 s rounds, the workload's GPUs and batch: Sia's "tuned jobs"); only
its figures are kept (``results/sia/sia_runs.csv``, a row per finished run, and
``jobs-<trace>-<k>-<policy>.csv``, its per-job times). hetsched replays the same workload
files on the same cluster (``aws=24x4,rtx=24x8,dgx-ext=16x8``) with Sia's measurements
(``--format sia``): ``progress-elastic`` with every job adaptive (``--elastic``), and
``gavel`` with rigid jobs; a row per finished run in ``results/sia/hetsched_runs.csv``.
Each run of either side is skipped when its row is on record, so the benchmark resumes
across sessions.

Both sides' figures are computed here the same way from per-job times: average JCT, p99
JCT (numpy's linear percentile), makespan (the last completion less the first arrival),
GPU-hours per job, and the worst finish-time fairness rho
(:func:`hetsched.core.fairness.finish_time_fairness`, Themis's rho with Gavel's isolated
share, over the jobs as hetsched reads them: the same definition for both schedules).
Decision times are each side's own: hetsched's per decision (timing.json), Sia's per
round (its "Policy optimization" lines), both on this loaded 2-core machine.

Differences kept on purpose (docs/elastic.md, "Sia's workloads"): Sia's re-scale time is
per application (15 to 250 s, 50 s for cifar10, 84 % of saturn's jobs) at every change
of placement; a replay has one start latency for every start (:data:`START_LATENCY_S`, no
restart penalty beyond it). Sia's jobs choose their batch from a goodput model fitted to
what they have run; hetsched's adaptive jobs run each epoch at the batch with the best
true goodput.

    python benchmarks/sia.py --quick            # saturn 1-2, both sides, then the table
    python benchmarks/sia.py --traces saturn,philly,newtrace --workloads 3,3,2
    python benchmarks/sia.py --no-sia            # hetsched only; Sia's rows on record
    python benchmarks/sia.py --no-sia --rho      # rho by both definitions (rho.csv)
    python benchmarks/sia.py --no-sia --gavel-trace --traces saturn --workloads 2

The table is printed last; ``results/sia/sia_<trace>.png`` plots each trace.
"""

from __future__ import annotations

import argparse
import csv
import functools
import logging
import math
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from hetsched.speeds.sia import SiaThroughput

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "sia"
SCRATCH = Path("/work/scratch/sia")
CLUSTER = "aws=24x4,rtx=24x8,dgx-ext=16x8"
#: one start latency for every start (s): Sia's re-scale time of cifar10
START_LATENCY_S = 50.0
#: the workloads of each trace in Sia's artifact
WORKLOADS = {"saturn": 10, "philly": 8, "newtrace": 10}
#: hetsched's policies: name -> (the registry's policy, elastic jobs, its settings, what
#: it plans with: ReplaySettings.learn); progress plans each restart at the start latency
#: it costs here
POLICIES: dict[str, tuple[str, bool, dict[str, float], str]] = {
    "progress-elastic": ("progress-elastic", True, {"restart_penalty_s": START_LATENCY_S},
                         "off"),
    # Sia's bootstrap (its --project_throughput, as run_experiment.sh runs sia): each job
    # type known on one GPU of each type, its scaling learned as it runs
    # (hetsched.speeds.bootstrap)
    "progress-elastic-bootstrap": ("progress-elastic", True,
                                   {"restart_penalty_s": START_LATENCY_S}, "bootstrap"),
    "progress-elastic-rho": ("progress-elastic", True,
                             {"restart_penalty_s": START_LATENCY_S, "rho_bound": 1.0}, "off"),
    # Sia's gavel: Gavel's max_sum_throughput_perf (simulator_config.py), 360 s rounds
    "gavel": ("gavel-max-sum-raw", False, {"round_s": 360.0}, "off"),
}
#: the policies run by default
DEFAULT_POLICIES = ("progress-elastic", "progress-elastic-bootstrap", "gavel")
#: Sia's paper, Table 3 (64 GPUs): average JCT, p99 JCT, makespan (h) per trace and system
PAPER = {
    "philly": {"sia": (0.6, 9.5, 14.2), "pollux": (1.0, 14.9, 24.5), "gavel": (1.9, 30.0, 33.8)},
    "saturn": {"sia": (0.7, 10.9, 14.9), "pollux": (1.0, 15.0, 25.5), "gavel": (2.5, 38.7, 43.0)},
    "newtrace": {"sia": (0.7, 4.6, 52.2), "pollux": (1.5, 10.3, 62.3),
                 "gavel": (11.3, 98.1, 110.0)},
}
COLUMNS = ("trace", "workload", "system", "policy", "jobs", "completed", "avg_jct_s",
           "p99_jct_s", "makespan_s", "gpu_hours_per_job", "worst_rho", "decision_p50_s",
           "decision_p95_s", "fallbacks", "wall_s")

log = logging.getLogger("sia")


def workload_file(sia: Path, trace: str, index: int) -> Path:
    """Sia's workload ``index`` of ``trace``."""
    return sia / "workloads" / trace / f"workload-{index}.csv"


@functools.cache
def sia_model(sia: Path) -> SiaThroughput:
    """Sia's measurements in ``sia/traces``, read once a run of this script."""
    from hetsched.speeds.sia import read_sia

    return read_sia(sia / "traces")


def figures(jobs: Sequence[object], finish: Mapping[str, float], gpu_seconds: float,
            model: object, cluster: object) -> dict[str, float]:
    """The figures of one schedule (module notes): ``jobs`` as hetsched reads them,
    ``finish`` job id -> completion (trace s, the first arrival at 0)."""
    from hetsched.core.fairness import finish_time_fairness

    done = [job for job in jobs if job.id in finish]  # type: ignore[attr-defined]
    jcts = [finish[job.id] - job.arrival for job in done]  # type: ignore[attr-defined]
    rho = finish_time_fairness(done, finish, cluster, model)  # type: ignore[arg-type]
    first = min(job.arrival for job in jobs)  # type: ignore[attr-defined]
    return {"jobs": len(jobs), "completed": len(done),
            "avg_jct_s": float(np.mean(jcts)) if jcts else math.nan,
            "p99_jct_s": float(np.percentile(jcts, 99)) if jcts else math.nan,
            "makespan_s": max(finish.values()) - first if finish else math.nan,
            "gpu_hours_per_job": gpu_seconds / 3600.0 / max(1, len(jobs)),
            "worst_rho": max(rho.values(), default=math.nan)}


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows on record in ``path`` (none if absent)."""
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def append_row(path: Path, row: Mapping[str, object], columns: Sequence[str]) -> None:
    """One finished run's row, written at once (the benchmark resumes from them)."""
    new = not path.is_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, list(columns), extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow({key: (f"{value:.6g}" if isinstance(value, float) else value)
                         for key, value in row.items()})


def replay(sia: Path, trace: str, index: int, policy: str) -> Any:
    """hetsched's replay of Sia's workload under ``policy`` (:data:`POLICIES`), checked
    (replay_trace raises on a checker violation)."""
    import hetsched
    from hetsched.core.settings import ReplaySettings
    from hetsched.registry import rolling

    name, elastic, params, learn = POLICIES[policy]
    settings = ReplaySettings(start_latency_s=START_LATENCY_S, restart_penalty_s=0.0,
                              elastic=elastic, learn=learn)
    return hetsched.replay_trace(workload_file(sia, trace, index), "sia", CLUSTER,
                                 rolling(name, **settings.policy_arguments(), **params),
                                 settings=settings)


def hetsched_run(sia: Path, trace: str, index: int, policy: str) -> dict[str, object]:
    """One replay of Sia's workload by hetsched (module notes), its figures."""
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.traces import read_trace

    path = workload_file(sia, trace, index)
    elastic = POLICIES[policy][1]
    began = time.monotonic()
    result = replay(sia, trace, index, policy)
    wall = time.monotonic() - began
    model = sia_model(sia)
    jobs = read_trace(path, "sia", throughput=model, elastic=elastic).jobs
    records = result.replay.records
    finish = {job_id: r.finish for job_id, r in records.items() if r.finish is not None}
    frame = result.replay.jobs_frame()
    found = figures(jobs, finish, float(sum(frame["gpu_seconds"])), model,
                    parse_cluster(CLUSTER))
    timing = result.replay.timing()
    return {"trace": trace, "workload": index, "system": "hetsched", "policy": policy,
            **found, "decision_p50_s": timing.get("decision_time_p50_s"),
            "decision_p95_s": timing.get("decision_time_p95_s"),
            "fallbacks": result.summary.fallbacks, "wall_s": wall}


def sia_figures(sia: Path, trace: str, index: int, policy: str, record: Mapping[str, str],
                folder: Path) -> dict[str, object]:
    """Sia's run of ``policy`` on the workload as this benchmark computes figures: from
    its per-job completion times (``jobs-<trace>-<k>-<policy>.csv``), its decision times
    as ``sia_side.py`` recorded them."""
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.traces import read_trace

    path = workload_file(sia, trace, index)
    model = sia_model(sia)
    jobs = read_trace(path, "sia", throughput=model, elastic=policy != "gavel").jobs
    first = min(float(row["time"]) for row in read_rows(path))
    per_job = read_rows(folder / f"jobs-{trace}-{index}-{policy}.csv")
    finish = {row["name"]: float(done) - first for row in per_job
              if (done := row.get("completion_s", row.get("completion_time_s")))
              not in (None, "", "nan")}
    gpu_seconds = sum(float(row.get("gpu_seconds") or 0.0) for row in per_job)
    found = figures(jobs, finish, gpu_seconds, model, parse_cluster(CLUSTER))
    return {"trace": trace, "workload": index, "system": "sia", "policy": policy, **found,
            "decision_p50_s": record.get("decision_p50_s"),
            "decision_p95_s": record.get("decision_p95_s"), "fallbacks": "",
            "wall_s": record.get("wall_s")}


def run_sia(trace: str, indices: Iterable[int], policies: Sequence[str], out: Path,
            scratch: Path) -> None:
    """Sia's simulator on the runs not on record (benchmarks/sia_side.py; hours)."""
    done = {(r["trace"], r["workload"], r["policy"]) for r in read_rows(out / "sia_runs.csv")}
    missing = [i for i in indices for p in policies if (trace, str(i), p) not in done]
    if not missing:
        return
    workloads = ",".join(str(i) for i in sorted(set(missing)))
    command = [sys.executable, str(ROOT / "benchmarks" / "sia_side.py"), "run", "--scratch",
               str(scratch), "--trace", trace, "--workloads", workloads, "--policies",
               ",".join(policies), "--out", str(out)]
    log.info("Sia's simulator: %s", " ".join(command))
    subprocess.run(command, check=True)


def physics(sia: Path, out: Path) -> list[dict[str, object]]:
    """One job alone on each (GPU type, count) in both simulators: Sia's seconds as
    ``sia_side.py probe`` measured them (``physics_sia.csv``: its Job stepped alone on a
    fixed placement, the re-scale time apart) beside hetsched's, the job's work over its
    throughput there (rigid: at the row's batch; adaptive: its goodput at the best batch
    of each epoch); ``error`` = hetsched / Sia - 1 of the time training."""
    from hetsched.core.throughput import Placement
    from hetsched.speeds.pollux import elastic_job_type_name, job_type_name

    model = sia_model(sia)
    rows: list[dict[str, object]] = []
    for probe in read_rows(out / "physics_sia.csv"):
        app, gpu, count = probe["app"], probe["gpu_type"], int(probe["num_gpus"])
        seconds = float(probe["seconds"]) - float(probe.get("restart_s") or 0.0)
        per_node = model.by_type[gpu].gpus_per_node
        placement = Placement.PACKED if count <= per_node else Placement.SPREAD
        if probe["mode"] == "rigid":
            batch = int(probe["batch_size"])
            job_type = job_type_name(app, batch)
            work = model.by_type["rtx"].applications[app].steps_to_goal(batch, count)
        else:
            job_type = elastic_job_type_name(app)
            work = model.applications[app].goal_base_steps
        speed = model.throughput(job_type, gpu, count, placement)
        ours = work / speed if speed > 0 else math.inf
        rows.append({**probe, "sia_training_s": seconds, "hetsched_training_s": ours,
                     "error": ours / seconds - 1 if seconds > 0 else math.nan})
    return rows


#: hetsched's gavel beside Sia's (``--gavel-trace``): label -> (round realisation, least
#: time between solves, batch of events, start latency); see docs/elastic.md, "Gavel"
GAVEL_TRACE: dict[str, tuple[str, float, float | None, float]] = {
    "hetsched rounds, 50 s a start": ("hetsched", 1920.0, None, START_LATENCY_S),
    "+ Sia's 360 s steps": ("hetsched", 1920.0, 360.0, START_LATENCY_S),
    "Gavel's rounds, no start cost": ("gavel", 1920.0, None, 0.0),
    "Gavel's rounds, 50 s a start": ("gavel", 1920.0, None, START_LATENCY_S),
    "Gavel's rounds solved each round, no start cost": ("gavel", 360.0, None, 0.0),
    "Gavel's rounds solved each round, 50 s a start": ("gavel", 360.0, None,
                                                       START_LATENCY_S),
}


def gavel_trace(sia: Path, out: Path, indices: Sequence[int]) -> list[dict[str, object]]:
    """``gavel-max-sum-raw`` (rigid jobs, 360 s rounds) on saturn's workloads in each of
    :data:`GAVEL_TRACE`'s configurations, against Sia's ``gavel`` on record: average JCT
    and restarts a job (every start after a job's first), both sides."""
    import hetsched
    from hetsched.core.settings import ReplaySettings
    from hetsched.registry import rolling

    theirs = {r["workload"]: r for r in read_rows(out / "sia_runs.csv")
              if r["trace"] == "saturn" and r["policy"] == "gavel"}
    rows: list[dict[str, object]] = []
    for index in indices:
        if str(index) not in theirs:
            continue
        sia_jct = float(theirs[str(index)]["avg_jct_s"])
        for label, (rounds, reset_s, batch_s, latency_s) in GAVEL_TRACE.items():
            settings = ReplaySettings(start_latency_s=latency_s, restart_penalty_s=0.0,
                                      batch_s=batch_s)
            made = rolling("gavel-max-sum-raw", **settings.policy_arguments(), round_s=360.0,
                           rounds=rounds, reset_interval_s=reset_s)
            result = hetsched.replay_trace(workload_file(sia, "saturn", index), "sia",
                                           CLUSTER, made, settings=settings)
            records = result.replay.records.values()
            restarts = sum(sum(not s.continued for s in r.segments) - 1 for r in records)
            jct = result.summary.avg_jct_s
            rows.append({"workload": index, "hetsched": label, "avg_jct_s": round(jct, 1),
                         "sia_avg_jct_s": sia_jct, "ratio": round(jct / sia_jct, 3),
                         "restarts_per_job": round(restarts / len(records), 2),
                         "sia_restarts_per_job": theirs[str(index)]["restarts_per_job"]})
            log.info("saturn-%d %s: %.0f s (x%.3f Sia's gavel)", index, label, jct,
                     jct / sia_jct)
    return rows


#: the schedules ``--rho`` measures: (system, policy)
RHO_SCHEDULES = (("hetsched", "progress-elastic"), ("hetsched", "progress-elastic-bootstrap"),
                 ("sia", "sia"))


def hetsched_finishes(sia: Path, trace: str, index: int, policy: str,
                      out: Path) -> dict[str, float]:
    """Each job's finish (trace s) in hetsched's replay of the workload under ``policy``,
    from ``jobs-hetsched-<trace>-<k>-<policy>.csv`` where on record, else replayed (as
    :func:`replay`) and recorded."""
    path = out / f"jobs-hetsched-{trace}-{index}-{policy}.csv"
    if not path.is_file():
        result = replay(sia, trace, index, policy)
        rows = [{"name": job_id, "finish_s": record.finish}
                for job_id, record in sorted(result.replay.records.items())
                if record.finish is not None]
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, ["name", "finish_s"])
            writer.writeheader()
            writer.writerows(rows)
    return {row["name"]: float(row["finish_s"]) for row in read_rows(path)}


def rho_rows(sia: Path, out: Path, traces: Sequence[str], counts: Sequence[int]
             ) -> list[dict[str, object]]:
    """Each schedule's finish-time fairness by both definitions: hetsched's (Gavel's
    isolated allocation at the job's asked GPUs: ``worst_rho`` of the table) and Sia's
    rule (the job alone, elastic, on its share of each type's GPUs:
    :mod:`hetsched.core.elastic_fairness`): the worst, the p99 and the jobs above 1.2."""
    from hetsched.core.elastic_fairness import elastic_finish_time_fairness
    from hetsched.core.fairness import finish_time_fairness
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.traces import read_trace

    model, cluster = sia_model(sia), parse_cluster(CLUSTER)
    rows: list[dict[str, object]] = []
    for trace, count in zip(traces, counts, strict=True):
        for index in range(1, count + 1):
            path = workload_file(sia, trace, index)
            jobs = read_trace(path, "sia", throughput=model, elastic=True).jobs
            first = min(float(row["time"]) for row in read_rows(path))
            for system, policy in RHO_SCHEDULES:
                if system == "sia":
                    record = out / f"jobs-{trace}-{index}-sia.csv"
                    if not record.is_file():
                        continue
                    finish = {r["name"]: float(r["completion_s"]) - first
                              for r in read_rows(record)
                              if r.get("completion_s") not in (None, "", "nan")}
                else:
                    finish = hetsched_finishes(sia, trace, index, policy, out)
                done = [job for job in jobs if job.id in finish]
                for rule, rho in (
                        ("hetsched", finish_time_fairness(done, finish, cluster, model)),
                        ("sia", elastic_finish_time_fairness(done, finish, cluster, model,
                                                             start_s=START_LATENCY_S))):
                    values = np.array(sorted(rho.values()))
                    rows.append({"trace": trace, "workload": index, "system": system,
                                 "policy": policy, "rule": rule, "jobs": len(values),
                                 "worst_rho": round(float(values[-1]), 3),
                                 "p99_rho": round(float(np.percentile(values, 99)), 3),
                                 "above_1_2": int((values > 1.2).sum())})
                log.info("rho %s %s %s-%d done", system, policy, trace, index)
    return rows


def table(rows: Sequence[Mapping[str, object]]) -> str:
    """The side-by-side table: per trace, each system and policy's mean over the workloads
    it shares with Sia's ``sia`` run (listed), Sia's ``sia`` over the same workloads
    beside it, and the paper's Table 3 below."""
    lines = []
    for trace in WORKLOADS:
        mine = [r for r in rows if r["trace"] == trace]
        if not mine:
            continue
        lines.append(f"\n{trace}: avg JCT / p99 JCT / makespan (h), GPU-h a job, worst rho, "
                     "decision p50/p95 (s); against Sia's sia on the same workloads")
        sia_rows = {str(r["workload"]): r for r in mine
                    if r["system"] == "sia" and r["policy"] == "sia"}
        for key in sorted({(str(r["system"]), str(r["policy"])) for r in mine}):
            chosen = [r for r in mine if (r["system"], r["policy"]) == key
                      and (str(r["workload"]) in sia_rows or not sia_rows)]
            if not chosen:
                continue
            used = sorted({str(r["workload"]) for r in chosen}, key=int)
            theirs = [sia_rows[w] for w in used if w in sia_rows]
            h = [_mean(chosen, name) / 3600 for name in ("avg_jct_s", "p99_jct_s",
                                                          "makespan_s")]
            ratios = " ".join(f"{name} x{_mean(chosen, column) / _mean(theirs, column):.2f}"
                              for name, column in (("avg", "avg_jct_s"), ("p99", "p99_jct_s"),
                                                   ("makespan", "makespan_s"))) \
                if theirs else ""
            lines.append(
                f"  {key[0]:8s} {key[1]:26s} {h[0]:6.2f} / {h[1]:6.2f} / {h[2]:6.2f}  "
                f"{_mean(chosen, 'gpu_hours_per_job'):6.2f}  "
                f"{max(float(str(r['worst_rho'])) for r in chosen):5.2f}  "
                f"{_mean(chosen, 'decision_p50_s'):.3f}/{_mean(chosen, 'decision_p95_s'):.3f}"
                f"  [{','.join(used)}] {ratios}")
        lines.extend(_bootstrap_cost(mine))
        lines.append("  the paper (10 or 8 workloads): " + ", ".join(
            f"{system} {a:g}/{b:g}/{c:g}" for system, (a, b, c) in PAPER[trace].items()))
    return "\n".join(lines)


def _bootstrap_cost(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """progress-elastic with Sia's bootstrap against the same policy told the truth, on
    the workloads both ran: average JCT, p99 and makespan, each workload's average."""
    by = {(str(r["policy"]), str(r["workload"])): r for r in rows if r["system"] == "hetsched"}
    used = sorted((w for p, w in by if p == "progress-elastic-bootstrap"
                   and ("progress-elastic", w) in by), key=int)
    if not used:
        return []
    boot = [by["progress-elastic-bootstrap", w] for w in used]
    truth = [by["progress-elastic", w] for w in used]
    ratios = " ".join(f"{name} x{_mean(boot, column) / _mean(truth, column):.3f}"
                      for name, column in (("avg", "avg_jct_s"), ("p99", "p99_jct_s"),
                                           ("makespan", "makespan_s")))
    each = ", ".join(f"{w}: x{float(str(b['avg_jct_s'])) / float(str(t['avg_jct_s'])):.3f}"
                     for w, b, t in zip(used, boot, truth, strict=True))
    return [f"  bootstrap against the truth [{','.join(used)}]: {ratios} (avg JCT {each})"]


def _mean(rows: Sequence[Mapping[str, object]], column: str) -> float:
    values = [float(str(r[column])) for r in rows if str(r.get(column, "")) not in ("", "None")]
    return float(np.mean(values)) if values else math.nan


def plot(rows: Sequence[Mapping[str, object]], out: Path) -> None:
    """One figure per trace: each system's mean average JCT, p99 JCT and makespan."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for trace in WORKLOADS:
        mine = [r for r in rows if r["trace"] == trace]
        keys = sorted({(str(r["system"]), str(r["policy"])) for r in mine})
        if not keys:
            continue
        fig, axes = plt.subplots(1, 3, figsize=(11, 4.2))
        for ax, (column, title) in zip(axes, (("avg_jct_s", "average JCT"),
                                              ("p99_jct_s", "p99 JCT"),
                                              ("makespan_s", "makespan")), strict=True):
            values = [_mean([r for r in mine if (r["system"], r["policy"]) == key], column)
                      / 3600 for key in keys]
            ax.bar(range(len(keys)), values, color=["C1" if k[0] == "sia" else "C0"
                                                    for k in keys])
            ax.set_xticks(range(len(keys)), [f"{k[0]} {k[1]}" for k in keys], fontsize=8,
                          rotation=30, ha="right")
            ax.set_title(f"{trace}: {title} (h)")
        fig.tight_layout()
        fig.savefig(out / f"sia_{trace}.png", dpi=110)
        plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run what is not on record, then print the table (module notes)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="saturn workloads 1-2")
    parser.add_argument("--traces", default="saturn,philly,newtrace")
    parser.add_argument("--workloads", default="3,3,2",
                        help="how many workloads of each trace (1..k), in --traces order")
    parser.add_argument("--policies", default=",".join(DEFAULT_POLICIES),
                        help="of " + ", ".join(POLICIES))
    parser.add_argument("--sia-policies", default="sia,gavel")
    parser.add_argument("--no-sia", action="store_true",
                        help="run no Sia simulation: its rows on record only")
    parser.add_argument("--sia", type=Path, default=None,
                        help="Sia's sia-simulator folder (default: the scratch checkout)")
    parser.add_argument("--scratch", type=Path, default=SCRATCH)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--physics", action="store_true",
                        help="only compare one job alone per (type, count) with Sia's "
                        "probe (physics_sia.csv), writing physics.csv")
    parser.add_argument("--rho", action="store_true",
                        help="only measure each schedule's finish-time fairness by "
                        "hetsched's and Sia's definitions (rho.csv)")
    parser.add_argument("--gavel-trace", action="store_true",
                        help="only set hetsched's gavel beside Sia's on saturn's workloads "
                        "in each way of realising it (gavel_trace.csv)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    traces = ["saturn"] if args.quick else args.traces.split(",")
    counts = [2] if args.quick else [int(k) for k in args.workloads.split(",")]
    sia = args.sia or args.scratch / "artifacts" / "sia-simulator"
    if not (sia / "traces").is_dir():
        if args.no_sia:
            sys.exit(f"{sia}/traces is absent: give --sia SIA (Sia's sia-simulator folder)")
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sia_side.py"), "prepare",
                        "--scratch", str(args.scratch)], check=True)
    if args.physics:
        found = physics(sia, args.out)
        columns = list(found[0]) if found else ["app"]
        with (args.out / "physics.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, columns)
            writer.writeheader()
            writer.writerows(found)
        errors = sorted(abs(float(str(r["error"]))) for r in found
                        if math.isfinite(float(str(r["error"]))))
        for row in found:
            print(f"{row['app']:12s} {row['gpu_type']:8s} {row['num_gpus']:>3} "
                  f"{row['mode']:9s} Sia {float(str(row['sia_training_s'])):10.0f} s  "
                  f"hetsched {float(str(row['hetsched_training_s'])):10.0f} s  "
                  f"{100 * float(str(row['error'])):+6.1f} %")
        if errors:
            within = sum(e <= 0.05 for e in errors)
            median = 100 * errors[len(errors) // 2]
            print(f"{within} of {len(errors)} within 5 % (median {median:.1f} %, max "
                  f"{100 * errors[-1]:.1f} %)")
        return 0
    if args.rho:
        found = rho_rows(sia, args.out, traces, counts)
        with (args.out / "rho.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, list(found[0]) if found else ["trace"])
            writer.writeheader()
            writer.writerows(found)
        for row in found:
            print(f"{row['trace']}-{row['workload']} {row['system']:8s} {row['policy']:26s} "
                  f"{row['rule']:8s} rule: worst {row['worst_rho']:.3f}, p99 "
                  f"{row['p99_rho']:.3f}, {row['above_1_2']} of {row['jobs']} above 1.2")
        return 0
    if args.gavel_trace:
        found = gavel_trace(sia, args.out, range(1, counts[traces.index("saturn")] + 1))
        with (args.out / "gavel_trace.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, list(found[0]) if found else ["workload"])
            writer.writeheader()
            writer.writerows(found)
        for label in GAVEL_TRACE:
            mine = [r for r in found if r["hetsched"] == label]
            print(f"{label:50s} " + "  ".join(
                f"saturn-{r['workload']}: {float(str(r['avg_jct_s'])):6.0f} s "
                f"x{float(str(r['ratio'])):.3f}, {r['restarts_per_job']} restarts a job "
                f"(Sia {float(str(r['sia_restarts_per_job'])):.2f})" for r in mine))
        return 0
    ours = args.out / "hetsched_runs.csv"
    for trace, count in zip(traces, counts, strict=True):
        for index in range(1, count + 1):
            for policy in args.policies.split(","):
                done = {(r["trace"], r["workload"], r["policy"]) for r in read_rows(ours)}
                if (trace, str(index), policy) in done:
                    continue
                row = hetsched_run(sia, trace, index, policy)
                append_row(ours, row, COLUMNS)
                log.info("hetsched %s %s-%d: avg JCT %.0f s", policy, trace, index,
                         row["avg_jct_s"])
        if not args.no_sia:
            run_sia(trace, range(1, count + 1), args.sia_policies.split(","), args.out,
                    args.scratch)
    rows: list[dict[str, object]] = [
        r for r in read_rows(ours)
        if r["trace"] in traces and int(r["workload"]) <= counts[traces.index(r["trace"])]]
    for record in read_rows(args.out / "sia_runs.csv"):
        if record["trace"] in traces and \
                int(record["workload"]) <= counts[traces.index(record["trace"])]:
            rows.append(sia_figures(sia, record["trace"], int(record["workload"]),
                                    record["policy"], record, args.out))
    plot(rows, args.out)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
