"""The ``policy`` section of benchmarks/elastic.py: elastic ``progress`` on Pollux's
workloads beside Pollux's own ``pollux`` (issue 37's targets).

Pollux's 8 workloads (``workloads/`` at load 1.0; ``workloads-0.5``, ``-1.5``, ``-2.0``)
on 16 nodes of 4 T4s (``t4=64x4``), 30 s restart penalty (Pollux's re-scale time), each
replay passing the checker, under:

* ``progress`` (non-elastic): every job at the GPUs and batch size it asked for;
* ``progress --elastic``: every job elastic, its GPU count chosen by the round among
  Pollux's configurations, its batch by the job (docs/elastic.md);
* the same with ``progress(round_s=120, horizon_s=120)`` (``elastic_short_rounds``):
  rounds of 120 s instead of 1,800 (so jobs grow into freed GPUs sooner; Pollux decides
  every 60 s) and a restart that must pay back within 120 s instead of 360;
* ``progress-elastic --elastic`` (``progress_elastic``): those short rounds, each job
  planned with its rate over the next 120 s, and GPU time priced by the jobs it delays
  (docs/elastic.md).

Per load it prints and writes (``elastic_policy.csv`` and a plot of the means against the
load, ``elastic_policy.png``; or ``elastic_policy_quick.*``)
each workload's average JCT under each, Pollux's ``pollux`` and ``tiresias`` figures
(``reference-results/``), and the means over the workloads (Pollux's figure): the
target is elastic ``progress`` at or below Pollux's ``pollux`` at every load and at least
30 % below non-elastic ``progress``. It also records the decision time of the elastic
and ``progress-elastic`` replays (p95 over every decision of every replay of the load;
wall clock, so run it on a quiet machine) and their fallbacks (the target: p95 <= 0.5 s
at 64 GPUs, 0 fallbacks).
``--quick``: workloads 1 and 2 at load 1.0; ``--loads 2.0``: that load only, the CSV's
rows of the other loads kept as they were measured.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Protocol

import numpy as np

from hetsched.core.settings import ReplaySettings
from hetsched.registry import rolling
from hetsched.replaying import replay_trace

CLUSTER = "t4=64x4"
LOADS = (0.5, 1.0, 1.5, 2.0)
#: ``progress``'s settings of the ``elastic_short_rounds`` column.
SHORT_ROUNDS = {"round_s": 120.0, "horizon_s": 120.0}
FIELDS = ("load", "workload", "jobs", "progress_avg_jct_s", "elastic_avg_jct_s",
          "elastic_short_rounds_avg_jct_s",
          "pollux_pollux_avg_jct_s", "pollux_tiresias_avg_jct_s", "elastic_over_pollux",
          "elastic_over_progress", "elastic_decision_p95_s", "elastic_fallbacks",
          "elastic_resizes", "progress_elastic_avg_jct_s", "progress_elastic_over_pollux",
          "progress_elastic_over_progress", "progress_elastic_decision_p95_s",
          "progress_elastic_fallbacks")


class Settings(Protocol):
    """What benchmarks/elastic.py passes each section."""

    quick: bool
    data: Path
    out: Path
    loads: tuple[float, ...] | None


def workload(pollux: Path, load: float, index: int) -> Path:
    """Pollux's workload ``index`` at ``load``."""
    folder = "workloads" if load == 1.0 else f"workloads-{load:.1f}"
    return pollux / folder / f"workload-{index}.csv"


def reference(pollux: Path, policy: str, load: float, name: str) -> float:
    """The average JCT (s) of Pollux's ``policy`` on workload ``name`` at ``load``."""
    path = pollux / "reference-results" / f"jobload-{policy}-{load:.1f}.json"
    jcts: dict[str, float] = json.loads(path.read_text())["jcts"][name]
    return sum(jcts.values()) / len(jcts)


