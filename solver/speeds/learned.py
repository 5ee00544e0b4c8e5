"""A throughput model that learns from the runs it sees (issue 62, item 3).

:class:`LearnedThroughput` wraps a *prior* :class:`~hetsched.core.throughput.ThroughputModel`
(Gavel's table, the built-in catalogue, a fitted model, or nothing) and takes
observations of real runs: ``observe(job_type, gpu_type, num_gpus, placement, steps,
trace_seconds)``. Each key (job type, GPU type, GPU count, placement) keeps the steps
and seconds of its runs; its measured throughput is ``sum(steps) / sum(seconds)``, the
running mean of each run's ``steps / seconds`` weighted by its seconds (a long run
counts for more than a short one, and two runs are one run of their total length).

A question is answered by the first rule that applies (:meth:`LearnedThroughput.explain`
names it):

``measured``
    the key was observed: its weighted mean.
``prior``
    the prior knows the job type and the key is not measured: the prior's value when the
    job type has no measurement, and 0.0 (cannot run: out of memory, say) wherever the
    prior says 0, measured elsewhere or not.
``count-scaled``
    the job type ran on this GPU type at another GPU count or placement: the nearest
    measured one (same placement first, then the nearest count on a log scale) times the
    scaling between the two, taken from, in order: the job type's own measurements of
    both on other GPU types (median), the prior's *reference* job types on this GPU type,
    then on any GPU type (median ratio over the references the prior gives a positive
    value at both), the other measured job types on this GPU type, and if nothing:
    linear scaling, the per-GPU throughput kept (n / n' times; a change of placement
    alone, times 1). The references are the job type itself when the prior knows it,
    else every job type the prior knows.
``type-borrowed``
    the job type ran on other GPU types only: for each such type g', the answer there
    (measured or count-scaled) times the GPU-type ratio g' -> g; the median over g'. The
    ratio is the median over the references of prior(r, g) / prior(r, g') at the same
    GPU count and placement, else at one GPU, else the same over the other measured job
    types, else 1.
``bootstrap``
    a job type never seen, unknown to the prior: the median over the prior's job types
    of their positive values at this GPU type and count (at one GPU, count-scaled, when
    the prior has none at this count); if the prior has nothing on this GPU type, the
    median of the other job types measured at the key.
``fallback``
    nothing at all is known on this GPU type (an empty prior, no run there yet):
    ``fallback`` steps/s per GPU, only so that the job is schedulable until it runs.

A GPU type that neither the prior, nor ``gpu_types``, nor an observation names answers
0.0 (``unknown``): a policy asks of its cluster's types, which should be given.

The bootstrap follows Sia (Jayaram Subramanya et al., SOSP 2023; its artifact,
github.com/siasosp23/artifacts, ``sia-simulator/``): a new job is profiled on one GPU of
each type (``Cluster.compute_throughputs`` in ``cluster.py``, the "min-GPU throughputs",
and ``Cluster.compute_throughput_ratios``, their ratios between GPU types), and while
only some GPU types have a throughput model of the job, ``SiaPolicy._compute_goodputs_v2``
in ``sia.py`` projects the goodput on another type from a measured type's model times
the ratio, or returns the raw one-GPU throughput when no type has a model yet. Here no
profiling run is assumed: a never-seen job starts from the prior's median (the
"bootstrap"), its first run on a GPU type is the one-GPU-of-that-type measurement, and
the ratios between GPU types come from the prior's job types instead of the job's own
profile.

Bad observations (an empty type, a GPU count below 1, steps negative or not finite,
seconds not positive or not finite, a throughput outside the range a throughput table
accepts) raise :class:`~hetsched.core.errors.InputError` and change nothing: the caller
(the agent reading a job's report) decides whether to log and go on; a 0-step run of
positive length is a valid observation (0 steps/s: the job made no progress there).

The model is mutable: answers change with the observations (``version`` counts the ones
that moved a mean by more than :data:`SAME_MEAN` of itself).
Do not put it behind a view that caches answers (``PolicyView`` does); take a frozen
``snapshot`` when one is needed. The prior is treated as fixed and its answers cached.
What was measured: ``rows``/``table`` (a throughput table), ``write_csv`` (the table with
each key's steps and seconds, atomically) and ``read_csv`` (learning on from such a file).
"""

from __future__ import annotations

import csv
import io
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from statistics import median
from typing import Literal

