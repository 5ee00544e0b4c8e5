"""The internal job table every trace reader returns, the state of one read, and the
file access and cell parsing the readers share.

A format module turns each row of its file into a :class:`Row` (what the row says,
absolute times in seconds) and hands the rows to
:func:`hetsched.files.traces.rules.build_trace`, which applies the rules of docs/traces.md in
one place.
"""

from __future__ import annotations

import csv
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from hetsched.core.errors import InputError
from hetsched.core.ranges import text_float
from hetsched.core.records import Job
from hetsched.core.throughput import ThroughputModel

log = logging.getLogger(__name__)

#: What a reader makes of a row: a :class:`Row` of a trace, a node of a node list.
Item = TypeVar("Item")

ON_BAD_ROW = ("fatal", "skip")
#: With ``on_bad_row="skip"``, more bad rows than this fraction of the rows in scope (every
#: data row but those excluded on purpose) and more than :data:`MAX_SKIPPED_ROWS`, or bad
#: rows and no job left, is an error: a file that bad is most likely in another format,
#: not a file with a few damaged lines.
MAX_SKIPPED_FRACTION = 0.05
MAX_SKIPPED_ROWS = 10
#: The reference GPU type a trace's durations are taken to be measured on, when the
#: throughput model knows it (docs/traces.md, rule 4).
DEFAULT_REFERENCE_GPU = "v100"
#: The note counting every job whose (job type, GPU count) the throughput model cannot run.
CAPPED = "all (job type, GPU count) pairs with 0 steps/s on every GPU type: GPU count capped"


@dataclass(frozen=True)
class Trace:
    """Jobs read from a trace file, with an account of what the reader did.

    ``jobs`` are sorted by arrival (ties: file order), arrivals in s from the first
    arrival (0 s); ``skipped_rows`` counts bad rows skipped with ``on_bad_row="skip"``;
    ``excluded`` counts rows left out on purpose, by reason; ``notes`` lists the
    fallbacks used, each with its count.
    """

    jobs: tuple[Job, ...]
    source: str
    format: str
    skipped_rows: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: the GPU type durations were converted into work on (None: the format has work)
    reference_gpu: str | None = None

    def summary(self) -> str:
        """One line: how many jobs, skipped and excluded rows."""
        left_out = sum(self.excluded.values())
        return (f"{self.source} ({self.format}): {len(self.jobs)} jobs, "
                f"{self.skipped_rows} bad rows skipped, {left_out} rows excluded")


@dataclass
class Row:
    """One row of a trace: what it says, before the shared rules (times in s, absolute).

    ``work`` (steps) or ``duration`` (s on ``reference_gpu``) must be given;
    ``job_type`` None means "draw one"; ``slo`` is Gavel's multiple of the isolated
    duration; ``deadline`` an absolute deadline (native format).
    """

    line: int
    arrival: float
    num_gpus: int
    job_type: str | None = None
    work: float | None = None
    duration: float | None = None
    slo: float | None = None
    deadline: float | None = None
    weight: float = 1.0
    user: str | None = None
    tenant: str | None = None
    id: str | None = None
    allowed_gpu_counts: tuple[int, ...] | None = None
    allowed_gpu_types: tuple[str, ...] | None = None
    gpu_share: float | None = None  # of one GPU (openb's gpu_milli / 1000)
    cpus: float | None = None  # cores
    memory_gb: float | None = None
    note: str | None = None  # a fallback used for this row, counted if its job is kept
    #: the shared rules' fallbacks for this row (a GPU count capped), counted likewise
    rule_notes: list[str] = field(default_factory=list)


