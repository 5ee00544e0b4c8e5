"""What the ``hetsched`` commands print: the plan table and the summary lines of a
result (``solve``), and errors about a library parameter shown as the option the user
typed."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hetsched.core.errors import InputError
from hetsched.core.records import Instance
from hetsched.core.result import Result


def format_gpus(ids: Sequence[str]) -> str:
    """``["n0/0", "n0/1", "n0/2", "n1/5"]`` -> ``"n0/0-2+n1/5"``."""
    by_node: dict[str, list[int]] = {}
    for gid in ids:
        node, _, index = gid.rpartition("/")
        by_node.setdefault(node, []).append(int(index))
    parts = []
    for node, indices in by_node.items():
        indices.sort()
        runs: list[list[int]] = []
        for i in indices:
            if runs and i == runs[-1][-1] + 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        text = ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
        parts.append(f"{node}/{text}")
    return "+".join(parts)


def format_number(value: object) -> str:
    """A number as every line the commands print writes it (one style, no exponent):
    thousands separated with one decimal from 1,000 on (``766,250.0``, ``1,658,630.5``),
    six significant digits from 1 (``30``, ``2.5``), six decimals below (``0.439407``,
    ``0.000145``); ``-`` for none or not finite; integers whole (``2,000``)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if not isinstance(value, float):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.1f}"
    if magnitude >= 1 or value == 0:
        return f"{value:.6g}"
    return f"{value:.6f}".rstrip("0")


def _fmt_time(seconds: float) -> str:
    return f"{seconds:,.1f}"


def plan_table(instance: Instance, result: Result) -> str:
    """The schedule as a fixed-width table, one row per run, in start order. A job run in
    segments (preempted, or continued at another speed) has one row per segment, marked
    ``(k/n)``; its JCT and deadline verdict stand on its last segment only, where it
    finished."""
    jobs = instance.job_by_id
    header = ("job", "type", "gpus", "arrival", "start", "finish", "jct", "deadline")
    rows = [header]
    total: dict[str, int] = {}
    for a in result.schedule:
        total[a.job] = total.get(a.job, 0) + 1
    seen: dict[str, int] = {}
    for a in result.schedule:
        job = jobs[a.job]
        seen[a.job] = seen.get(a.job, 0) + 1
        last = seen[a.job] == total[a.job]
        name = a.job if total[a.job] == 1 else f"{a.job} ({seen[a.job]}/{total[a.job]})"
        if not last:
            jct, deadline = "", ""
        elif job.deadline is None:
            jct, deadline = _fmt_time(a.finish - job.arrival), "-"
        else:
            late = a.finish - job.deadline
            jct = _fmt_time(a.finish - job.arrival)
            deadline = f"{_fmt_time(job.deadline)} " + ("met" if late <= 1e-6 else
                                                      f"late {_fmt_time(late)}")
        rows.append((name, f"{len(a.gpus)}x{a.gpu_type}", format_gpus(a.gpus),
                     _fmt_time(job.arrival), _fmt_time(a.start), _fmt_time(a.finish),
                     jct, deadline))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    numeric = {3, 4, 5, 6}
    lines = []
    for k, row in enumerate(rows):
        cells = [str(c).rjust(w) if i in numeric and k else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary_lines(result: Result) -> list[str]:
    """Status, objective, bound, gap, runtime and the metrics as ``name: value`` lines."""
    def number(value: float | None, unit: str = "") -> str:
        text = format_number(value)
        return text if text == "-" else text + unit

    from hetsched.registry import entry

    try:
        described = entry(result.model) if result.model else None
    except InputError:  # a result of a model no longer registered: no description
        described = None
    proven = f" ({described.proven})" if described is not None and described.proven else ""
    lines = [
        f"model: {result.model}" + (f" ({result.backend})" if result.backend else ""),
        f"status: {result.status.value}",
        f"objective: {number(result.objective)}"
        + (f" ({described.objective})" if described is not None else ""),
        f"bound: {number(result.bound)}",
        f"gap: {'-' if result.gap is None else f'{100 * result.gap:.3g}%'}"
        + (proven if result.gap is not None else ""),
        f"runtime: {result.runtime_s:.3f} s",
    ]
    if result.message:
        lines.append(f"message: {result.message}")
    m = result.metrics
    if m is not None:
        lines += [
            f"jobs scheduled: {m.scheduled} of {m.jobs}",
            f"average JCT: {number(m.avg_jct_s, ' s')}",
            f"p95 JCT: {number(m.p95_jct_s, ' s')}",
            f"makespan: {number(m.makespan_s, ' s')}",
            f"deadlines met: {m.deadline_met} of {m.deadline_jobs}",
            f"total tardiness: {number(m.total_tardiness_s, ' s')}",
            f"GPU utilisation: {100 * m.utilization:.1f}%",
        ]
    return lines


#: ``hetsched solve``'s options that are a model's own settings: option -> (constructor
#: argument, the option as typed). Passed only when given, so a model without that setting
#: is told so (exit 2) rather than silently ignoring it.
MODEL_SETTINGS = {"deadline_objective": ("objective", "--deadline-objective"),
               "alpha": ("alpha", "--alpha")}


#: The library's parameter names and the options that set them: an error about a
#: parameter is reported with the option the user typed.
PARAMETER_FLAGS = {
    "model": "--model", "policy": "--policy", "backend": "--backend",
    "time_limit": "--time-limit", "time_limit_s": "--time-limit", "placement": "--placement",
    "seed": "--seed", "seeds": "--seeds", "threads": "--threads", "gap": "--gap",
    "cluster_spec": "--cluster", "policies": "--policies", "load": "--load",
    "workers": "--workers", "trace": "--trace", "throughput_path": "--throughput",
    "out": "--out", "plot": "--plot", "restart_penalty_s": "--restart-penalty",
    "start_latency_s": "--start-latency", "prices": "--prices",
    "spread_speed": "--spread-speed", "knowledge": "--knowledge", "learn": "--learn",
    "interval_s": "--interval", "batch_s": "--batch", "gpus": "--gpus", "jobs": "--jobs",
    "gpus_per_node": "--gpus-per-node", "mean_interarrival_s": "--mean-interarrival",
    "median_duration_s": "--median-duration", "deadline_fraction": "--deadline-fraction",
    "elastic_fraction": "--elastic-fraction", "partitions": "--partitions",
    "reference_gpu": "--reference-gpu", "gpu_aliases": "--gpu-alias",
    "unknown_gpus": "--unknown-gpus", "on_bad_row": "--on-bad-row",
    "decision_timeout_s": "--decision-timeout",
    "colocation_factor": "--colocation-factor", "engine": "--engine", "address": "--address",
    **dict(MODEL_SETTINGS.values())}


def as_typed(error: InputError) -> InputError:
    """``error`` with a library parameter it names (``cluster_spec``) shown as the option
    that sets it (``--cluster``)."""
    if error.path not in PARAMETER_FLAGS:
        return error
    return InputError(error.problem, path=PARAMETER_FLAGS[error.path], value=error.value,
                      expected=error.expected, file=error.file)
