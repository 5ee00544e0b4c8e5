"""One agent per cluster: ``hetsched slurm run`` holds a lock on its cluster's partition
(:func:`agent_lock`) while it runs, so a second agent on the same partition of the same
Slurm cluster refuses to start, naming the first, instead of both releasing and
requeueing the same held jobs.

The lock is an exclusive ``flock`` on a file named after the cluster's ``slurm.conf``
(its resolved path) and the partition, in the machine's lock folder: it guards the agents
of one machine, where an operator runs the agent (a second machine would need a lock in
Slurm itself); the kernel drops it when the agent's process ends, however it ends, so a
killed agent leaves nothing to clean up."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hetsched.core.errors import InputError

__all__ = ["agent_lock", "lock_path"]


def lock_path(slurm_conf: str, partition: str, folder: Path | None = None) -> Path:
    """The lock file of ``partition`` of the cluster of ``slurm_conf``."""
    key = f"{os.path.realpath(slurm_conf)}\0{partition}".encode()
    name = f"hetsched-agent-{hashlib.sha256(key).hexdigest()[:16]}.lock"
    return (folder or Path(tempfile.gettempdir())) / name


@contextmanager
def agent_lock(slurm_conf: str, partition: str, folder: Path | None = None) -> Iterator[Path]:
    """Hold the lock of ``partition`` of the cluster of ``slurm_conf`` for the block; an
    :class:`InputError` naming the agent that holds it when another does."""
    path = lock_path(slurm_conf, partition, folder)
    handle = path.open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise InputError(
                f"another agent schedules partition {partition} of this cluster "
                f"({holder}); stop it first, or use another partition",
                path="--partition", value=partition,
                expected=f"a partition no agent runs on (lock {path})") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, slurm.conf {os.path.realpath(slurm_conf)}\n")
        handle.flush()
        yield path
    finally:
        handle.close()  # (closing the file drops the lock)
