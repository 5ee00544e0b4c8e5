"""Measured throughput profiles: the data every throughput model is fitted on.

A :class:`Profile` is a set of :class:`ProfilePoint` records, one measured
throughput (steps/s) per (job type, GPU type, GPU count, placement), plus any
co-location measurements that came with it. Two readers and one writer:

- :func:`read_gavel_throughputs` reads Gavel's ``simulation_throughputs.json``.
  Its keys are Python tuple literals, parsed with :func:`ast.literal_eval`
  (never ``eval``); ``<gpu>_unconsolidated`` worker types are the ``spread``
  placement; ``"null"`` is the isolated throughput; the ``[self, other]``
  pairs of co-located jobs are kept as :class:`CoLocation` records.
- :func:`read_profile_csv` / :func:`write_profile_csv`: the tidy CSV profile,
  columns ``job_type, gpu_type, num_gpus, placement, throughput`` and optional
  ``batch_size`` and ``family`` (docs/throughput-model.md), and the optional step columns
  :data:`STEP_COLUMNS`, read by :func:`hetsched.speeds.step_profiles.read_step_profile_csv`
  (this reader passes them over).

A throughput of 0 means "measured, cannot run" (e.g. out of memory).
"""

from __future__ import annotations

import ast
import csv
import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.json_files import read_json
from hetsched.core.ranges import text_float, text_int
from hetsched.core.records import MAX_GPUS_PER_JOB, MAX_THROUGHPUT, MIN_THROUGHPUT, in_range
from hetsched.core.sharing import DEFAULT_COLOCATION_FACTOR, CoLocationModel
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.speeds.measured_csv import check_header

log = logging.getLogger(__name__)

PROFILE_COLUMNS = ("job_type", "gpu_type", "num_gpus", "placement", "throughput")
OPTIONAL_COLUMNS = ("batch_size", "family")
#: Optional columns of a row measured as step times (docs/elastic.md): per-GPU batch
#: (samples), seconds per iteration and of it synchronising, GPUs on each node (``2+2``).
STEP_COLUMNS = ("local_batch_size", "step_time", "sync_time", "node_gpus",
                "model_parameters")
#: Gavel's worker type suffix for GPUs spread over several servers.
UNCONSOLIDATED = "_unconsolidated"
_BATCH_SUFFIX = re.compile(r"\s*\(batch size ([0-9]+)\)\s*$")

PointKey = tuple[str, str, int, Placement]


#: A measured throughput: 0 (cannot run) or within the instance format's range.
THROUGHPUT_RANGE = (f"a number of steps/s >= 0: 0 (cannot run) or from {MIN_THROUGHPUT:g} to "
                    f"{MAX_THROUGHPUT:g}")
#: The largest batch size a profile row may name.
MAX_BATCH_SIZE = 10**9


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _throughput_ok(value: Any) -> bool:
    return in_range(value, 0, 0) or in_range(value, MIN_THROUGHPUT, MAX_THROUGHPUT)


def family_of(job_type: str) -> str:
    """The model family of a job type: its name without a ``(batch size N)`` suffix.

    Job types of one family train the same network with different batch sizes,
    so they share their communication overhead (docs/throughput-model.md).
    """
    return _BATCH_SUFFIX.sub("", job_type) or job_type


def batch_size_of(job_type: str) -> int | None:
    """The batch size named by a ``(batch size N)`` suffix, or None."""
    match = _BATCH_SUFFIX.search(job_type)
    return int(match.group(1)) if match else None


def check_names(record: object, names: tuple[str, ...]) -> None:
    """Each of ``names`` of ``record`` is a non-empty string, else an InputError naming it
    (a measurement's job type and GPU type)."""
    for name in names:
        value = getattr(record, name)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"empty {name}", path=name, value=value,
                             expected="a non-empty string")


