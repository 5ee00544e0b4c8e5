"""The job side of hetsched: what a training loop calls to report the steps it did and to
learn that it must checkpoint and stop (docs/slurm.md, "Real jobs: hetsched.job")::

    from hetsched import job

    run = job.start()            # the report's place from the environment; SIGTERM caught
    steps = run.resumed_steps    # the steps earlier runs reported (0 on the first)
    while steps < total:
        ...                      # one training step
        steps += 1
        run.report(steps)        # written at most every ``every_s`` wall seconds
        if run.must_stop:        # SIGTERM or SIGINT: Slurm requeues or cancels the job
            ...                  # save the script's own checkpoint (weights, RNG, step)
            run.stopped(steps)
            sys.exit(run.exit_code)  # 143 (SIGTERM) or 130 (SIGINT)
    run.completed(steps)

**The report** is the job's checkpoint file of hetsched's Slurm side,
``$HETSCHED_CHECKPOINTS/$SLURM_JOB_ID.json`` (:class:`Checkpoint`: the steps done and
every run the job had), rewritten whole and atomically, so that the agent (``hetsched
slurm run``) reads a real job's report as it reads the training emulator's, which writes
through this module too (:mod:`hetsched.slurm.emulator`). A real job does not know its
GPU type nor its throughput: those fields of its runs stay empty (``""``, ``()``, 0).
Without ``HETSCHED_CHECKPOINTS`` and ``SLURM_JOB_ID`` (a script run outside Slurm),
:func:`start` works the same and writes nothing. ``hetsched slurm submit --script``
exports them, with ``HETSCHED_LAUNCHED`` (the batch script's start, Unix s),
``HETSCHED_JOB`` (the trace's job id) and ``HETSCHED_WORK`` (its steps).

**Signals.** :func:`start` sets a handler on SIGTERM and SIGINT that only records the
signal (:attr:`Run.must_stop`): nothing is raised into the training loop, and a report
being written is never cut in half. It unblocks both in the calling thread, which must
be the main thread (Python runs signal handlers there, between two bytecodes, whichever
thread the kernel gave the signal to). So a step that is one long call into C (a large
matrix product, a blocking read) delays ``must_stop`` until it returns: the step, the
script's own checkpoint and :meth:`Run.stopped` must fit in Slurm's ``KillWait`` (the
time from SIGTERM to SIGKILL: 5 s on hetsched's local cluster, 30 s by Slurm's default).
Before :func:`start` a SIGTERM has its default action and ends the job at once with
nothing written, whichever thread takes it, so call it early (this module is cheap to
import: it imports the standard library only, not numpy nor the rest of hetsched). The
training emulator takes the other road, documented in its module: it blocks the two
signals before any thread starts (a thread inherits its signal mask, and one with SIGTERM
unblocked and no handler would end the job unwritten) and waits for them with
``sigtimedwait`` between its writes; it does not call :func:`start`.

**The format** (version 2; version 1, the emulator's before real jobs reported, is read
too: the same fields, none of them empty)::

    {"v": 2, "slurm_job_id": "12", "job": "j7", "work": 5000.0,
     "comment": "hetsched {...}", "steps": 1234.0, "state": "running",
     "updated": 1795742900.1,
     "runs": [{"start": 1795742878.6, "resume": 1795742879.4, "end": 1795742900.1,
               "nodes": [], "gpus": [], "gpu_type": "", "gpu_types": [], "num_gpus": 0,
               "placement": "", "throughput": 0.0, "steps_start": 0.0,
               "steps_end": 1234.0, "state": "running", "restart_count": 0,
               "note": ""}]}

``job``, ``work`` (steps; 0: not known) and ``comment`` (the job's hetsched metadata) are
empty for a job that was not told them; a run's ``nodes`` to ``throughput`` are what the
emulator knows of its GPUs (docs/slurm.md, "The training emulator") and empty for a real
job. ``resume`` is when the run started making progress: after the emulator's restart
penalty, or when a real job called :func:`start`.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

#: The report format's version, and the versions read.
VERSION = 2
READ_VERSIONS = (1, 2)
#: How a run or a job stands: ``running`` (the last write of a live run; a run killed
#: without warning stays so), ``stopped`` (SIGTERM: requeued or cancelled), ``completed``
#: (its steps reached the work), ``failed`` (it could not run, or said it failed),
#: ``refused`` (it cannot run on the GPUs it was given, and may elsewhere: a GPU type or
#: gang size it may not use, not enough memory there; the agent places it anew).
STATES = ("running", "stopped", "completed", "failed", "refused")
#: Wall seconds between two reports of :meth:`Run.report` by default.
REPORT_EVERY_S = 1.0
#: The environment a job is told its report's place and itself in.
FOLDER_VARIABLE = "HETSCHED_CHECKPOINTS"
JOB_ID_VARIABLE = "SLURM_JOB_ID"
LAUNCHED_VARIABLE = "HETSCHED_LAUNCHED"
JOB_VARIABLE = "HETSCHED_JOB"
WORK_VARIABLE = "HETSCHED_WORK"
#: The signals that ask a job to stop: Slurm's requeue and cancel (SIGTERM), Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class RunRecord:
    """One run of a job: launched at ``start`` (Unix s; its batch script's start), making
    progress from ``resume``, last written at ``end``; on ``gpus`` (``NODE/INDEX``,
    Slurm's GPU index) of ``nodes``, at ``throughput`` steps per trace second (the pace of
    the slowest of ``gpu_types``, ``gpu_type``), from ``steps_start`` to ``steps_end``.
    The GPU fields are empty for a real job (module docstring)."""

    start: float
    resume: float
    end: float
    nodes: tuple[str, ...]
    gpus: tuple[str, ...]
    gpu_type: str
    gpu_types: tuple[str, ...]
    num_gpus: int
    placement: str
    throughput: float
    steps_start: float
    steps_end: float
    state: str
    restart_count: int = 0
    note: str = ""


@dataclass(frozen=True)
class Checkpoint:
    """A job's report: its ``steps`` done of ``work`` (0: not known), its metadata
    (``comment``, as in Slurm), how it stands (``state``, the last run's), when last
    written (``updated``, Unix s), and its ``runs``, oldest first."""

    slurm_job_id: str
    job: str = ""
    work: float = 0.0
    comment: str = ""
    steps: float = 0.0
    state: str = "running"
    updated: float = 0.0
    runs: tuple[RunRecord, ...] = field(default_factory=tuple)

    @property
    def done(self) -> bool:
        """Whether the job completed: its steps reached its work, or its last run said
        so."""
        return self.state == "completed" or 0 < self.work <= self.steps

    def with_run(self, run: RunRecord, updated: float) -> Checkpoint:
        """This checkpoint with ``run`` as its newest run (replacing the newest if that
        one has the same start: the same run written again)."""
        runs = self.runs
        if runs and runs[-1].start == run.start:
            runs = runs[:-1]
        return replace(self, steps=run.steps_end, state=run.state, updated=updated,
                       runs=(*runs, run))

    def to_json(self) -> dict[str, Any]:
        """The checkpoint as a JSON object (module docstring)."""
        return {"v": VERSION, **asdict(self)}


def checkpoint_path(folder: Path | str, slurm_job_id: str) -> Path:
    """The report of Slurm job ``slurm_job_id`` in ``folder``."""
    return Path(folder) / f"{slurm_job_id}.json"


def write_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` to ``path`` atomically: a temporary file beside it, flushed
    to disk, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("w", encoding="utf-8") as file:
        json.dump(checkpoint.to_json(), file, separators=(",", ":"))
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The report in ``path``, None if there is none; a ValueError naming the file if it
    cannot be read or is not a report (:mod:`hetsched.slurm.checkpoint` turns it into
    hetsched's InputError)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable checkpoint ({exc})") from None
    try:
        if not isinstance(document, dict) or document.pop("v") not in READ_VERSIONS:
            raise ValueError(f"not a version of {READ_VERSIONS}")
        runs = tuple(RunRecord(**{**run, "nodes": tuple(run["nodes"]),
                                  "gpus": tuple(run["gpus"]),
                                  "gpu_types": tuple(run["gpu_types"])})
                     for run in document.pop("runs"))
        return Checkpoint(**document, runs=runs)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a checkpoint of hetsched's jobs ({exc})") from None


def _at_least_0(value: float, name: str = "steps") -> float:
    """``value`` (any real number: numpy's too) as a float; a ValueError naming it unless
    it is finite and >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"bad {name} (got {value!r}; expected a finite number >= 0)")
    return float(value)


class Run:
    """This run of a job: it reports the job's steps to ``path`` (None: nowhere) in
    ``checkpoint``, as ``record`` with its end, steps and state filled in at each write.
    :func:`start` makes one for a training script; the emulator makes its own."""

    def __init__(self, path: Path | None, checkpoint: Checkpoint, record: RunRecord, *,
                 every_s: float = REPORT_EVERY_S) -> None:
        self.path, self.checkpoint, self.record = path, checkpoint, record
        self.every_s = _at_least_0(every_s, "every_s (wall seconds)")
        #: The steps the earlier runs of the job reported (0 on the first run).
        self.resumed_steps: float = checkpoint.steps
        #: The stop signal received (SIGTERM, SIGINT), None while none came.
        self.signal: int | None = None
        self._written_at = -math.inf

    @property
    def work(self) -> float:
        """The job's steps in all as its submitter gave them (``HETSCHED_WORK``, or the
        report's), 0 if not known."""
        return self.checkpoint.work

    @property
    def must_stop(self) -> bool:
        """Whether SIGTERM or SIGINT came: save the own checkpoint, :meth:`stopped`, exit."""
        return self.signal is not None

    @property
    def exit_code(self) -> int:
        """128 + the stop signal's number (143 for SIGTERM, 130 for SIGINT); 0 if none."""
        return 0 if self.signal is None else 128 + int(self.signal)

    def report(self, steps: float, *, at: float | None = None) -> bool:
        """The job has done ``steps`` in all (its earlier runs' included) at Unix time
        ``at`` (default now): written if :attr:`every_s` wall seconds passed since the
        last write (cheap otherwise). Whether it was written."""
        steps = _at_least_0(steps)
        if time.monotonic() - self._written_at < self.every_s:
            return False
        self._write("running", steps, at, "")
        return True

    def stopped(self, steps: float, *, note: str | None = None,
                at: float | None = None) -> None:
        """The run stops at ``steps`` (its own checkpoint saved): written at once,
        ``note`` by default the stop signal's name."""
        if note is None:
            note = signal.Signals(self.signal).name if self.signal is not None else ""
        self._write("stopped", _at_least_0(steps), at, note)

    def completed(self, steps: float, *, note: str = "", at: float | None = None) -> None:
        """The job did all its ``steps``: written at once."""
        self._write("completed", _at_least_0(steps), at, note)

    def failed(self, note: str, *, steps: float | None = None,
               at: float | None = None) -> None:
        """The run cannot go on (``note`` says why) at ``steps`` (default: where it
        started): written at once."""
        self._write("failed", self.record.steps_start if steps is None else _at_least_0(steps),
                    at, note)

    def refused(self, note: str, *, at: float | None = None) -> None:
        """The run cannot go on *on these GPUs* (``note`` says why: a GPU type it may not
        use, too little memory, too many GPUs), at the steps it started from: written at
        once. The agent places the job anew, elsewhere (docs/slurm.md, "Faults")."""
        self._write("refused", self.record.steps_start, at, note)

    def _write(self, state: str, steps: float, at: float | None, note: str) -> None:
        now = time.time()
        self.record = replace(self.record, end=now if at is None else at, steps_end=steps,
                              state=state, note=note)
        self.checkpoint = self.checkpoint.with_run(self.record, now)
        self._written_at = time.monotonic()
        if self.path is not None:
            write_checkpoint(self.path, self.checkpoint)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The stop signals' handler: only remembers the first one."""
        if self.signal is None:
            self.signal = signum


def report_path(folder: Path | str | None = None, job_id: str | None = None) -> Path | None:
    """Where a job's report goes: ``folder`` (default ``$HETSCHED_CHECKPOINTS``) /
    ``job_id`` (default ``$SLURM_JOB_ID``) ``.json``; None without either (a warning if
    only one is known)."""
    folder = folder if folder is not None else os.environ.get(FOLDER_VARIABLE) or None
    job_id = job_id if job_id is not None else os.environ.get(JOB_ID_VARIABLE) or None
    if folder is None or job_id is None:
        if folder is not None or job_id is not None:
            log.warning("the job reports nowhere: %s", f"no {JOB_ID_VARIABLE}"
                        if job_id is None else f"no {FOLDER_VARIABLE}")
        return None
    if not job_id or "/" in job_id or job_id.startswith("."):
        raise ValueError(f"bad job id (got {job_id!r}; expected a Slurm job id, 12)")
    return checkpoint_path(folder, job_id)


def _number(variable: str, default: float) -> float:
    """The environment's ``variable`` as a finite number, ``default`` if unset or bad."""
    text = os.environ.get(variable, "")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        if text:
            log.warning("ignored %s=%r (not a number)", variable, text)
        return default
    return value


def start(steps: float | None = None, *, every_s: float = REPORT_EVERY_S,
          folder: Path | str | None = None, job_id: str | None = None) -> Run:
    """Start this run of the job (module docstring): catch SIGTERM and SIGINT
    (:attr:`Run.must_stop`), read the report (:attr:`Run.resumed_steps`), and write this
    run's first record, from ``steps`` (the steps the script's own checkpoint restored;
    default: the report's). ``folder`` and ``job_id`` default to ``$HETSCHED_CHECKPOINTS``
    and ``$SLURM_JOB_ID``; with neither it reports nowhere. Call it from the main
    thread, early. A ValueError names a bad argument or an unreadable report."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("hetsched.job.start() must be called from the main thread "
                           "(Python runs signal handlers there)")
    path = report_path(folder, job_id)
    found = read_checkpoint(path) if path is not None else None
    checkpoint = found or Checkpoint(path.stem if path is not None else "")
    # What the submitter told the job of itself fills what its report does not know.
    checkpoint = replace(checkpoint, job=checkpoint.job or os.environ.get(JOB_VARIABLE, ""),
                         work=checkpoint.work or _number(WORK_VARIABLE, 0.0))
    now = time.time()
    first = checkpoint.steps if steps is None else _at_least_0(steps)
    record = RunRecord(_number(LAUNCHED_VARIABLE, now), now, now, (), (), "", (), 0, "",
                       0.0, first, first, "running",
                       int(_number("SLURM_RESTART_COUNT", 0.0)))
    run = Run(path, checkpoint, record, every_s=every_s)
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, run._on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    run.report(first)
    return run
