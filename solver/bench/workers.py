"""Worker processes that die with the bench that started them.

A bench runs its replays in a process pool whose workers multiprocessing's fork server
forks. Killed with SIGKILL, the bench tells nobody: each worker holds the write end of
its own task queue and of the fork server's "alive" pipe, so neither the workers nor the
fork server ever see the end of their input, and all of them live on holding the
caller's stdout and stderr (a CI step that reads them waits for ever).
:func:`guard_worker`, the pool's initializer, makes each worker

* drop its copy of the fork server's "alive" pipe, so that the fork server sees the
  bench go and exits (multiprocessing passes it so that the fork server outlives its
  client while the client's children run: not wanted here);
* get SIGKILL when its parent process dies (Linux ``prctl(PR_SET_PDEATHSIG)``): the fork
  server, or the bench itself with the ``spawn`` or ``fork`` start methods;
* watch the bench process (a pidfd on Linux, else a look every second) and exit as soon
  as it is gone, whatever else holds the worker;
* write its standard output to /dev/null (it never prints; warnings still go to stderr).

CBC, run by a worker as a child process, gets SIGKILL when that worker dies
(:mod:`hetsched.formulations.mip.cbc`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
#: Exit status of a worker that ends because its bench is gone.
EXIT_ORPHANED = 70
#: Seconds between two looks at the bench without a pidfd.
POLL_S = 1.0


def guard_worker(bench_pid: int) -> None:
    """The pool initializer: tie this worker's life to the process ``bench_pid``."""
    if sys.platform == "win32":  # Windows ends a job's processes itself; nothing here
        return
    _drop_fork_server_pipe()
    _die_with_parent()
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    threading.Thread(target=_watch, args=(bench_pid,), name="bench-watch",
                     daemon=True).start()


def _drop_fork_server_pipe() -> None:
    """Close this worker's copy of the fork server's "alive" pipe (forkserver only)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int) and fd > 2:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]


def _die_with_parent() -> None:
    """SIGKILL when the parent process dies (Linux); exit now if it already has."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(EXIT_ORPHANED)


def _watch(bench_pid: int) -> None:
    """Wait for the bench process to end, then end this worker at once."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            fd = pidfd_open(bench_pid)
        except ProcessLookupError:
            os._exit(EXIT_ORPHANED)  # gone already
        except OSError:
            fd = None  # an old kernel: poll instead
        if fd is not None:
            select.select([fd], [], [])  # readable when the process has ended
            os._exit(EXIT_ORPHANED)
    while True:
        time.sleep(POLL_S)
        try:
            os.kill(bench_pid, 0)
        except ProcessLookupError:
            os._exit(EXIT_ORPHANED)
        except PermissionError:
            pass  # alive, or its number reused by another user's process