class BadRowError(Exception):
    """A row that cannot be read: raised by parsers, turned into an InputError with
    the file and line (or skipped) by :meth:`Reading.bad`."""

    def __init__(self, problem: str, value: Any, expected: str, column: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.value = value
        self.expected = expected
        self.column = column


@dataclass(frozen=True)
class Options:
    """The reader options of :func:`hetsched.files.traces.read_trace` (documented there)."""

    throughput: ThroughputModel | None = None
    gpu_types: tuple[str, ...] = ()
    reference_gpu: str | None = None
    seed: int = 0
    on_bad_row: str = "fatal"
    limit_jobs: int | None = None
    deadline_fraction: float | None = None
    deadline_slack: tuple[float, float] = (1.2, 3.0)
    gpu_sharing: bool = True
    elastic: bool = False


class Reading:
    """The state of one read: file, options, counts of skipped and excluded rows, notes."""

    def __init__(self, path: Path, format: str, options: Options, *,
                 types_column: str = "allowed_gpu_types") -> None:
        self.path = path
        self.file = str(path)
        self.format = format
        self.options = options
        #: the column that restricts a row's GPU types (named in its errors)
        self.types_column = types_column
        self.skipped_rows = 0
        self.first_bad: InputError | None = None
        self.excluded: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()

    def bad(self, line: int, problem: str, value: Any, expected: str, column: str = "") -> None:
        """A bad row: raise an InputError naming file and line, or count it (skip)."""
        where = f"line {line}" + (f".{column}" if column else "")
        error = InputError(problem, file=self.file, path=where, value=value, expected=expected)
        if self.options.on_bad_row == "fatal":
            raise error
        self.skipped_rows += 1
        self.first_bad = self.first_bad or error.in_file("")
        log.debug("%s: skipped bad row: %s", self.file, error)

    def bad_row(self, line: int, error: BadRowError) -> None:
        """:meth:`bad` for a :class:`BadRowError`."""
        self.bad(line, error.problem, error.value, error.expected, error.column)

    def exclude(self, reason: str) -> None:
        """Count a row left out on purpose."""
        self.excluded[reason] += 1

    def note(self, text: str) -> None:
        """Count one use of a fallback."""
        self.notes[text] += 1


# --- file access and cell parsing ---------------------------------------------------------


def open_text(path: Path) -> TextIO:
    """Open a trace file for reading (a UTF-8 byte order mark is skipped), with clear
    errors for a missing or unreadable one, or one that is not a regular file."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise InputError("not a regular file (a device, pipe or socket)", file=str(path))
    try:
        return path.open(newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such trace file", file=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a trace file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read the trace file ({exc.strerror})",
                         file=str(path)) from None


def csv_rows(path: Path, columns: Sequence[str], optional: Sequence[str] = ()
             ) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, row)`` for each data row of a CSV file with a header that has ``columns``
    (and maybe ``optional`` ones, empty cells when absent; other columns are ignored).
    A header that names a column twice is an error (either could be meant). Blank lines
    are passed over.

    Each physical line is parsed on its own (no trace format has fields that span
    lines): a stray double quote spoils only its own row, which comes out as a bad row
    (:func:`check_width` raises it), instead of swallowing the rows after it."""
    handle = open_text(path)
    with handle:
        line = 1
        try:
            lines = enumerate(handle, start=1)
            first = next(lines, None)
            if first is None or not first[1].strip():
                raise InputError("the file is empty" if first is None else "blank header line",
                                 file=str(path), path="line 1",
                                 expected="a header with columns " + ", ".join(columns))
            try:
                header = [name.strip() for name in _cells(first[1])]
            except csv.Error as exc:
                raise InputError(f"not valid CSV ({exc})", file=str(path), path="line 1",
                                 value=first[1].rstrip("\r\n"),
                                 expected="a header with columns " + ", ".join(columns)
                                 ) from None
            twice = [name for name in dict.fromkeys(header) if name and header.count(name) > 1]
            if twice:  # (which of the two would be the job's? neither is read)
                raise InputError(f"column '{twice[0]}' named twice in the header",
                                 file=str(path), path="line 1", value=header,
                                 expected="each column once")
            missing = [name for name in columns if name not in header]
            if missing:
                raise InputError(f"missing column '{missing[0]}'", file=str(path),
                                 path="line 1", value=header,
                                 expected="columns " + ", ".join(columns))
            index = {name: header.index(name) for name in (*columns, *optional)
                     if name in header}
            absent = {name: "" for name in optional if name not in header}
            width = len(header)
            for line, text in lines:
                if not text.strip():
                    continue
                try:
                    cells = _cells(text)
                except csv.Error as exc:
                    yield line, {_PROBLEM: f"not valid CSV ({exc})",
                                 _VALUE: text.rstrip("\r\n"),
                                 _EXPECTED: "fields separated by commas, a double quote only "
                                 "around a whole field (doubled inside it), on one line"}
                    continue
                if len(cells) != width:
                    yield line, {_PROBLEM: "wrong number of fields", _VALUE: str(len(cells)),
                                 _EXPECTED: f"{width} fields as in the header"}
                    continue
                yield line, {**absent, **{name: cells[i].strip() for name, i in index.items()}}
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                             file=str(path), path=f"after line {line}") from None


