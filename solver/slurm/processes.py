"""The daemons of a local Slurm cluster as processes: pid files, ``/proc``, signals, ports.

Linux only (``/proc``), as Slurm itself. A process counts as one of a cluster's daemons
only if its name is a Slurm or MUNGE daemon's and its command line names a file of that
cluster (its slurm.conf, its MUNGE socket): a pid file left by a previous run whose pid
now belongs to another program is never signalled.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

#: Process names (``/proc/PID/comm``) of the daemons a local cluster runs: slurmctld forks
#: ``slurmscriptd``, slurmd forks one ``slurmstepd`` per job step.
DAEMON_NAMES = frozenset({"munged", "slurmctld", "slurmscriptd", "slurmd", "slurmstepd"})

#: How often (s) a wait polls.
POLL_S = 0.05
#: The programs a local cluster needs, and how to get them.
PROGRAMS = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "sbatch", "scontrol", "scancel")
INSTALL_HINT = "apt-get install slurm-wlm munge"


def program(name: str) -> str | None:
    """The path of a Slurm or MUNGE program: on PATH, else in /usr/sbin (daemons live
    there, off a non-root user's PATH); None if absent."""
    found = shutil.which(name)
    if found is None and os.access(f"/usr/sbin/{name}", os.X_OK):
        found = f"/usr/sbin/{name}"
    return found


def missing_programs() -> list[str]:
    """The programs of :data:`PROGRAMS` not installed (install: :data:`INSTALL_HINT`)."""
    return [name for name in PROGRAMS if program(name) is None]


def is_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (an exited process not yet reaped, a zombie, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] not in ("Z", "X")


def arguments(pid: int) -> list[str]:
    """The command line of process ``pid`` (empty if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _environment_names(pid: int, variable: str, value: str) -> bool:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{variable}={value}".encode() in raw.split(b"\0")


def read_pid(path: Path) -> int | None:
    """The pid written in the pid file ``path``, or None (no file, not a number)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def owned(pid: int | None, marker: str) -> bool:
    """Whether ``pid`` is a live daemon (:data:`DAEMON_NAMES`) with ``marker`` (a path
    of its cluster, or ``--option=path``) as one of its arguments."""
    return (pid is not None and is_alive(pid) and _name(pid) in DAEMON_NAMES
            and marker in arguments(pid))


def daemon_pids(markers: Sequence[str], slurm_conf: str) -> list[int]:
    """Every live daemon of a cluster: named like a Slurm or MUNGE daemon, with one of
    ``markers`` as an argument (slurmctld, slurmd and munged are started with
    their files named there), or a slurmstepd whose ``SLURM_CONF`` is ``slurm_conf``
    (it inherits slurmd's environment)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        name = _name(pid)
        if name not in DAEMON_NAMES or not is_alive(pid):
            continue
        if set(markers) & set(arguments(pid)) or (
                name == "slurmstepd" and _environment_names(pid, "SLURM_CONF", slurm_conf)):
            found.append(pid)
    return sorted(found)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 else None


def node_job_pids(slurm_conf: str, node: str) -> list[int]:
    """The processes a node of a local cluster runs for its jobs: every process whose
    environment names ``node`` (``SLURMD_NODENAME``, which Slurm sets for a job) and
    ``slurm_conf``, and the slurmstepd above each."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if not (_environment_names(pid, "SLURMD_NODENAME", node)
                and _environment_names(pid, "SLURM_CONF", slurm_conf) and is_alive(pid)):
            continue
        found.add(pid)
        parent = _parent(pid)
        while parent is not None and parent > 1 and _name(parent) == "slurmstepd":
            found.add(parent)
            parent = _parent(parent)
    return sorted(found)


def _signal(pid: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def wait_gone(pids: Iterable[int], timeout_s: float) -> list[int]:
    """Wait up to ``timeout_s`` seconds for ``pids`` to exit; those still alive."""
    deadline = time.monotonic() + timeout_s
    alive = [pid for pid in pids if is_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive = [pid for pid in alive if is_alive(pid)]
    return alive


def terminate(pids: Iterable[int], timeout_s: float) -> list[int]:
    """SIGTERM to ``pids``, SIGKILL to those still alive after ``timeout_s`` seconds;
    the pids still alive 2 s after that (none, unless the kernel holds one)."""
    alive = [pid for pid in pids if is_alive(pid)]
    for pid in alive:
        _signal(pid, signal.SIGTERM)
    alive = wait_gone(alive, timeout_s)
    for pid in alive:
        _signal(pid, signal.SIGKILL)
    return wait_gone(alive, 2.0)


def busy_ports(ports: Iterable[int]) -> list[int]:
    """The TCP ports among ``ports`` that a program listens on (cannot be bound here)."""
    busy = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("", port))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                busy.append(port)
    return busy


def log_tail(path: Path, lines: int = 10) -> str:
    """The last ``lines`` lines of the log file ``path``, headed by its name ("" if it
    does not exist or is empty)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    tail = text.rstrip().splitlines()[-lines:]
    return f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail) if tail else ""