def policy_section(settings: Settings) -> None:
    """Elastic and non-elastic ``progress`` beside Pollux (module notes)."""
    pollux = settings.data.parent  # (--data is Pollux's traces/)
    loads = (1.0,) if settings.quick else settings.loads or LOADS
    indices = (1, 2) if settings.quick else tuple(range(1, 9))
    rows: list[dict[str, object]] = []
    path = _csv_path(settings)
    if settings.loads is not None and not settings.quick and path.exists():
        with path.open(newline="") as handle:  # the other loads' rows, as measured
            rows = [dict(r) for r in csv.DictReader(handle)
                    if float(r["load"]) not in loads]
    for load in loads:
        times: list[float] = []
        tuned_times: list[float] = []
        fallbacks = tuned_fallbacks = 0
        for index in indices:
            path, name = workload(pollux, load, index), f"workload-{index}"
            plain = replay_trace(path, "pollux", CLUSTER, "progress",
                                 settings=ReplaySettings(restart_penalty_s=30.0))
            elastic = replay_trace(path, "pollux", CLUSTER, "progress",
                                   settings=ReplaySettings(restart_penalty_s=30.0,
                                                           elastic=True))
            short = replay_trace(path, "pollux", CLUSTER, rolling("progress", **SHORT_ROUNDS),
                                 settings=ReplaySettings(restart_penalty_s=30.0,
                                                         elastic=True))
            tuned = replay_trace(path, "pollux", CLUSTER, "progress-elastic",
                                 settings=ReplaySettings(restart_penalty_s=30.0,
                                                         elastic=True))
            spent = [d.decision_time_s for d in elastic.decisions]
            times += spent
            tuned_spent = [d.decision_time_s for d in tuned.decisions]
            tuned_times += tuned_spent
            tuned_summary = tuned.summary()
            tuned_fallbacks += int(str(tuned_summary["fallbacks"]))
            best = float(str(tuned_summary["avg_jct_s"]))
            summary = elastic.summary()
            fallbacks += int(str(summary["fallbacks"]))
            ours = float(str(summary["avg_jct_s"]))
            base = float(str(plain.summary()["avg_jct_s"]))
            theirs = reference(pollux, "pollux", load, name)
            rows.append({"load": load, "workload": name, "jobs": len(elastic.records),
                         "progress_avg_jct_s": round(base, 1),
                         "elastic_avg_jct_s": round(ours, 1),
                         "elastic_short_rounds_avg_jct_s": round(
                             float(str(short.summary()["avg_jct_s"])), 1),
                         "pollux_pollux_avg_jct_s": round(theirs, 1),
                         "pollux_tiresias_avg_jct_s": round(
                             reference(pollux, "tiresias", load, name), 1),
                         "elastic_over_pollux": round(ours / theirs, 4),
                         "elastic_over_progress": round(ours / base, 4),
                         "elastic_decision_p95_s": round(float(np.percentile(spent, 95)), 4),
                         "elastic_fallbacks": summary["fallbacks"],
                         "elastic_resizes": summary["preemptions"],
                         "progress_elastic_avg_jct_s": round(best, 1),
                         "progress_elastic_over_pollux": round(best / theirs, 4),
                         "progress_elastic_over_progress": round(best / base, 4),
                         "progress_elastic_decision_p95_s": round(
                             float(np.percentile(tuned_spent, 95)), 4),
                         "progress_elastic_fallbacks": tuned_summary["fallbacks"]})
            print(f"load {load:.1f} {name}: elastic {ours:8,.0f} s  progress-elastic "
                  f"{best:8,.0f} s  non-elastic {base:8,.0f} s  Pollux pollux {theirs:8,.0f} s",
                  flush=True)
        mine = [r for r in rows if r["load"] == load]

        def mean(key: str, of: list[dict[str, object]] = mine) -> float:
            return sum(float(str(r[key])) for r in of) / len(of)

        p95 = float(np.percentile(times, 95))
        rows.append({"load": load, "workload": "mean", "jobs": "",
                     "progress_avg_jct_s": round(mean("progress_avg_jct_s"), 1),
                     "elastic_avg_jct_s": round(mean("elastic_avg_jct_s"), 1),
                     "elastic_short_rounds_avg_jct_s": round(
                         mean("elastic_short_rounds_avg_jct_s"), 1),
                     "pollux_pollux_avg_jct_s": round(mean("pollux_pollux_avg_jct_s"), 1),
                     "pollux_tiresias_avg_jct_s": round(mean("pollux_tiresias_avg_jct_s"), 1),
                     "elastic_over_pollux": round(mean("elastic_avg_jct_s")
                                                  / mean("pollux_pollux_avg_jct_s"), 4),
                     "elastic_over_progress": round(mean("elastic_avg_jct_s")
                                                    / mean("progress_avg_jct_s"), 4),
                     "elastic_decision_p95_s": round(p95, 4), "elastic_fallbacks": fallbacks,
                     "elastic_resizes": "",
                     "progress_elastic_avg_jct_s": round(mean("progress_elastic_avg_jct_s"), 1),
                     "progress_elastic_over_pollux": round(
                         mean("progress_elastic_avg_jct_s") / mean("pollux_pollux_avg_jct_s"),
                         4),
                     "progress_elastic_over_progress": round(
                         mean("progress_elastic_avg_jct_s") / mean("progress_avg_jct_s"), 4),
                     "progress_elastic_decision_p95_s": round(
                         float(np.percentile(tuned_times, 95)), 4),
                     "progress_elastic_fallbacks": tuned_fallbacks})
        last = rows[-1]
        print(f"load {load:.1f} mean of the workloads: elastic {last['elastic_avg_jct_s']:,} s,"
              f" with short rounds {last['elastic_short_rounds_avg_jct_s']:,} s,"
              f" non-elastic {last['progress_avg_jct_s']:,} s, Pollux pollux "
              f"{last['pollux_pollux_avg_jct_s']:,} s: {last['elastic_over_pollux']} of "
              f"Pollux's, {last['elastic_over_progress']} of non-elastic; decision p95 "
              f"{p95:.3f} s, {fallbacks} fallbacks", flush=True)
        print(f"load {load:.1f} progress-elastic {last['progress_elastic_avg_jct_s']:,} s: "
              f"{last['progress_elastic_over_pollux']} of Pollux's, "
              f"{last['progress_elastic_over_progress']} of non-elastic; decision p95 "
              f"{last['progress_elastic_decision_p95_s']} s, {tuned_fallbacks} fallbacks",
              flush=True)
        rows.sort(key=lambda r: float(str(r["load"])))  # (stable: each load's rows in order)
        write(settings, rows)  # (after every load: a run stopped keeps what finished)



