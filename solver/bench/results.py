"""``results.csv`` of a bench: appending rows, and checking them before a resume.

A bench appends one row per finished run and a rerun skips the runs already there, so a
row must be whole to be trusted. A row torn by a crash, a full disk or a kill in the
middle of a write has no line end and may lack fields; one edited by hand may hold
anything. :func:`resume_rows` checks every row as :func:`append_result` writes it (one
physical line, the header's fields, numbers where numbers go): a bad last row is dropped
with a warning (the file is rewritten without it and its run is done again); a bad row
elsewhere is refused with an error naming its line, column and value. Appends start on a
new line whatever the file ends with.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.outputs import write_text, writing
from hetsched.simulate.summary import ReplaySummary, cell_float, cell_int, cell_text

log = logging.getLogger(__name__)

#: The columns that identify a run in ``results.csv``.
KEY_COLUMNS = ("policy", "seed", "load")
#: Columns holding counts (integers >= 0).
COUNT_COLUMNS = frozenset({"seed", "jobs", "completed", "deadline_jobs", "deadline_met",
                           "preemptions", "decisions", "fallbacks", "gpus", "skipped_rows"})
#: Columns holding other numbers (empty when the figure is undefined); also every column
#: ending in ``_s``.
NUMBER_COLUMNS = frozenset({"load", "utilization", "offered_load", "bound_total_gpu_seconds",
                            "avg_jct_over_bound", "makespan_over_bound",
                            "avg_jct_over_lp_bound"})
#: Columns holding JSON (lists and objects).
JSON_COLUMNS = frozenset({"warnings", "excluded", "notes", "solver_limit",
                          "solver_versions", "policy_params"})
#: The remedy named by every error about a bad row.
FIX = ("a row as hetsched bench writes it (delete the line to run that combination again, "
       "or use a fresh --out)")


def read_results(path: Path) -> list[dict[str, str]]:
    """The rows of a results.csv (none if the file is absent), as they are."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return [dict(row) for row in csv.DictReader(handle)]


def append_result(path: Path, row: dict[str, str]) -> None:
    """Append ``row`` to results.csv on a line of its own and flush it to disk; a row with
    columns the header lacks rewrites the file (atomically) with the union of the columns.
    An ``OSError`` (a full disk) is a clear error naming the file."""
    with writing(path, "out", "results.csv"):
        _append(path, row)


