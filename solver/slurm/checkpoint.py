"""A job's checkpoint file as hetsched's Slurm side reads it: ``CHECKPOINTS/JOBID.json``,
the steps a job did and every run it had, written by the job itself through
:mod:`hetsched.job` (a real training script, or the training emulator,
:mod:`hetsched.slurm.emulator`). The format, its records and its writer are that
module's (its docstring shows a file); here the reader raises hetsched's
:class:`~hetsched.core.errors.InputError` naming the file, so that a command ends on it
with one line and exit 2 (docs/slurm.md, "The training emulator", "Real jobs").
"""

from __future__ import annotations

from pathlib import Path

from hetsched import job
from hetsched.core.errors import InputError
from hetsched.job import STATES, VERSION, Checkpoint, RunRecord, checkpoint_path, write_checkpoint

#: The name a run of the emulator's checkpoint had before real jobs reported their own.
EmulatedRun = RunRecord

__all__ = ["STATES", "VERSION", "Checkpoint", "EmulatedRun", "RunRecord", "checkpoint_path",
           "read_checkpoint", "write_checkpoint"]


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint in ``path`` (either version: :data:`hetsched.job.READ_VERSIONS`),
    None if there is none; an InputError naming the file if it cannot be read."""
    try:
        return job.read_checkpoint(path)
    except ValueError as error:
        problem = str(error).removeprefix(f"{path}: ")
        raise InputError(problem, file=str(path)) from None
