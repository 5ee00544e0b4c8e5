"""One agent per cluster (hetsched.slurm.agent_lock): a second ``hetsched slurm run`` on
the partition an agent runs on refuses to start, naming the first (exit 2, no
traceback), against the real local cluster; the lock goes with the agent's process."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.slurm.agent_lock import agent_lock, lock_path
from hetsched.slurm.local import LocalCluster
from tests.slurm.commands import agent_command


def agent(cluster: LocalCluster, out: Path) -> subprocess.Popen[str]:
    """``hetsched slurm run`` (fifo) on ``cluster``'s partition, writing ``out``."""
    command, env = agent_command(cluster, out)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env=env)


def test_a_second_agent_on_the_partition_refuses_to_start(cluster: LocalCluster,
                                                          tmp_path: Path) -> None:
    lock = lock_path(str(cluster.conf_path), cluster.partition)
    first = agent(cluster, tmp_path / "first")
    second: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 60
        while not (lock.is_file() and f"pid {first.pid}," in lock.read_text()):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first agent never took the lock"
            time.sleep(0.1)
        second = agent(cluster, tmp_path / "second")
        _, stderr = second.communicate(timeout=60)
        assert second.returncode == 2, stderr
        assert "Traceback" not in stderr
        assert f"another agent schedules partition {cluster.partition}" in stderr
        assert f"pid {first.pid}" in stderr
        assert not (tmp_path / "second").exists()  # it wrote nothing
        assert first.poll() is None  # the first runs on
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    assert first.returncode == 130
    with agent_lock(str(cluster.conf_path), cluster.partition):  # gone with its process
        pass


def test_the_lock_is_per_partition_and_cluster(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    with agent_lock(str(conf), "gpu", tmp_path), agent_lock(str(conf), "cpu", tmp_path):
        with pytest.raises(InputError, match="another agent schedules partition gpu"), \
                agent_lock(str(conf), "gpu", tmp_path):
            pass
        other = tmp_path / "other.conf"
        other.write_text("ClusterName=y\n")
        with agent_lock(str(other), "gpu", tmp_path):
            pass
    with agent_lock(str(conf), "gpu", tmp_path):  # released at the block's end
        pass