def _append(path: Path, row: dict[str, str]) -> None:
    header: list[str] = []
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
    if header and set(row) <= set(header):
        line = io.StringIO()
        csv.DictWriter(line, header, restval="", lineterminator="\n").writerow(row)
        with path.open("ab") as handle:
            handle.seek(0, os.SEEK_END)
            torn = handle.tell() > 0 and _last_byte(path) != b"\n"
            handle.write((("\n" if torn else "") + line.getvalue()).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        return
    _write_all(path, header, [*read_results(path), row])


def rewrite_results(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """Write ``rows`` as the whole of results.csv (atomically; the columns of the present
    header first, then any new ones)."""
    header: list[str] = []
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
    with writing(path, "out", "results.csv"):
        _write_all(path, header, rows)


def _write_all(path: Path, header: list[str], rows: Sequence[dict[str, str]]) -> None:
    columns = list(dict.fromkeys([*header, *(name for row in rows for name in row)]))
    text = io.StringIO()
    writer = csv.DictWriter(text, columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, text.getvalue(), "out", "results.csv")


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


def resume_rows(path: Path, warn: Callable[[str], None] | None = None) -> list[dict[str, str]]:
    """The rows of ``path`` a resumed bench may trust (none if the file is absent).

    Each physical line is one row. A bad last row (torn: no line end, too few fields, a
    value that does not parse) is dropped: ``warn`` (default: the log) is told, and the
    file is rewritten without it. A bad header, a bad row before the last, or one run
    (policy, seed, load) in two rows (the report would count it twice) raises an
    :class:`InputError` naming the lines, the column and the value.
    """
    if not path.is_file():
        return []
    with writing(path, "out", "results.csv"):
        raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text ({exc.reason})", file=str(path),
                         path=f"line {where}", expected=FIX) from None
    parts = text.split("\n")  # rows end in "\n" only (splitlines() also splits at \f, ...)
    lines = [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    if not lines:
        return []
    header = _fields(path, 1, lines[0])
    missing = [name for name in KEY_COLUMNS if name not in header]
    if missing or not lines[0].endswith("\n") or len(set(header)) != len(header):
        raise InputError("bad header", file=str(path), path="line 1", value=lines[0][:80],
                         expected="the header hetsched bench writes (columns policy, seed, "
                         "load, ...), or a fresh --out")
    rows: list[dict[str, str]] = []
    seen: dict[tuple[str, str, float], int] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            if not line.endswith("\n"):
                raise InputError("torn row (no line end)", file=str(path),
                                 path=f"line {number}", value=line[-40:], expected=FIX)
            row = _row(path, number, header, line)
        except InputError as exc:
            if number != len(lines):
                raise
            (warn or log.warning)(f"{path}: {exc.path}: {exc.problem} (a write cut short): "
                                  "row dropped, its run is done again")
            write_text(path, "".join(lines[:-1]), "out", "results.csv")
            continue
        key = (row["policy"], row["seed"], _number(row["load"]))
        if key in seen:
            raise InputError("the same run in two rows", file=str(path),
                             path=f"lines {seen[key]} and {number}",
                             value=f"policy {row['policy']}, seed {row['seed']}, load "
                             f"{row['load']}", expected="one row per policy, seed and load "
                             "(the report would count it twice); delete one of them")
        seen[key] = number
        rows.append(row)
    return rows


def _fields(path: Path, number: int, line: str) -> list[str]:
    try:
        return next(csv.reader([line.rstrip("\r\n")], strict=True), [])
    except csv.Error as exc:
        raise InputError(f"not valid CSV ({exc})", file=str(path), path=f"line {number}",
                         value=line[:80], expected=FIX) from None


def _row(path: Path, number: int, header: list[str], line: str) -> dict[str, str]:
    """One row, checked: the header's number of fields, a key, counts, numbers, JSON."""
    cells = _fields(path, number, line)
    if len(cells) != len(header):
        raise InputError("wrong number of fields", file=str(path), path=f"line {number}",
                         value=len(cells), expected=f"{len(header)} as in the header; " + FIX)
    row = dict(zip(header, cells, strict=True))

    def bad(column: str, expected: str) -> InputError:
        return InputError(f"bad {column}", file=str(path), path=f"line {number}.{column}",
                          value=row[column], expected=f"{expected}; {FIX}")

    if not row["policy"]:
        raise bad("policy", "a policy name")
    for column, value in row.items():
        if column in COUNT_COLUMNS and not (value.isdigit() or (value == "" and
                                                                column not in KEY_COLUMNS)):
            raise bad(column, "an integer >= 0")
        if column in NUMBER_COLUMNS or column.endswith("_s"):
            number_value = _number(value)
            if (value or column in KEY_COLUMNS) and not (math.isfinite(number_value)
                                                         and number_value >= 0):
                raise bad(column, "a number >= 0" + ("" if column in KEY_COLUMNS
                                                     else ", or empty"))
        if column in JSON_COLUMNS and value:
            try:
                json.loads(value)
            except ValueError:
                raise bad(column, "JSON") from None
    if not _number(row["load"]) > 0:
        raise bad("load", "a number > 0")
    utilization = _number(row.get("utilization", ""))
    if utilization > 1 + 1e-6:
        raise bad("utilization", "a fraction from 0 to 1")
    if row.get("completed", "").isdigit() and row.get("jobs", "").isdigit() and \
            int(row["completed"]) > int(row["jobs"]):
        raise bad("completed", f"at most jobs ({row['jobs']})")
    return row


def _number(text: str) -> float:
    try:
        return float(text) if text else math.nan
    except ValueError:
        return math.nan


def is_heuristic(policy: str) -> bool:
    """True unless ``policy`` (or the model it is the ``-agnostic`` variant of) solves an
    exact model at each decision (the registry's ``exact``): the heuristics are the
    reference of the "vs best heuristic" ratio."""
    from hetsched.registry import is_exact

    return not is_exact(policy)


def exact_models() -> list[str]:
    """The registered names of the exact models."""
    from hetsched.registry import is_exact, names

    return [name for name in names() if is_exact(name)]


def duration_text(seconds: float) -> str:
    """``"12.5 s"``, ``"3.2 min"`` or ``"11.0 h"``; ``"-"`` if not finite."""
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 36_000:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 600:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds:,.1f} s"


@dataclass(frozen=True)
class BenchRow:
    """One run of a bench, as results.csv holds it: its key (policy, seed, load), the
    replay's :class:`~hetsched.simulate.record.ReplaySummary`, the lower bounds and ratios to them
    and the wall-clock figures the report reads, and every cell as written (``cells``,
    for the columns no field names: the trace, the solver versions, ...)."""

    policy: str
    seed: int
    load: float
    summary: ReplaySummary
    bound_avg_jct_s: float
    bound_makespan_s: float
    avg_jct_over_bound: float
    makespan_over_bound: float
    #: the LP bound on the average JCT and the ratio to it (NaN in rows without them)
    bound_lp_avg_jct_s: float
    avg_jct_over_lp_bound: float
    offered_load: float
    decision_time_p95_s: float
    wall_time_s: float
    gpus: int
    cells: Mapping[str, str]

    @classmethod
    def from_cells(cls, cells: Mapping[str, str]) -> BenchRow:
        """The typed row of a results.csv row (empty or missing numbers are NaN)."""
        return cls(policy=cells.get("policy", ""), seed=cell_int(cells.get("seed")),
                   load=cell_float(cells.get("load")),
                   summary=ReplaySummary.from_cells(cells),
                   bound_avg_jct_s=cell_float(cells.get("bound_avg_jct_s")),
                   bound_makespan_s=cell_float(cells.get("bound_makespan_s")),
                   avg_jct_over_bound=cell_float(cells.get("avg_jct_over_bound")),
                   makespan_over_bound=cell_float(cells.get("makespan_over_bound")),
                   bound_lp_avg_jct_s=cell_float(cells.get("bound_lp_avg_jct_s")),
                   avg_jct_over_lp_bound=cell_float(cells.get("avg_jct_over_lp_bound")),
                   offered_load=cell_float(cells.get("offered_load")),
                   decision_time_p95_s=cell_float(cells.get("decision_time_p95_s")),
                   wall_time_s=cell_float(cells.get("wall_time_s")),
                   gpus=cell_int(cells.get("gpus")), cells=dict(cells))

    @property
    def load_label(self) -> str:
        """The load as written (the run folder's ``l<load>``)."""
        return self.cells.get("load", "")

    @property
    def run_name(self) -> str:
        """The run's folder under ``runs/``: ``<policy>-s<seed>-l<load>``."""
        return f"{self.policy}-s{self.cells.get('seed', '')}-l{self.load_label}"

    def cell(self, column: str) -> float:
        """Any column as a number (NaN if empty, missing or not a number)."""
        return cell_float(self.cells.get(column))


def bench_rows(path: Path) -> list[BenchRow]:
    """The typed rows of a results.csv (none if the file is absent)."""
    return [BenchRow.from_cells(row) for row in read_results(path)]


def result_row(policy: str, seed: int, load: str, figures: Mapping[str, object]
               ) -> dict[str, str]:
    """The results.csv row of a finished run: its key (``load`` as written), its figures
    (:attr:`hetsched.replaying.ReplayResult.figures`: metrics, settings, bounds, timing),
    and the ratios of the average JCT and makespan to their bounds."""
    row: dict[str, object] = {"policy": policy, "seed": seed, "load": load}
    row.update({k: v for k, v in figures.items() if k not in row})
    for metric in ("avg_jct_s", "makespan_s"):
        value, bound = figures.get(metric), figures.get(f"bound_{metric}")
        ratio = math.nan
        if isinstance(value, int | float) and isinstance(bound, int | float) and bound > 0:
            ratio = value / bound
        row[f"{metric.removesuffix('_s')}_over_bound"] = ratio
    return {key: cell_text(value) for key, value in row.items()}