@dataclass(frozen=True)
class ProfilePoint:
    """One measurement: ``throughput`` steps/s of ``job_type`` on ``num_gpus`` GPUs.

    ``family`` defaults to the job type without its ``(batch size N)`` suffix and
    ``batch_size`` to the number in that suffix.
    """

    job_type: str
    gpu_type: str
    num_gpus: int
    placement: Placement
    throughput: float
    batch_size: int | None = None
    family: str = ""

    def __post_init__(self) -> None:
        check_names(self, ("job_type", "gpu_type"))
        if not in_range(self.num_gpus, 1, MAX_GPUS_PER_JOB, integer=True):
            raise InputError("bad GPU count", path="num_gpus", value=self.num_gpus,
                             expected=f"an integer from 1 to {MAX_GPUS_PER_JOB}")
        try:
            object.__setattr__(self, "placement", Placement(self.placement))
        except ValueError:
            raise InputError("bad placement", path="placement", value=self.placement,
                             expected="packed or spread") from None
        if not _throughput_ok(self.throughput):
            raise InputError("bad throughput", path="throughput", value=self.throughput,
                             expected=THROUGHPUT_RANGE)
        object.__setattr__(self, "throughput", float(self.throughput))
        if self.batch_size is None:
            object.__setattr__(self, "batch_size", batch_size_of(self.job_type))
        elif not in_range(self.batch_size, 1, MAX_BATCH_SIZE, integer=True):
            raise InputError("bad batch size", path="batch_size", value=self.batch_size,
                             expected=f"an integer from 1 to {MAX_BATCH_SIZE:,}")
        if not isinstance(self.family, str):
            raise InputError("bad family", path="family", value=self.family,
                             expected="a string")
        if not self.family.strip():
            object.__setattr__(self, "family", family_of(self.job_type))

    @property
    def key(self) -> PointKey:
        """``(job_type, gpu_type, num_gpus, placement)``."""
        return (self.job_type, self.gpu_type, self.num_gpus, self.placement)


@dataclass(frozen=True)
class CoLocation:
    """Two jobs sharing the same GPUs (Gavel's space sharing), steps/s of each.

    ``(0, 0)`` means the pair cannot share. Kept for later use; no model reads it yet.
    """

    gpu_type: str
    placement: Placement
    job_type: str
    num_gpus: int
    other_job_type: str
    other_num_gpus: int
    throughput: float
    other_throughput: float