#: Keys of the row :func:`csv_rows` yields for a line it cannot split into fields.
_PROBLEM, _VALUE, _EXPECTED = "__problem__", "__value__", "__expected__"


def _cells(text: str) -> list[str]:
    """The fields of one physical line of CSV (``csv.Error`` for an unclosed or misplaced
    double quote, or a NUL byte)."""
    return next(csv.reader([text.rstrip("\r\n")], strict=True), [])


def check_width(row: dict[str, str]) -> None:
    """Raise :class:`BadRowError` for a line that :func:`csv_rows` could not split into
    the header's fields (wrong number of fields, a stray double quote)."""
    if _PROBLEM in row:
        value: object = row[_VALUE]
        if row[_PROBLEM] == "wrong number of fields":
            value = int(row[_VALUE])
        raise BadRowError(row[_PROBLEM], value, row[_EXPECTED])


def read_rows(path: Path, format: str, options: Options, columns: Sequence[str],
              parse: Callable[[int, dict[str, str]], Item | str], *,
              optional: Sequence[str] = (), types_column: str = "allowed_gpu_types",
              lines: Iterable[tuple[int, dict[str, str]]] | None = None
              ) -> tuple[Reading, list[Item]]:
    """The read of the CSV file ``path`` in ``format`` (a header with ``columns``, and
    maybe ``optional`` ones: :func:`csv_rows`) and what ``parse`` makes of each data row
    ``(line, cells)``, in order. A row that does not split into the header's fields
    (:func:`check_width`) or that ``parse`` finds bad (:class:`BadRowError`) goes to
    :meth:`Reading.bad_row` (an error, or skipped and counted); a reason ``parse``
    returns instead leaves the row out on purpose, counted under it
    (:meth:`Reading.exclude`). ``types_column`` is the column that restricts a row's GPU
    types (named in its errors); ``lines``: the file's rows read already."""
    reading = Reading(path, format, options, types_column=types_column)
    items: list[Item] = []
    for line, cells in csv_rows(path, columns, optional) if lines is None else lines:
        try:
            check_width(cells)
            item = parse(line, cells)
        except BadRowError as error:
            reading.bad_row(line, error)
            continue
        if isinstance(item, str):
            reading.exclude(item)
        else:
            items.append(item)
    return reading, items


def number(text: str, column: str, *, low: float | None = None, strict: bool = False,
           high: float = math.inf, what: str = "a finite number") -> float:
    """A finite float from a cell, optionally ``> low`` (strict) or ``>= low``, and
    ``<= high``."""
    try:
        value = text_float(text)
    except ValueError:
        value = math.nan
    ok = math.isfinite(value) and value <= high
    if ok and low is not None:
        ok = value > low if strict else value >= low
    if not ok:
        raise BadRowError(f"bad {column}", text, what, column)
    return value


def integer(text: str, column: str, *, low: int = 0, high: float = math.inf) -> int:
    """An integer from a cell (``"4"`` or ``"4.0"``) from ``low`` to ``high``."""
    try:
        value = text_float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value != int(value) or not low <= value <= high:
        expected = f"an integer >= {low}" if high == math.inf else \
            f"an integer from {low} to {high:g}"
        raise BadRowError(f"bad {column}", text, expected, column)
    return int(value)
