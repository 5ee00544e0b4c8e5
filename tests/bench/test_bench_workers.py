"""A bench killed with SIGKILL takes its worker processes (and the fork server) with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetsched.files.generate import GeneratorSettings, generate
from hetsched.files.traces import write_native
from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads the process tree from /proc (Linux)")

#: Generous limits (s) for things that take well under a second: never speed assertions.
START_LIMIT_S = 300.0
EXIT_LIMIT_S = 120.0


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


@pytest.mark.slow
def test_a_killed_bench_takes_its_workers_with_it(tmp_path: Path) -> None:
    # Before, after SIGKILL the fork server and the workers lived on for ever (each
    # worker held its own task queue's write end and the fork server's "alive" pipe),
    # holding the caller's stdout and stderr: reading them never ended.
    instance = generate(GeneratorSettings(jobs=80, gpus={"v100": 4, "k80": 4}, seed=0))
    trace = tmp_path / "trace.csv"
    write_native(instance.jobs, trace)
    command = [sys.executable, "-m", "hetsched", "bench", "--trace", str(trace), "--format",
               "native", "--cluster", "v100=4,k80=4", "--policies", "deadline,allox",
               "--seeds", "0,1", "--workers", "2", "--out", str(tmp_path / "b")]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    children: set[int] = set()
    try:
        # The pool is up: the resource tracker, the fork server and two workers.
        waited = time.monotonic()
        while len(children := _descendants(process.pid)) < 4:
            assert process.poll() is None, process.communicate()[1].decode()[-2000:]
            assert time.monotonic() - waited < START_LIMIT_S, children
            time.sleep(0.1)
        time.sleep(1.0)  # let the workers start their replays (minutes of work each)
        children = _descendants(process.pid)
        assert process.poll() is None, "the bench ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        # Every process holding the bench's stdout and stderr is gone: both reach EOF.
        _, stderr = process.communicate(timeout=EXIT_LIMIT_S)
        assert process.returncode == -signal.SIGKILL
        waited = time.monotonic()
        while any(_alive(pid) for pid in children) and \
                time.monotonic() - waited < EXIT_LIMIT_S:
            time.sleep(0.1)
        assert [pid for pid in children if _alive(pid)] == []
        assert b"Traceback" not in stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in children:  # only processes this test started, by their id
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
