"""The metrics of one replay as a typed record (:class:`ReplaySummary`): what
``summary.json`` holds and a bench's ``results.csv`` row carries, and the cells of that
CSV (:func:`cell_text`, :func:`cell_float`, :func:`cell_int`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from hetsched.core.errors import InputError

#: The fairness figures (hetsched.core.fairness), NaN in a summary from before them.
FAIRNESS_FIELDS = ("max_rho", "mean_rho", "rho_above_1", "tenant_jain_index",
                   "quota_violation_gpu_s")


@dataclass(frozen=True)
class ReplaySummary:
    """The metrics of one replay (seconds unless stated), as summary.json holds them and
    as a bench's results.csv row carries them (:meth:`to_cells`, :meth:`from_cells`).
    Averages and percentiles are NaN when no job finished."""

    jobs: int
    completed: int
    avg_jct_s: float
    p50_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    makespan_s: float
    avg_queue_s: float
    deadline_jobs: int
    deadline_met: int
    total_tardiness_s: float
    # finish-time fairness and Jain's index over tenants (hetsched.core.fairness)
    max_rho: float
    mean_rho: float
    rho_above_1: float  # the share of finished jobs with rho > 1
    tenant_jain_index: float
    quota_violation_gpu_s: float  # GPU-s held beyond quotas while a tenant within its waited
    utilization: float  # busy GPU-seconds / (usable GPUs x makespan)
    utilization_all_gpus: float  # the same over every GPU of the cluster
    usable_gpus: int
    total_cost_usd: float  # GPU-hours held times their type's price (NaN: a type unpriced)
    cost_per_job_usd: float  # the total over the completed jobs
    preemptions: int
    decisions: int
    fallbacks: int
    warnings: tuple[str, ...]
    round_s: float | None
    interval_s: float | None
    restart_penalty_s: float
    start_latency_s: float
    interrupted: bool

    def to_dict(self) -> dict[str, object]:
        """summary.json's fields, in its order (``warnings`` a list)."""
        values: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        values["warnings"] = list(self.warnings)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ReplaySummary:
        """Inverse of :meth:`to_dict`; reads a replay's ``summary.json`` (its other keys,
        the trace, policy, bounds, ..., are ignored; null numbers are NaN, as written).
        A missing field is an :class:`InputError` naming it, but for the fairness figures
        (NaN in a summary written before they were)."""
        values = {**dict.fromkeys(FAIRNESS_FIELDS), **values}
        missing = [f.name for f in fields(cls) if f.name not in values]
        if missing:
            raise InputError("not a replay summary", path=missing[0],
                             expected="the fields of summary.json: "
                             + ", ".join(f.name for f in fields(cls)))

        def number(name: str) -> float:
            value = values[name]
            return math.nan if value is None else float(value)

        def optional(name: str) -> float | None:
            value = values[name]
            return None if value is None else float(value)

        counts = {f.name for f in fields(cls) if f.type in ("int", int)}
        floats = {f.name for f in fields(cls) if f.type in ("float", float)}
        made: dict[str, Any] = {
            **{name: int(values[name]) for name in counts},
            **{name: number(name) for name in floats},
            "warnings": tuple(str(w) for w in values["warnings"] or ()),
            "round_s": optional("round_s"), "interval_s": optional("interval_s"),
            "interrupted": bool(values["interrupted"])}
        return cls(**made)

    def to_frame(self) -> Any:
        """The metrics as a one-row pandas DataFrame (``warnings`` joined by ``"; "``), e.g.
        to set replays side by side with ``pandas.concat``."""
        import pandas as pd

        row: dict[str, object] = self.to_dict()
        row["warnings"] = "; ".join(self.warnings)
        return pd.DataFrame([row])

    def to_cells(self) -> dict[str, str]:
        """The fields as results.csv cells (:func:`cell_text`)."""
        return {name: cell_text(value) for name, value in self.to_dict().items()}

    @classmethod
    def from_cells(cls, cells: Mapping[str, str]) -> ReplaySummary:
        """The summary a results.csv row carries (:meth:`to_cells`'s inverse; a missing
        or empty cell is NaN, 0, None or false, by the field's type)."""
        def number(name: str) -> float:
            return cell_float(cells.get(name))

        def count(name: str) -> int:
            return cell_int(cells.get(name))

        def optional(name: str) -> float | None:
            value = number(name)
            return value if math.isfinite(value) else None

        text = cells.get("warnings", "")
        warnings = tuple(str(w) for w in json.loads(text)) if text else ()
        return cls(
            jobs=count("jobs"), completed=count("completed"), avg_jct_s=number("avg_jct_s"),
            p50_jct_s=number("p50_jct_s"), p95_jct_s=number("p95_jct_s"),
            p99_jct_s=number("p99_jct_s"), makespan_s=number("makespan_s"),
            avg_queue_s=number("avg_queue_s"), deadline_jobs=count("deadline_jobs"),
            deadline_met=count("deadline_met"), total_tardiness_s=number("total_tardiness_s"),
            max_rho=number("max_rho"), mean_rho=number("mean_rho"),
            rho_above_1=number("rho_above_1"), tenant_jain_index=number("tenant_jain_index"),
            quota_violation_gpu_s=number("quota_violation_gpu_s"),
            utilization=number("utilization"),
            utilization_all_gpus=number("utilization_all_gpus"),
            usable_gpus=count("usable_gpus"), total_cost_usd=number("total_cost_usd"),
            cost_per_job_usd=number("cost_per_job_usd"), preemptions=count("preemptions"),
            decisions=count("decisions"), fallbacks=count("fallbacks"), warnings=warnings,
            round_s=optional("round_s"), interval_s=optional("interval_s"),
            restart_penalty_s=number("restart_penalty_s"),
            start_latency_s=number("start_latency_s") if cells.get("start_latency_s") else 0.0,
            interrupted=cells.get("interrupted", "") == "true")



def cell_text(value: object) -> str:
    """A value for a CSV cell (results.csv): floats repr-exact, NaN and None empty,
    booleans ``true``/``false``, lists and dicts as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True)
    return str(value)


def cell_float(text: str | None) -> float:
    """A results.csv cell as a number; NaN if empty or not a number."""
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def cell_int(text: str | None) -> int:
    """A results.csv cell as an integer; 0 if empty or not a number."""
    value = cell_float(text)
    return int(value) if math.isfinite(value) else 0