import numpy as np
import numpy.typing as npt

from hetsched.core.errors import InputError
from hetsched.core.outputs import write_text
from hetsched.core.ranges import MAX_THROUGHPUT, MIN_THROUGHPUT
from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputKey, ThroughputModel, ThroughputTable
from hetsched.speeds.measured_csv import cell_number, csv_rows

log = logging.getLogger(__name__)

Rule = Literal["measured", "prior", "count-scaled", "type-borrowed", "bootstrap",
               "fallback", "unknown"]
#: a GPU count and placement
Config = tuple[int, Placement]
ONE_GPU: Config = (1, Placement.PACKED)
#: steps/s per GPU given where nothing at all is known (see the module)
FALLBACK_STEPS_PER_S = 1.0
#: A key's mean that moves by at most this much of itself changes no answer: the answers
#: (and ``version``) stay as they were. A run at a steady speed observed again and again
#: (the replay's learner does at every decision) then leaves every answer, and the table a
#: policy plans with, as it is, instead of rebuilding them for a change in the 16th digit.
SAME_MEAN = 1e-9
#: :meth:`LearnedThroughput.write_csv`'s columns: a throughput table's, and the sums
CSV_COLUMNS = ("job_type", "gpu_type", "num_gpus", "placement", "throughput", "steps",
               "seconds")


def _median_ratio(pairs: Iterable[tuple[float, float]]) -> float | None:
    """The median of ``top / bottom`` over the pairs where both are positive; None: none."""
    ratios = [top / bottom for top, bottom in pairs if top > 0 and bottom > 0]
    return median(ratios) if ratios else None


