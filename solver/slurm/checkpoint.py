"""The training emulator's checkpoint (:mod:`hetsched.slurm.emulator`): a job's step count
and every run it had, in one JSON file per Slurm job, ``CHECKPOINTS/JOBID.json``, written
atomically (a temporary file renamed over it), so a reader never sees half a file.

What really ran is in ``runs``: each run's wall times (Unix s), the GPUs Slurm gave it,
the steps at its start and end and how it ended (docs/slurm.md, "The training
emulator")::

    {"v": 1, "slurm_job_id": "12", "job": "j7", "work": 5000.0,
     "comment": "hetsched {\"v\":1,\"job\":{\"id\":\"j7\",...},...}", "steps": 1234.5,
     "state": "running", "updated": 1795742900.1,
     "runs": [{"start": 1795742878.6, "resume": 1795742878.6, "end": 1795742900.1,
               "nodes": ["k80-0"], "gpus": ["k80-0/0", "k80-0/1"], "gpu_type": "k80",
               "gpu_types": ["k80"], "num_gpus": 2, "placement": "packed",
               "throughput": 57.4, "steps_start": 0.0, "steps_end": 1234.5,
               "state": "running", "restart_count": 0}]}
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError

#: The checkpoint format's version.
VERSION = 1
#: How a run or a job stands: ``running`` (the last write of a live run; a run killed
#: without warning stays so), ``stopped`` (SIGTERM: requeued or cancelled), ``completed``
#: (its steps reached the work), ``failed`` (it could not run on the GPUs it was given).
STATES = ("running", "stopped", "completed", "failed")


@dataclass(frozen=True)
class EmulatedRun:
    """One run of a job: launched at ``start`` (Unix s; its batch script's start),
    making progress from ``resume`` (``start`` plus the restart penalty over the speedup
    after an earlier run), last written at ``end``; on ``gpus`` (``NODE/INDEX``, Slurm's
    GPU index) of ``nodes``, at ``throughput`` steps per trace second (the pace of the
    slowest of ``gpu_types``, ``gpu_type``), from ``steps_start`` to ``steps_end``."""

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
    """A job's checkpoint: its ``steps`` done of ``work``, its metadata (``comment``, as
    in Slurm: :meth:`hetsched.slurm.metadata.JobMeta.from_comment` reads it), how it
    stands (``state``, the last run's), when last written (``updated``, Unix s), and its
    ``runs``, oldest first."""

    slurm_job_id: str
    job: str
    work: float
    comment: str = ""
    steps: float = 0.0
    state: str = "running"
    updated: float = 0.0
    runs: tuple[EmulatedRun, ...] = field(default_factory=tuple)

    @property
    def done(self) -> bool:
        """Whether the job's steps reached its work."""
        return self.steps >= self.work

    def with_run(self, run: EmulatedRun, updated: float) -> Checkpoint:
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


def checkpoint_path(folder: Path, slurm_job_id: str) -> Path:
    """The checkpoint file of Slurm job ``slurm_job_id`` in ``folder``."""
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
    """The checkpoint in ``path``, None if there is none; an InputError naming the file
    if it cannot be read."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable checkpoint ({exc})", file=str(path)) from None
    try:
        if document.pop("v") != VERSION:
            raise ValueError("unknown version")
        runs = tuple(EmulatedRun(**{**run, "nodes": tuple(run["nodes"]), "gpus": tuple(run["gpus"]),
                            "gpu_types": tuple(run["gpu_types"])})
                     for run in document.pop("runs"))
        return Checkpoint(**document, runs=runs)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a checkpoint of the training emulator ({exc})",
                         file=str(path)) from None