@dataclass(frozen=True, eq=False)
class Profile:
    """Measured throughputs (steps/s), at most one per (job, GPU type, count, placement).

    ``source`` names the file it was read from (``""`` if built in memory) and
    ``sha256`` is that file's digest.
    """

    points: tuple[ProfilePoint, ...]
    colocations: tuple[CoLocation, ...] = ()
    source: str = ""
    sha256: str = ""
    kind: str = "rows"
    #: where each point was read (``"line 7"`` of a CSV file), for errors; () if unknown
    locations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", tuple(self.points))
        object.__setattr__(self, "colocations", tuple(self.colocations))
        object.__setattr__(self, "locations", tuple(self.locations))
        if self.locations and len(self.locations) != len(self.points):
            raise InputError("one location per point", path="locations",
                             value=len(self.locations), expected=f"{len(self.points)}")
        seen: dict[PointKey, int] = {}
        families: dict[str, str] = {}
        for index, point in enumerate(self.points):
            if not isinstance(point, ProfilePoint):
                raise InputError("not a profile point", path=f"points[{index}]",
                                 value=type(point).__name__, expected="a ProfilePoint")
            if point.key in seen:
                raise InputError(
                    "duplicate measurement", path=self.where(index),
                    value=[*point.key[:3], point.placement.value],
                    expected=f"one row per (job_type, gpu_type, num_gpus, placement); "
                    f"the first is {self.where(seen[point.key])}",
                )
            seen[point.key] = index
            family = families.setdefault(point.job_type, point.family)
            if family != point.family:
                raise InputError(
                    "job type is given two families", path=f"{self.where(index)}.family",
                    value=point.family, expected=f"{family!r}, as in its other rows",
                )
        if not self.points:
            raise InputError("the profile has no measurements", path="points", value=[],
                             expected="at least one row")

    def where(self, index: int) -> str:
        """Where point ``index`` was read (``line 7``), else ``points[index]``."""
        return self.locations[index] if self.locations else f"points[{index}]"

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, str, int, Placement | str, float]],
                  **kwargs: Any) -> Profile:
        """A profile from ``(job_type, gpu_type, num_gpus, placement, steps_per_s)`` rows."""
        points = []
        for index, (job_type, gpu_type, count, placement, value) in enumerate(rows):
            try:
                points.append(ProfilePoint(job_type, gpu_type, count, Placement(placement),
                                           value))
            except (InputError, ValueError) as exc:
                error = exc if isinstance(exc, InputError) else InputError(
                    "bad placement", path="placement", value=placement,
                    expected="packed or spread")
                raise error.at(f"rows[{index}]") from None
        return cls(tuple(points), **kwargs)

    @cached_property
    def by_key(self) -> Mapping[PointKey, ProfilePoint]:
        """Points by ``(job_type, gpu_type, num_gpus, placement)``."""
        return {point.key: point for point in self.points}

    @cached_property
    def job_types(self) -> tuple[str, ...]:
        """Job types, sorted."""
        return tuple(sorted({p.job_type for p in self.points}))

    @cached_property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types, sorted."""
        return tuple(sorted({p.gpu_type for p in self.points}))

    @cached_property
    def family(self) -> Mapping[str, str]:
        """The family of each job type."""
        return {p.job_type: p.family for p in self.points}

    @cached_property
    def batch_size(self) -> Mapping[str, int | None]:
        """The batch size of each job type (None when unknown)."""
        sizes: dict[str, int | None] = {}
        for point in self.points:
            if sizes.get(point.job_type) is None:
                sizes[point.job_type] = point.batch_size
        return sizes

    def table(self) -> ThroughputTable:
        """The measured mode: the profile as a lookup table (0 where not measured)."""
        return ThroughputTable({p.key: p.throughput for p in self.points})

    def without(self, key: PointKey) -> Profile:
        """The same profile without the point ``key`` (for leave-one-out)."""
        return self.subset(lambda point: point.key != key)

    def subset(self, keep: Callable[[ProfilePoint], bool]) -> Profile:
        """The same profile with only the points ``keep`` says."""
        chosen = [i for i, point in enumerate(self.points) if keep(point)]
        return Profile(tuple(self.points[i] for i in chosen), self.colocations, self.source,
                       self.sha256, self.kind,
                       tuple(self.locations[i] for i in chosen) if self.locations else ())

    def colocation_model(self, default_factor: float = DEFAULT_COLOCATION_FACTOR
                         ) -> CoLocationModel:
        """The speed factors of jobs sharing a GPU (:mod:`hetsched.core.sharing`): the
        measured pairs of one GPU each, packed, as ratios to the job's throughput alone
        (a pair measured at 0, Gavel's "cannot share", is left to ``default_factor``)."""
        alone = {(p.job_type, p.gpu_type): p.throughput for p in self.points
                 if p.num_gpus == 1 and p.placement is Placement.PACKED}
        pairs: dict[tuple[str, str, str], float] = {}
        for pair in self.colocations:
            if pair.num_gpus != 1 or pair.other_num_gpus != 1 or pair.throughput <= 0 \
                    or pair.placement is not Placement.PACKED:
                continue
            base = alone.get((pair.job_type, pair.gpu_type), 0.0)
            if base > 0:
                pairs[(pair.gpu_type, pair.job_type, pair.other_job_type)] = \
                    min(1.0, pair.throughput / base)
        return CoLocationModel(pairs, default_factor)

    def rows(self) -> list[tuple[str, str, int, Placement, float]]:
        """Sorted ``(job_type, gpu_type, num_gpus, placement, steps_per_s)`` rows."""
        return sorted((*p.key, p.throughput) for p in self.points)

    def __len__(self) -> int:
        return len(self.points)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _gavel_key(text: str, cache: dict[str, tuple[str, int]], path: str,
               file: str) -> tuple[str, int]:
    """``"('ResNet-50 (batch size 64)', 1)"`` -> ``("ResNet-50 (batch size 64)", 1)``."""
    if text in cache:
        return cache[text]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
            and value[0].strip() and _is_int(value[1]) and value[1] >= 1):
        raise InputError("bad job key", path=path, value=text, file=file,
                         expected="a Python tuple literal ('job type', number of GPUs >= 1)")
    cache[text] = (value[0], value[1])
    return cache[text]