def _check_name(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError("empty name", path=path, value=value, expected="a non-empty string")
    return value


class LearnedThroughput:
    """Steps/s learned from observed runs on top of a prior model (see the module)."""

    def __init__(self, prior: ThroughputModel | None = None, gpu_types: Iterable[str] = (),
                 measured: Mapping[ThroughputKey, tuple[float, float]] | None = None,
                 fallback: float = FALLBACK_STEPS_PER_S) -> None:
        """``prior``: what is known before any run (None: nothing); ``gpu_types``: GPU
        types to answer on besides the prior's (the cluster's); ``measured``: (steps,
        seconds) per key, as :meth:`sums` gives them; ``fallback``: steps/s per GPU where
        nothing is known."""
        self.prior: ThroughputModel = prior if prior is not None else ThroughputTable()
        self._prior_jobs = frozenset(getattr(self.prior, "job_types", ()) or ())
        self._prior_gpus = frozenset(getattr(self.prior, "gpu_types", ()) or ())
        self._named_gpus = frozenset(_check_name(g, f"gpu_types[{i}]")
                                     for i, g in enumerate(gpu_types))
        if not isinstance(fallback, int | float) or not math.isfinite(fallback) \
                or not MIN_THROUGHPUT <= fallback <= MAX_THROUGHPUT:
            raise InputError("bad fallback", path="fallback", value=fallback,
                             expected=f"steps/s from {MIN_THROUGHPUT:g} to {MAX_THROUGHPUT:g}")
        self.fallback = float(fallback)
        #: steps and seconds observed per key
        self._sums: dict[ThroughputKey, tuple[float, float]] = {}
        #: measured configurations per (job type, GPU type)
        self._configs: dict[tuple[str, str], dict[Config, float]] = {}
        self._answers: dict[ThroughputKey, tuple[float, Rule]] = {}
        self._prior_answers: dict[ThroughputKey, float] = {}
        #: observations that moved a mean (answers may change whenever it does)
        self.version = 0
        #: :meth:`policy_table`'s last table: (version, shapes, table)
        self._policy_table: tuple[int, frozenset[tuple[str, int]], ThroughputTable] | None \
            = None
        for key, (steps, seconds) in (measured or {}).items():
            self.observe(*key, steps=steps, trace_seconds=seconds)

    def __reduce__(self) -> tuple[type[LearnedThroughput], tuple[object, ...]]:
        """Pickled as its prior, named GPU types, sums and fallback (caches rebuilt)."""
        return type(self), (self.prior, sorted(self._named_gpus), dict(self._sums),
                            self.fallback)

    # -- observations ------------------------------------------------------------------

    def observe(self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement | str,
                steps: float, trace_seconds: float) -> float:
        """Take a run of ``steps`` steps in ``trace_seconds`` seconds (its time making
        progress: no restore or start latency) of ``job_type`` on ``num_gpus`` GPUs of
        ``gpu_type``; returns the key's new measured steps/s. Bad input: InputError."""
        _check_name(job_type, "observe.job_type")
        _check_name(gpu_type, "observe.gpu_type")
        if isinstance(num_gpus, bool) or not isinstance(num_gpus, int | np.integer) \
                or num_gpus < 1:
            raise InputError("bad GPU count", path="observe.num_gpus", value=num_gpus,
                             expected="an integer >= 1")
        try:
            where = Placement(placement)
        except ValueError:
            raise InputError("bad placement", path="observe.placement", value=placement,
                             expected="packed or spread") from None
        for name, value in (("steps", steps), ("trace_seconds", trace_seconds)):
            if isinstance(value, bool) or not isinstance(value, int | float | np.floating) \
                    or not math.isfinite(value) or value < 0:
                raise InputError(f"bad {name}", path=f"observe.{name}", value=value,
                                 expected="a finite number >= 0")
        if trace_seconds <= 0:
            raise InputError("a run of no time", path="observe.trace_seconds",
                             value=trace_seconds, expected="seconds > 0")
        speed = steps / trace_seconds
        if speed != 0 and not MIN_THROUGHPUT <= speed <= MAX_THROUGHPUT:
            raise InputError("throughput out of range", path="observe.steps",
                             value=f"{steps:g} steps in {trace_seconds:g} s",
                             expected=f"0 or {MIN_THROUGHPUT:g} to {MAX_THROUGHPUT:g} steps/s")
        key: ThroughputKey = (job_type, gpu_type, int(num_gpus), where)
        done, spent = self._sums.get(key, (0.0, 0.0))
        done, spent = done + float(steps), spent + float(trace_seconds)
        self._sums[key] = (done, spent)
        configs = self._configs.setdefault((job_type, gpu_type), {})
        before = configs.get((int(num_gpus), where))
        configs[(int(num_gpus), where)] = done / spent
        if before is None or abs(done / spent - before) > SAME_MEAN * before:
            self._answers.clear()
            self.version += 1
        log.debug("learned %s on %d %s (%s): %g steps in %g s, now %g steps/s over %g s",
                  job_type, num_gpus, gpu_type, where, steps, trace_seconds, done / spent,
                  spent)
        return done / spent

    def measured(self, job_type: str, gpu_type: str, num_gpus: int,
                 placement: Placement | str) -> float | None:
        """The measured steps/s of the key, None if it was never observed."""
        return self._configs.get((job_type, gpu_type), {}).get((num_gpus, Placement(placement)))

    def sums(self) -> dict[ThroughputKey, tuple[float, float]]:
        """Steps and seconds observed per key (what ``measured=`` takes back)."""
        return dict(self._sums)

    # -- answers -----------------------------------------------------------------------

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        """steps/s by the first rule that applies (see the module)."""
        return self.explain(job_type, gpu_type, num_gpus, placement)[0]

    def explain(self, job_type: str, gpu_type: str, num_gpus: int,
                placement: Placement | str) -> tuple[float, Rule]:
        """steps/s and the rule that gave them (see the module)."""
        key: ThroughputKey = (job_type, gpu_type, int(num_gpus), Placement(placement))
        found = self._answers.get(key)
        if found is None:
            found = self._answer(job_type, gpu_type, (int(num_gpus), Placement(placement)))
            self._answers[key] = found
        return found

    def _answer(self, job: str, gpu: str, config: Config) -> tuple[float, Rule]:
        if config[0] < 1 or gpu not in self.gpu_types:
            return 0.0, "unknown"
        exact = self._configs.get((job, gpu), {}).get(config)
        if exact is not None:
            return exact, "measured"
        if job in self._prior_jobs:
            prior = self._prior(job, gpu, config)
            if prior <= 0 or not any(j == job for j, _ in self._configs):
                return prior, "prior"
        own = self._count_scaled(job, gpu, config)
        if own is not None:
            return own, "count-scaled"
        borrowed = [value * self._type_ratio(job, other, gpu, config)
                    for other in sorted(g for j, g in self._configs if j == job and g != gpu)
                    for value in [self._count_scaled(job, other, config)] if value]
        if borrowed:
            return median(borrowed), "type-borrowed"
        return self._bootstrap(job, gpu, config)

    def _prior(self, job: str, gpu: str, config: Config) -> float:
        """The prior's steps/s (cached: the prior is fixed)."""
        key: ThroughputKey = (job, gpu, *config)
        found = self._prior_answers.get(key)
        if found is None:
            found = self._prior_answers[key] = float(self.prior.throughput(job, gpu, *config))
        return found

    def _references(self, job: str) -> list[str]:
        """The job types whose scaling and GPU-type ratios stand for ``job``'s."""
        return [job] if job in self._prior_jobs else sorted(self._prior_jobs)

    def _count_scaled(self, job: str, gpu: str, config: Config) -> float | None:
        """``job`` at ``config`` on ``gpu`` from its nearest measured positive
        configuration there (module: count-scaled); None: none measured."""
        known = {c: v for c, v in self._configs.get((job, gpu), {}).items() if v > 0}
        if not known:
            return None
        if config in known:
            return known[config]
        base = min(known, key=lambda c: (c[1] != config[1],
                                         abs(math.log2(c[0] / config[0])), c[0]))
        return known[base] * self._count_ratio(job, gpu, base, config)

    def _count_ratio(self, job: str | None, gpu: str, base: Config, config: Config) -> float:
        """The scaling from ``base`` to ``config`` (module: count-scaled)."""
        if job is not None:
            own = _median_ratio((c[config], c[base]) for (j, g), c in self._configs.items()
                                if j == job and g != gpu and base in c and config in c)
            if own is not None:
                return own
        references = self._references(job) if job is not None else sorted(self._prior_jobs)
        gpus = [gpu, *sorted(self._prior_gpus - {gpu})]
        for on in ([gpu], gpus):
            ratio = _median_ratio((self._prior(r, g, config), self._prior(r, g, base))
                                  for r in references for g in on)
            if ratio is not None:
                return ratio
        measured = _median_ratio((c[config], c[base]) for (j, g), c in self._configs.items()
                                 if j != job and g == gpu and base in c and config in c)
        return measured if measured is not None else config[0] / base[0]

    def _type_ratio(self, job: str, source: str, target: str, config: Config) -> float:
        """The GPU-type ratio ``target`` / ``source`` (module: type-borrowed)."""
        references = self._references(job)
        for at in (config, ONE_GPU):
            ratio = _median_ratio((self._prior(r, target, at), self._prior(r, source, at))
                                  for r in references)
            if ratio is not None:
                return ratio
        for at in (config, ONE_GPU):
            ratio = _median_ratio((c[at], self._configs[(j, source)][at])
                                  for (j, g), c in self._configs.items()
                                  if j != job and g == target and at in c
                                  and at in self._configs.get((j, source), {}))
            if ratio is not None:
                return ratio
        return 1.0

    def _bootstrap(self, job: str, gpu: str, config: Config) -> tuple[float, Rule]:
        """A never-seen job type (module: bootstrap, fallback)."""
        values = [v for r in sorted(self._prior_jobs) if (v := self._prior(r, gpu, config)) > 0]
        if values:
            return median(values), "bootstrap"
        values = [v for r in sorted(self._prior_jobs) if (v := self._prior(r, gpu, ONE_GPU)) > 0]
        if values:
            return median(values) * self._count_ratio(None, gpu, ONE_GPU, config), "bootstrap"
        values = [c[config] for (j, g), c in sorted(self._configs.items())
                  if j != job and g == gpu and c.get(config, 0) > 0]
        if values:
            return median(values), "bootstrap"
        return self.fallback * config[0], "fallback"

    def matrix(self, job_types: Sequence[str], gpu_types: Sequence[str], counts: Sequence[int],
               placement: Placement) -> npt.NDArray[np.float64]:
        """steps/s, shape ``(len(job_types), len(gpu_types), len(counts))``."""
        return np.array([[[self.throughput(j, g, int(n), placement) for n in counts]
                          for g in gpu_types] for j in job_types],
                        dtype=np.float64).reshape(len(job_types), len(gpu_types), len(counts))

    @property
    def job_types(self) -> frozenset[str]:
        """The prior's job types and those observed."""
        return self._prior_jobs | frozenset(j for j, _ in self._configs)

    @property
    def gpu_types(self) -> frozenset[str]:
        """The prior's GPU types, those named and those observed."""
        return self._prior_gpus | self._named_gpus | frozenset(g for _, g in self._configs)

    # -- what was learned --------------------------------------------------------------

    def rows(self) -> list[tuple[str, str, int, Placement, float]]:
        """The measured keys as sorted ``(job_type, gpu_type, num_gpus, placement,
        steps_per_s)`` (a mean under the smallest throughput a table takes is 0)."""
        return sorted((j, g, n, p, v if v >= MIN_THROUGHPUT else 0.0)
                      for (j, g), configs in self._configs.items()
                      for (n, p), v in configs.items())

    def table(self) -> ThroughputTable:
        """What was measured as a throughput table (``write_throughput_csv`` writes it
        as the CSV that ``--throughput`` reads)."""
        return ThroughputTable.from_rows(self.rows())

    def snapshot(self, job_types: Iterable[str], gpu_types: Iterable[str],
                 counts: Iterable[int], placements: Iterable[Placement] = tuple(Placement)
                 ) -> ThroughputTable:
        """Every answer now for these keys (0.0 kept: cannot run) as a frozen table."""
        return ThroughputTable.from_rows(
            (j, g, n, p, self.throughput(j, g, n, p)) for j in job_types for g in gpu_types
            for n in counts for p in placements)

    def policy_table(self, jobs: Iterable[Job], gpu_types: Sequence[str]) -> ThroughputTable:
        """The model as a policy sees it: a frozen table (:meth:`snapshot`) of every
        answer it may ask of ``jobs`` (their types, and every type learned, at each GPU
        count they ask for or allow) on ``gpu_types``, both placements; the same table
        object until something new is learned or a job of a new shape comes, so that the
        policies' caches, kept per model object, stay valid exactly as long as the
        answers do."""
        wanted = frozenset((job.job_type, count) for job in jobs
                           for count in {job.num_gpus, *(job.allowed_gpu_counts or ())})
        cached = self._policy_table
        if cached is not None and cached[0] == self.version and wanted <= cached[1]:
            return cached[2]
        if cached is not None and cached[0] == self.version:
            wanted |= cached[1]
        types = sorted({job_type for job_type, _ in wanted} | set(self.job_types))
        counts = sorted({count for _, count in wanted} | {1})
        table = self.snapshot(types, gpu_types, counts, tuple(Placement))
        self._policy_table = (self.version, wanted, table)
        return table

    def write_csv(self, path: Path) -> None:
        """:meth:`csv_text`, written atomically."""
        write_text(path, self.csv_text(), "out", "the learned throughput file")

    def csv_text(self) -> str:
        """What was measured as CSV: a throughput table (``--throughput`` reads it and
        ignores the other columns) with each key's ``steps`` and ``seconds``, from which
        :meth:`read_csv` learns on."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for job, gpu, count, placement, speed in self.rows():
            steps, seconds = self._sums[(job, gpu, count, placement)]
            writer.writerow([job, gpu, count, placement.value, repr(speed), repr(steps),
                             repr(seconds)])
        return text.getvalue()

    @classmethod
    def read_csv(cls, path: Path, prior: ThroughputModel | None = None,
                 gpu_types: Iterable[str] = (), fallback: float = FALLBACK_STEPS_PER_S
                 ) -> LearnedThroughput:
        """A model over ``prior`` that has learned what :meth:`write_csv` wrote (its
        ``throughput`` column is not read: the sums are); a bad file is an InputError
        naming the line and column."""
        measured: dict[ThroughputKey, tuple[float, float]] = {}
        for line, cells in csv_rows(path, CSV_COLUMNS):
            where = (str(path), line)
            try:
                placement = Placement(cells["placement"])
            except ValueError:
                raise InputError("bad placement", file=str(path), path=f"line {line}.placement",
                                 value=cells["placement"], expected="packed or spread") from None
            key = (cells["job_type"], cells["gpu_type"],
                   int(cell_number(cells, "num_gpus", where, low=1, integer=True,
                                   expected="an integer >= 1")), placement)
            if key in measured:
                raise InputError("a key written twice", file=str(path), path=f"line {line}",
                                 value=[*key[:3], placement.value], expected="one row per key")
            measured[key] = (cell_number(cells, "steps", where, low=0),
                             cell_number(cells, "seconds", where, low=0, strict=True))
        try:
            return cls(prior, gpu_types, measured, fallback)
        except InputError as exc:
            raise exc.in_file(str(path)) from None
