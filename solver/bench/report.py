"""The bench's report: ``report.md`` (one table per load, the lower bounds and the
ratios to them) and its plots, drawn from ``results.csv`` and the runs' files
(:func:`write_report`; see docs/bench.md)."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetsched.bench.references import read_references, reference_lines
from hetsched.bench.results import (
    BenchRow,
    bench_rows,
    duration_text,
    exact_models,
    is_heuristic,
)
from hetsched.core.errors import InputError
from hetsched.core.outputs import writing
from hetsched.simulate.summary import cell_float

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Column:
    title: str
    value: Callable[[BenchRow], float]
    best: str  # "min" or "max"
    kind: str  # "time", "ratio", "fraction", "count", "seconds"


def _deadline_ratio(row: BenchRow) -> float:
    jobs = row.summary.deadline_jobs
    return row.summary.deadline_met / jobs if jobs > 0 else math.nan


COLUMNS = (
    _Column("avg JCT", lambda r: r.summary.avg_jct_s, "min", "time"),
    _Column("p95 JCT", lambda r: r.summary.p95_jct_s, "min", "time"),
    _Column("deadlines met", _deadline_ratio, "max", "fraction"),
    _Column("utilisation", lambda r: r.summary.utilization, "max", "fraction"),
    _Column("max rho", lambda r: r.summary.max_rho, "min", "ratio"),
    _Column("mean rho", lambda r: r.summary.mean_rho, "min", "ratio"),
    _Column("decision p95 (s)", lambda r: r.decision_time_p95_s, "min",
            "seconds"),
    _Column("fallbacks", lambda r: float(r.summary.fallbacks), "min", "count"),
    _Column("wall time (s)", lambda r: r.wall_time_s, "min", "seconds"),
    _Column("avg JCT / bound", lambda r: r.avg_jct_over_bound, "min", "ratio"),
    _Column("avg JCT / LP bound", lambda r: r.avg_jct_over_lp_bound, "min", "ratio"),
    _Column("makespan / bound", lambda r: r.makespan_over_bound, "min",
            "ratio"),
)


def _number(value: float, kind: str, unit: float = 1.0) -> str:
    """A figure for the report: 3-4 significant digits, percentages for fractions."""
    if not math.isfinite(value):
        return "-"
    if kind == "fraction":
        return f"{100 * value:.1f}%"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "count":
        return f"{value:,.1f}" if value != round(value) else f"{value:,.0f}"
    value /= unit
    if kind == "seconds" and 0 < abs(value) < 0.01:
        return f"{value:.2g}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _time_unit(values: Iterable[float]) -> tuple[str, float]:
    finite = [v for v in values if math.isfinite(v)]
    largest = max(finite, default=0.0)
    if largest >= 36_000:
        return "h", 3600.0
    if largest >= 600:
        return "min", 60.0
    return "s", 1.0


def _stats(values: Sequence[float]) -> tuple[float, float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    return float(np.mean(finite)), min(finite), max(finite)


def _by_load(rows: Sequence[BenchRow]) -> dict[str, list[BenchRow]]:
    groups: dict[str, list[BenchRow]] = {}
    for row in sorted(rows, key=lambda r: r.load):
        groups.setdefault(row.load_label, []).append(row)
    return groups


def _policies(rows: Sequence[BenchRow]) -> list[str]:
    return list(dict.fromkeys(row.policy for row in rows))


def _heuristic(rows: Sequence[BenchRow], label: str) -> bool:
    """Whether the policy behind ``label`` is a heuristic (a labelled policy of a sweep
    spec: the registered one its rows name in ``policy_name``)."""
    names = {r.cells.get("policy_name") or r.policy for r in rows if r.policy == label}
    return all(is_heuristic(name) for name in names or {label})


def load_table(rows: Sequence[BenchRow]) -> list[str]:
    """The markdown table of one load: a row per policy, each column's mean over seeds
    (and min-max with several seeds), the best mean in bold, the ratio of each policy's
    mean average JCT to the best heuristic's."""
    policies = _policies(rows)
    per_policy = {p: [r for r in rows if r.policy == p] for p in policies}
    seeds = max(len(v) for v in per_policy.values())
    stats = {(p, c.title): _stats([c.value(r) for r in per_policy[p]])
             for p in policies for c in COLUMNS}
    units = {c.title: _time_unit(stats[(p, c.title)][2] for p in policies)
             for c in COLUMNS if c.kind == "time"}
    heuristic = [stats[(p, "avg JCT")][0] for p in policies if _heuristic(rows, p)]
    heuristic = [v for v in heuristic if math.isfinite(v)]
    best_heuristic = min(heuristic) if heuristic else math.nan
    titles = []
    for column in COLUMNS:
        suffix = f" ({units[column.title][0]})" if column.title in units else ""
        titles.append(column.title + suffix)
        if column.title == "avg JCT":
            titles.append("vs best heuristic")
    lines = ["| policy | " + " | ".join(titles) + " |",
             "|---|" + "---:|" * len(titles)]
    best = {}
    for column in COLUMNS:
        means = [stats[(p, column.title)][0] for p in policies]
        finite = [m for m in means if math.isfinite(m)]
        best[column.title] = (min(finite) if column.best == "min" else max(finite)) \
            if finite else math.nan
    for policy in policies:
        cells = []
        for column in COLUMNS:
            mean, low, high = stats[(policy, column.title)]
            scale = units.get(column.title, ("", 1.0))[1]
            text = _number(mean, column.kind, scale)
            target = best[column.title]
            if math.isfinite(mean) and abs(mean - target) <= 1e-9 * max(1.0, abs(target)):
                text = f"**{text}**"
            if seeds > 1 and math.isfinite(mean) and high > low:
                text += (f" ({_number(low, column.kind, scale)}-"
                         f"{_number(high, column.kind, scale)})")
            cells.append(text)
            if column.title == "avg JCT":
                cells.append(f"{mean / best_heuristic:.2f}x"
                             if math.isfinite(mean) and math.isfinite(best_heuristic) else "-")
        name = policy if _heuristic(rows, policy) else f"{policy} (model per decision)"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_report(out: Path) -> Path:
    """Write ``report.md`` and the plots from ``out/results.csv`` and ``out/runs/``;
    returns the report's path. They are drawn into a temporary folder in ``out`` and moved
    into place when all are done, the report last: a failure (a full disk: one clear
    error) or an interrupt leaves the previous report and plots."""
    rows = bench_rows(out / "results.csv")
    if not rows:
        raise InputError("no results to report", file=str(out / "results.csv"),
                         expected="a results.csv with at least one row")
    with writing(out, "out", "the report"):
        staging = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
        try:
            _write_report(out, staging, rows)
            for name in sorted(os.listdir(staging), key=lambda n: n == "report.md"):
                os.replace(staging / name, out / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out / "report.md"


def _write_report(out: Path, staging: Path, rows: list[BenchRow]) -> None:
    first = rows[0].cells
    seeds = sorted({r.cells.get("seed", "") for r in rows}, key=cell_float)
    groups = _by_load(rows)
    policies = _policies(rows)
    heuristics = [p for p in policies if _heuristic(rows, p)]
    lines = [
        f"# Benchmark: {Path(first.get('trace', '?')).name} ({first.get('format', '?')}) on "
        f"{first.get('cluster', '?')} ({first.get('gpus', '?')} GPUs)",
        "",
        f"- {first.get('jobs', '?')} jobs per run; throughput (truth): "
        f"{first.get('throughput', '?')}; policies see the fitted view.",
        f"- Seeds {', '.join(seeds)}; loads {', '.join(groups)} (arrival rate multiplied "
        "by the load).",
        "- Each cell: the mean over seeds" + (", then min-max over seeds" if len(seeds) > 1
                                               else "") + ". Best mean in **bold**.",
        "- *vs best heuristic*: average JCT over the lowest average JCT of the heuristics ("
        + (", ".join(heuristics) if heuristics else "none in this bench") + "). Marked "
        "*model per decision*: " + ", ".join(exact_models()) + " and their -agnostic variants "
        "solve an optimisation model at each decision (optimal for that decision's jobs "
        "within its limit, proven or not); over the replay they are heuristics too, not "
        "optimal schedules (docs/progress.md).",
        "- *deadlines met*: share of the jobs with a deadline that finished by it "
        "('-' when no job has one: give --deadline-fraction).",
        "- */ bound*: the policy's average JCT (makespan) over the lower bound of "
        "docs/bench.md; 1.00x would be optimal, no policy can go below.",
        "- */ LP bound*: the average JCT over the time-indexed LP relaxation's bound "
        "(docs/formulations.md; tighter, so nearer what an optimal schedule achieves).",
    ]
    figures = _plots(out, groups, staging)
    for label, group in groups.items():
        lines += ["", f"## Load {label}", ""]
        lines += load_table(group)
        bound_jct = _stats([r.bound_avg_jct_s for r in group])[0]
        bound_lp = _stats([r.bound_lp_avg_jct_s for r in group])[0]
        bound_makespan = _stats([r.bound_makespan_s for r in group])[0]
        parts = [r.cell(f"bound_makespan_{name}_s") for r in group[:1]
                 for name in ("longest_job", "capacity", "tail_capacity")]
        lp_text = ""
        if math.isfinite(bound_lp):
            statuses = sorted({r.cells.get("bound_lp_status", "") for r in group} - {""})
            lp_text = (f", >= {duration_text(bound_lp)} by the LP relaxation "
                       f"({bound_lp / bound_jct:.2f}x; "
                       f"{', '.join(statuses) or 'no status'})")
        lines += ["", f"Lower bounds (mean over seeds): average JCT >= "
                  f"{duration_text(bound_jct)} by isolated durations{lp_text}, makespan >= "
                  f"{duration_text(bound_makespan)} "
                  f"(longest job {duration_text(parts[0])}, capacity {duration_text(parts[1])}, "
                  f"capacity after an arrival {duration_text(parts[2])})."]
        offered = _stats([r.offered_load for r in group])[0]
        if math.isfinite(offered):
            lines.append(f"Offered load {offered:.2f}: the least GPU time the jobs need over "
                         "the GPU time of the cluster while they arrive (above 1, queues "
                         "grow whatever the policy does).")
        incomplete = [f"{r.policy}-s{r.cells.get('seed')}" for r in group
                      if r.summary.completed != r.summary.jobs]
        if incomplete:
            lines.append(f"Not every job finished in: {', '.join(incomplete)}.")
        lines += ["", *(f"![{name}]({name})" for name in figures.get(label, []))]
    lines += ["", *(f"![{name}]({name})" for name in figures.get("", []))]
    if "deadline_met.png" not in figures.get("", []):
        lines += ["", "No deadline chart: no job has a deadline (give --deadline-fraction)."]
    lines += reference_lines(read_references(out), rows)
    lines += notice_lines(rows)
    lines += ["", f"Raw figures: results.csv ({len(rows)} runs); each run's outputs: "
              "runs/<policy>-s<seed>-l<load>/."]
    (staging / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- plots ------------------------------------------------------------------------------


def notice_lines(rows: Sequence[BenchRow]) -> list[str]:
    """The settings that could not change some runs (hetsched.setting_notices), each once
    with the policies whose runs said so; none when every setting applied."""
    from hetsched.setting_notices import is_notice

    said: dict[str, list[str]] = {}
    for row in rows:
        for line in row.summary.warnings:
            if is_notice(line) and row.policy not in said.setdefault(line, []):
                said[line].append(row.policy)
    if not said:
        return []
    return ["", "## Settings that did not apply", "",
            *(f"- {line} (runs of {', '.join(policies)})" for line, policies in said.items())]


def _read_csv_columns(path: Path, columns: Sequence[str]) -> dict[str, list[float]] | None:
    """Numeric columns of a CSV file (None if the file or a column is missing)."""
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not set(columns) <= set(reader.fieldnames):
            return None
        values: dict[str, list[float]] = {c: [] for c in columns}
        for row in reader:
            for column in columns:
                values[column].append(cell_float(row.get(column)))
    return values


def decision_times(run: Path) -> list[float]:
    """The policy's wall-clock time at each decision point of one run (s): the
    ``decision_time_s`` list of its ``timing.json`` (or, for runs written before it
    existed, the ``decision_time_s`` column of decisions.csv); empty if neither is there."""
    timing = run / "timing.json"
    if timing.is_file():
        try:
            values = json.loads(timing.read_text(encoding="utf-8")).get("decision_time_s")
        except (ValueError, AttributeError):
            values = None
        if isinstance(values, list):
            return [float(v) if isinstance(v, int | float) else math.nan for v in values]
    columns = _read_csv_columns(run / "decisions.csv", ("decision_time_s",))
    return columns["decision_time_s"] if columns else []


def busy_gpus_over_time(run: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """``(times, busy GPUs)`` of one run, a step function (each value holds from its time
    on), times in s from the first arrival.

    With a ``busy_gpus`` column in decisions.csv it is exact: between two decision points
    only completions change the busy count, and jobs.csv says when each job finished and
    on how many GPUs; at a decision point the logged count (after the decision) holds.
    Without it, each job of jobs.csv holds its GPU count from its first start to its
    finish (a preempted job's waits count as busy: an upper estimate).
    """
    jobs = _read_csv_columns(run / "jobs.csv", ("start", "finish", "num_gpus"))
    if jobs is None:
        return None
    decisions = _read_csv_columns(run / "decisions.csv", ("time", "busy_gpus"))
    if decisions is not None and decisions["time"]:
        freed: dict[float, float] = {}
        for finish, gpus in zip(jobs["finish"], jobs["num_gpus"], strict=True):
            if math.isfinite(finish):
                freed[finish] = freed.get(finish, 0.0) + gpus
        logged = dict(zip(decisions["time"], decisions["busy_gpus"], strict=True))
        busy = 0.0
        times, values = [], []
        for moment in sorted({*freed, *logged}):
            # The simulator completes jobs first, then decides at the same time.
            busy = logged.get(moment, busy - freed.get(moment, 0.0))
            times.append(moment)
            values.append(max(busy, 0.0))
        return np.array(times), np.array(values)
    changes: dict[float, float] = {}
    for start, finish, gpus in zip(jobs["start"], jobs["finish"], jobs["num_gpus"],
                                   strict=True):
        if math.isfinite(start) and math.isfinite(finish):
            changes[start] = changes.get(start, 0.0) + gpus
            changes[finish] = changes.get(finish, 0.0) - gpus
    if not changes:
        return None
    ordered = np.array(sorted(changes))
    return ordered, np.cumsum([changes[t] for t in ordered])


def policy_styles(policies: Sequence[str]) -> dict[str, tuple[str, str]]:
    """A colour and a line style per policy, the same in every line plot of a report, no
    two policies alike: the 10 Tableau colours, then each again dashed, then dotted (a
    bench of 13 policies drew three pairs of lines in one colour with matplotlib's
    cycle)."""
    from matplotlib.colors import TABLEAU_COLORS

    palette = [str(colour) for colour in TABLEAU_COLORS.values()]
    dashes = ("solid", "dashed", "dotted", "dashdot")
    return {policy: (palette[i % len(palette)], dashes[(i // len(palette)) % len(dashes)])
            for i, policy in enumerate(policies)}


def _plots(out: Path, groups: dict[str, list[BenchRow]],
           target: Path) -> dict[str, list[str]]:
    """Draw the plots of the runs in ``out`` into ``target``; returns the file names by
    load label ("" for all-load figures)."""
    from matplotlib.figure import Figure

    figures: dict[str, list[str]] = {}
    runs = out / "runs"

    def run_dir(row: BenchRow) -> Path:
        return runs / row.run_name

    def save(figure: Figure, name: str, label: str) -> None:
        figure.tight_layout()
        figure.savefig(target / name, dpi=110)
        figures.setdefault(label, []).append(name)

    styles = policy_styles(_policies([r for g in groups.values() for r in g]))
    for label, group in groups.items():
        policies = _policies(group)
        # JCT CDF, seeds pooled.
        figure = Figure(figsize=(7, 4.5))
        ax = figure.add_subplot()
        for policy in policies:
            jct: list[float] = []
            for row in group:
                if row.policy == policy:
                    jobs = _read_csv_columns(run_dir(row) / "jobs.csv", ("jct",))
                    jct += [v for v in (jobs or {"jct": []})["jct"] if math.isfinite(v)]
            if jct:
                ordered = np.sort(np.array(jct)) / 3600
                ax.step(ordered, np.arange(1, len(ordered) + 1) / len(ordered), where="post",
                        label=policy, color=styles[policy][0],
                        linestyle=styles[policy][1])
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h, log scale)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(f"JCT CDF, load {label} (seeds pooled)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(figure, f"jct_cdf_l{label}.png", label)
        # Utilisation over time, first seed of each policy.
        figure = Figure(figsize=(8, 4.5))
        ax = figure.add_subplot()
        for policy in policies:
            row = min((r for r in group if r.policy == policy), key=lambda r: r.seed)
            series = busy_gpus_over_time(run_dir(row))
            gpus = row.cell("gpus")
            if series is None or not gpus > 0:
                continue
            times, busy = series  # s from the first arrival (traces start at 0 s)
            ax.step(times / 3600, busy / gpus, where="post", label=policy, linewidth=0.9,
                    color=styles[policy][0], linestyle=styles[policy][1])
        ax.set_xlabel("time since the first arrival (h)")
        ax.set_ylabel("busy GPUs / all GPUs")
        ax.set_ylim(0, 1.05)
        ax.set_title(f"Utilisation over time, load {label} (seed "
                     f"{min((r.cells.get('seed', '') for r in group), key=cell_float)})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(figure, f"utilization_l{label}.png", label)
    # Deadline-met ratio, every load.
    figure = Figure(figsize=(8, 4.5))
    ax = figure.add_subplot()
    all_policies = _policies([r for g in groups.values() for r in g])
    width = 0.8 / max(1, len(groups))
    any_deadline = False
    for index, (label, group) in enumerate(groups.items()):
        means, lows, highs = [], [], []
        for policy in all_policies:
            mean, low, high = _stats([_deadline_ratio(r) for r in group
                                      if r.policy == policy])
            any_deadline = any_deadline or math.isfinite(mean)
            means.append(mean if math.isfinite(mean) else 0.0)
            lows.append(mean - low if math.isfinite(mean) else 0.0)
            highs.append(high - mean if math.isfinite(mean) else 0.0)
        positions = np.arange(len(all_policies)) + (index - (len(groups) - 1) / 2) * width
        ax.bar(positions, means, width, yerr=[lows, highs], capsize=3, label=f"load {label}")
    ax.set_xticks(np.arange(len(all_policies)), all_policies, rotation=30, ha="right")
    ax.set_ylabel("deadlines met / jobs with a deadline")
    ax.set_ylim(0, 1.05)
    ax.set_title("Deadline-met ratio (mean over seeds, min-max bars)")
    ax.legend(fontsize=8)
    if any_deadline:  # else an empty chart: report.md says why once
        save(figure, "deadline_met.png", "")
    # Decision time distribution, a panel per load.
    figure = Figure(figsize=(4 + 3 * len(groups), 4.5))
    for index, (label, group) in enumerate(groups.items()):
        ax = figure.add_subplot(1, len(groups), index + 1)
        data, names = [], []
        for policy in _policies(group):
            spent: list[float] = []
            for row in group:
                if row.policy == policy:
                    spent += [max(v, 1e-7) for v in decision_times(run_dir(row))
                              if math.isfinite(v)]
            if spent:
                data.append(spent)
                names.append(policy)
        if data:
            ax.boxplot(data, whis=(5, 95), showfliers=False)
            ax.set_xticks(np.arange(1, len(names) + 1), names, rotation=30, ha="right")
            ax.set_yscale("log")
        ax.set_ylabel("decision time (s, log scale)")
        ax.set_title(f"load {label}")
        ax.grid(alpha=0.3, axis="y")
    figure.suptitle("Decision time per decision point (box: quartiles, whiskers: p5-p95)")
    save(figure, "decision_times.png", "")
    return figures