def _number(value: Any, path: str, file: str) -> float:
    if not _throughput_ok(value):
        raise InputError("bad throughput", path=path, value=value, file=file,
                         expected=THROUGHPUT_RANGE)
    return float(value)


def read_gavel_throughputs(path: str | Path) -> Profile:
    """Read Gavel's ``simulation_throughputs.json`` (steps/s) as a :class:`Profile`.

    Worker types ``<gpu>`` are the packed placement and ``<gpu>_unconsolidated``
    the spread one; Gavel repeats the 1-GPU figure under both, and both rows are
    kept. Co-location pairs ``[self, other]`` become :class:`CoLocation` records.
    """
    path = Path(path)
    file = str(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or not doc:
        raise InputError("not a Gavel throughput file", path="$", file=file,
                         value=type(doc).__name__,
                         expected="an object keyed by worker type (k80, v100_unconsolidated...)")
    cache: dict[str, tuple[str, int]] = {}
    points: list[ProfilePoint] = []
    colocations: list[CoLocation] = []
    for worker_type, jobs in doc.items():
        where = f"$[{worker_type!r}]"
        gpu_type = worker_type.removesuffix(UNCONSOLIDATED)
        placement = Placement.SPREAD if worker_type.endswith(UNCONSOLIDATED) else \
            Placement.PACKED
        if not gpu_type or not isinstance(jobs, dict):
            raise InputError("bad worker type", path=where, file=file,
                             value=worker_type if not gpu_type else type(jobs).__name__,
                             expected="an object of job keys per GPU type name")
        for job_text, measured in jobs.items():
            job_path = f"{where}[{job_text!r}]"
            job_type, count = _gavel_key(job_text, cache, job_path, file)
            if not isinstance(measured, dict) or "null" not in measured:
                raise InputError("missing isolated throughput", path=job_path, file=file,
                                 value=measured if not isinstance(measured, dict)
                                 else sorted(measured)[:3],
                                 expected="an object with a \"null\" entry (steps/s alone)")
            alone = _number(measured["null"], f"{job_path}.null", file)
            try:
                points.append(ProfilePoint(job_type, gpu_type, count, placement, alone))
            except InputError as exc:
                raise exc.at(job_path).in_file(file) from None
            for other_text, pair in measured.items():
                if other_text == "null":
                    continue
                pair_path = f"{job_path}[{other_text!r}]"
                other_type, other_count = _gavel_key(other_text, cache, pair_path, file)
                if not isinstance(pair, list) or len(pair) != 2:
                    raise InputError("bad co-location pair", path=pair_path, file=file,
                                     value=pair, expected="[self, other] steps/s")
                colocations.append(CoLocation(
                    gpu_type, placement, job_type, count, other_type, other_count,
                    _number(pair[0], f"{pair_path}[0]", file),
                    _number(pair[1], f"{pair_path}[1]", file)))
    try:
        profile = Profile(tuple(points), tuple(colocations), file, _digest(path), "gavel")
    except InputError as exc:
        raise exc.in_file(file) from None
    log.info("read %s: %d measurements, %d co-location pairs", file, len(points),
             len(colocations))
    return profile


def read_profile_csv(path: str | Path) -> Profile:
    """Read a tidy CSV profile (docs/throughput-model.md); other columns are ignored.
    Every row must have as many fields as the header (a row cut short is an error naming
    its line, never a value read as far as it goes)."""
    path = Path(path)
    file = str(path)
    if not path.is_file():
        raise InputError("no such profile file", file=file)
    points: list[ProfilePoint] = []
    lines: list[str] = []
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror})", file=file) from None
    with handle:
        try:
            reader = csv.reader(handle, strict=True)
            header = [name.strip() for name in next(reader, [])]
            check_header(header, file)
            missing = [c for c in PROFILE_COLUMNS if c not in header]
            if missing:
                raise InputError(f"missing column '{missing[0]}'", path="line 1", file=file,
                                 value=header, expected="columns " + ", ".join(PROFILE_COLUMNS)
                                 + " (and optionally " + ", ".join(OPTIONAL_COLUMNS) + ")")
            line = reader.line_num
            for cells in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    raise InputError("wrong number of fields", path=f"line {line}", file=file,
                                     value=len(cells),
                                     expected=f"{len(header)} fields as in the header")
                points.append(_csv_point(dict(zip(header, cells, strict=True)),
                                         f"line {line}", file))
                lines.append(f"line {line}")
        except csv.Error as exc:
            raise InputError(f"not valid CSV ({exc})", path=f"line {reader.line_num}",
                             file=file) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", file=file) from None
    try:
        return Profile(tuple(points), source=file, sha256=_digest(path), kind="csv",
                       locations=tuple(lines))
    except InputError as exc:
        raise exc.in_file(file) from None