#: The plot's lines: (column, label, style).
LINES = (("progress_avg_jct_s", "hetsched progress, non-elastic", "s--"),
         ("pollux_tiresias_avg_jct_s", "Pollux's tiresias (its simulator)", "v:"),
         ("pollux_pollux_avg_jct_s", "Pollux's pollux, elastic (its simulator)", "^-"),
         ("elastic_avg_jct_s", "hetsched progress, elastic", "o-"),
         ("elastic_short_rounds_avg_jct_s", "hetsched progress, elastic, 120 s rounds", "D-"),
         ("progress_elastic_avg_jct_s", "hetsched progress-elastic", "*-"))


def plot(rows: list[dict[str, object]], path: Path) -> None:
    """Average JCT (the mean over the workloads) against the load, one line per policy,
    as a PNG at ``path``."""
    from matplotlib.figure import Figure

    means = [r for r in rows if r["workload"] == "mean"]
    loads = [float(str(r["load"])) for r in means]
    figure = Figure(figsize=(7.0, 4.5))
    ax = figure.add_subplot()
    for column, label, style in LINES:
        if any(r.get(column) in (None, "") for r in means):
            continue  # (a column the CSV's earlier rows were measured without)
        ax.plot(loads, [float(str(r[column])) / 3600.0 for r in means], style, label=label)
    ax.set_xlabel("job load (Pollux's workloads-<load>)")
    ax.set_ylabel("average JCT (h), mean over the workloads")
    ax.set_title("Pollux's 8 workloads on 16 nodes x 4 T4")
    ax.set_xticks(loads)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


def write(settings: Settings, rows: list[dict[str, object]]) -> None:
    """``rows`` as ``elastic_policy.csv`` (or ``_quick``) and its plot."""
    path = _csv_path(settings)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
    plot(rows, path.with_suffix(".png"))


def _csv_path(settings: Settings) -> Path:
    """Where the section's CSV goes."""
    return settings.out / ("elastic_policy_quick.csv" if settings.quick else
                           "elastic_policy.csv")
