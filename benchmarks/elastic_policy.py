"""The ``policy`` section of benchmarks/elastic.py: elastic ``progress`` on Pollux's
workloads beside Pollux's own ``pollux``.

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
rows of the other loads kept as they were measured; ``--runs progress-elastic``: that
replay only, the other columns kept from the CSV as they were measured.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Protocol, cast

import numpy as np

from hetsched.core.settings import ReplaySettings
from hetsched.registry import rolling
from hetsched.replaying import replay_trace
from hetsched.simulate.record import Replay

CLUSTER = "t4=64x4"
LOADS = (0.5, 1.0, 1.5, 2.0)
#: ``progress``'s settings of the ``elastic_short_rounds`` column.
SHORT_ROUNDS = {"round_s": 120.0, "horizon_s": 120.0}
#: The replays of each workload (``--runs``): non-elastic ``progress``, elastic
#: ``progress``, elastic ``progress`` with short rounds, ``progress-elastic``; and the
#: columns each measures (those of the runs left out are kept from the CSV).
RUNS = ("progress", "elastic", "short", "progress-elastic")
RUN_COLUMNS = {"progress": ("progress_avg_jct_s",),
               "elastic": ("elastic_avg_jct_s", "elastic_decision_p95_s",
                           "elastic_fallbacks", "elastic_resizes", "jobs"),
               "short": ("elastic_short_rounds_avg_jct_s",),
               "progress-elastic": ("progress_elastic_avg_jct_s",
                                    "progress_elastic_decision_p95_s",
                                    "progress_elastic_fallbacks", "jobs")}
#: The average JCT columns (the means row averages them over the workloads).
JCT_COLUMNS = ("progress_avg_jct_s", "elastic_avg_jct_s", "elastic_short_rounds_avg_jct_s",
               "pollux_pollux_avg_jct_s", "pollux_tiresias_avg_jct_s",
               "progress_elastic_avg_jct_s")
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
    runs: tuple[str, ...] | None


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
    runs = settings.runs or RUNS
    rows: list[dict[str, object]] = []
    before: dict[tuple[float, str], dict[str, object]] = {}  # the CSV's rows as measured
    path = _csv_path(settings)
    if (settings.loads is not None or settings.runs is not None) and path.exists():
        with path.open(newline="") as handle:
            for found in csv.DictReader(handle):
                before[(float(found["load"]), found["workload"])] = dict(found)
                if float(found["load"]) not in loads:
                    rows.append(dict(found))  # another load's row, kept
    for load in loads:
        times: list[float] = []
        tuned_times: list[float] = []
        fallbacks = tuned_fallbacks = 0
        for index in indices:
            path, name = workload(pollux, load, index), f"workload-{index}"
            row = _measure(path, runs, before.get((load, name)), load, name)
            for run, spent in (("elastic", times), ("progress-elastic", tuned_times)):
                spent.extend(cast(list[float], row.pop(f"_{run}_times", [])))
            fallbacks += int(str(row["elastic_fallbacks"] or 0))
            tuned_fallbacks += int(str(row["progress_elastic_fallbacks"] or 0))
            theirs = reference(pollux, "pollux", load, name)
            row.update({"load": load, "workload": name,
                        "pollux_pollux_avg_jct_s": round(theirs, 1),
                        "pollux_tiresias_avg_jct_s": round(
                            reference(pollux, "tiresias", load, name), 1)})
            _ratios(row)
            rows.append(row)
            print(f"load {load:.1f} {name}: elastic {_f(row, 'elastic_avg_jct_s')} s  "
                  f"progress-elastic {_f(row, 'progress_elastic_avg_jct_s')} s  non-elastic "
                  f"{_f(row, 'progress_avg_jct_s')} s  Pollux pollux {theirs:8,.0f} s",
                  flush=True)
        mine = [r for r in rows if float(str(r["load"])) == load]

        def mean(key: str, of: list[dict[str, object]] = mine) -> float:
            return sum(float(str(r[key])) for r in of) / len(of)

        kept = before.get((load, "mean"), {})
        last: dict[str, object] = {"load": load, "workload": "mean", "jobs": "",
                                   "elastic_resizes": ""}
        for key in JCT_COLUMNS:  # (a column kept blank in a row: the kept mean's)
            last[key] = round(mean(key), 1) if all(r.get(key) not in (None, "")
                                                   for r in mine) else _kept(kept.get(key))
        _ratios(last)
        # Decision time and fallbacks of the replays run, else the kept mean's.
        for run, spent, count in (("elastic", times, fallbacks),
                                  ("progress-elastic", tuned_times, tuned_fallbacks)):
            prefix = run.replace("-", "_")
            for key, value in ((f"{prefix}_decision_p95_s",
                                round(float(np.percentile(spent, 95)), 4) if spent else 0),
                               (f"{prefix}_fallbacks", count)):
                last[key] = value if run in runs else _kept(kept.get(key))
        rows.append(last)
        print(f"load {load:.1f} mean of the workloads: elastic {_f(last, 'elastic_avg_jct_s')} "
              f"s, with short rounds {_f(last, 'elastic_short_rounds_avg_jct_s')} s, "
              f"non-elastic {_f(last, 'progress_avg_jct_s')} s, Pollux pollux "
              f"{_f(last, 'pollux_pollux_avg_jct_s')} s: {last.get('elastic_over_pollux', '-')}"
              f" of Pollux's, {last.get('elastic_over_progress', '-')} of non-elastic; "
              f"decision p95 {last['elastic_decision_p95_s']} s, "
              f"{last['elastic_fallbacks']} fallbacks", flush=True)
        print(f"load {load:.1f} progress-elastic {_f(last, 'progress_elastic_avg_jct_s')} s: "
              f"{last.get('progress_elastic_over_pollux', '-')} of Pollux's, "
              f"{last.get('progress_elastic_over_progress', '-')} of non-elastic; decision p95 "
              f"{last['progress_elastic_decision_p95_s']} s, "
              f"{last['progress_elastic_fallbacks']} fallbacks", flush=True)
        rows.sort(key=lambda r: float(str(r["load"])))  # (stable: each load's rows in order)
        write(settings, rows)  # (after every load: a run stopped keeps what finished)


def _measure(path: Path, runs: tuple[str, ...], before: dict[str, object] | None,
             load: float, name: str) -> dict[str, object]:
    """One workload's row: the ``runs`` replayed, the other columns as ``before`` had
    them (blank where it had none; a ``SystemExit`` naming the row where it has no
    non-elastic figure, which the ratios need)."""
    row: dict[str, object] = {}
    for run in RUNS:
        if run in runs:
            continue
        if before is None or (run == "progress" and before.get("progress_avg_jct_s")
                              in (None, "")):
            raise SystemExit(f"--runs without {run}: the CSV has no {run} figures for load "
                             f"{load} {name}; run it too")
        row.update({c: before.get(c, "") for c in RUN_COLUMNS[run]})
    elastic_settings = ReplaySettings(restart_penalty_s=30.0, elastic=True)
    for run in runs:
        if run == "progress":
            ran = replay_trace(path, "pollux", CLUSTER, "progress",
                               settings=ReplaySettings(restart_penalty_s=30.0)).replay
            row["progress_avg_jct_s"] = round(_jct(ran), 1)
        elif run == "short":
            ran = replay_trace(path, "pollux", CLUSTER, rolling("progress", **SHORT_ROUNDS),
                               settings=elastic_settings).replay
            row["elastic_short_rounds_avg_jct_s"] = round(_jct(ran), 1)
        else:
            policy = "progress" if run == "elastic" else "progress-elastic"
            ran = replay_trace(path, "pollux", CLUSTER, policy,
                               settings=elastic_settings).replay
            spent = [d.decision_time_s for d in ran.decisions]
            summary = ran.summary()
            prefix = run.replace("-", "_")
            row.update({f"{prefix}_avg_jct_s": round(_jct(ran), 1),
                        f"{prefix}_decision_p95_s": round(float(np.percentile(spent, 95)), 4),
                        f"{prefix}_fallbacks": summary["fallbacks"],
                        f"_{run}_times": spent, "jobs": len(ran.records)})
            if run == "elastic":
                row["elastic_resizes"] = summary["preemptions"]
    return row


def _jct(ran: Replay) -> float:
    """A replay's average JCT (s)."""
    return float(str(ran.summary()["avg_jct_s"]))


def _ratios(row: dict[str, object]) -> None:
    """The row's ratios, from its average JCTs."""
    theirs = float(str(row["pollux_pollux_avg_jct_s"]))
    base = float(str(row["progress_avg_jct_s"]))
    for prefix in ("elastic", "progress_elastic"):
        if row.get(f"{prefix}_avg_jct_s") in (None, ""):
            continue
        ours = float(str(row[f"{prefix}_avg_jct_s"]))
        row[f"{prefix}_over_pollux"] = round(ours / theirs, 4)
        row[f"{prefix}_over_progress"] = round(ours / base, 4)


def _kept(value: object) -> object:
    """A kept CSV figure as a number, a count as an int (blank stays blank)."""
    if value in (None, ""):
        return ""
    text = str(value)
    return int(text) if text.isdigit() else float(text)


def _f(row: dict[str, object], key: str) -> str:
    """A row's figure for the log."""
    return f"{float(str(row[key])):8,.0f}" if row.get(key) not in (None, "") else "       -"


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