def _csv_point(row: dict[str, Any], where: str, file: str) -> ProfilePoint:
    def cell(name: str) -> str:
        value = row.get(name)
        return value.strip() if isinstance(value, str) else ""

    def integer(name: str, text: str) -> int:
        try:
            return text_int(text)
        except ValueError:
            raise InputError(f"bad {name}", path=f"{where}.{name}", file=file, value=text,
                             expected="an integer >= 1") from None

    count = integer("num_gpus", cell("num_gpus"))
    try:
        speed = text_float(cell("throughput"))
    except ValueError:
        raise InputError("bad throughput", path=f"{where}.throughput", file=file,
                         value=cell("throughput"), expected="a number of steps/s") from None
    try:
        placement = Placement(cell("placement"))
    except ValueError:
        raise InputError("bad placement", path=f"{where}.placement", file=file,
                         value=cell("placement"), expected="packed or spread") from None
    batch = cell("batch_size")
    try:
        return ProfilePoint(cell("job_type"), cell("gpu_type"), count, placement, speed,
                            integer("batch_size", batch) if batch else None, cell("family"))
    except InputError as exc:
        raise exc.at(where).in_file(file) from None


def write_profile_csv(profile: Profile, path: str | Path) -> None:
    """Write ``profile`` as a tidy CSV profile (all columns, sorted rows)."""
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow((*PROFILE_COLUMNS, *OPTIONAL_COLUMNS))
        for point in sorted(profile.points, key=lambda p: (*p.key, p.throughput)):
            writer.writerow([point.job_type, point.gpu_type, point.num_gpus,
                             point.placement.value, repr(point.throughput),
                             "" if point.batch_size is None else point.batch_size,
                             point.family])


def read_profile(path: str | Path) -> Profile:
    """Read a profile: ``.csv`` is the tidy format, ``.json`` Gavel's throughput file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return read_profile_csv(path)
    if suffix == ".json":
        return read_gavel_throughputs(path)
    raise InputError("unknown profile format", file=str(path), value=path.suffix,
                     expected="a .csv tidy profile or Gavel's .json throughput file")
