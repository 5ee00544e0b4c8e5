"""A local Slurm cluster: munged, slurmctld and one slurmd per node, all on this machine.

For tests and for trying hetsched on Slurm (docs/slurm.md, "A local cluster"). Each node
is a ``slurmd -N NAME`` on its own port with typed GPUs (``Gres=gpu:TYPE:N``) over
placeholder device files; ``SlurmdParameters=config_overrides`` lets a node declare more
CPUs and memory than the machine has. Everything runs as root, from one folder:

* ``slurm.conf``, ``gres.conf``, ``local-cluster.json`` (this object, for ``load``);
* ``munge/`` (key, socket, pid), ``ctld/`` (slurmctld's state), ``spool/NODE/``,
  ``run/`` (pid files), ``dev/NODE/gpuI`` (the GPUs), ``log/`` (every daemon's log and
  ``jobcomp.txt``, one line per finished job).

Node names are the GPU type and a 0-based index, ``v100-0``, ``v100-1``, ``k80-0``: the
names :func:`hetsched.files.cluster_spec.parse_cluster` gives the same spec, so Slurm's
node ``v100-1`` and GPU index 2 (``squeue --json``'s ``gres_detail``) are hetsched's GPU
``v100-1/2``. Slurm commands find the cluster through ``SLURM_CONF`` (:meth:`env`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hetsched.core.cluster import Cluster
from hetsched.core.errors import InputError
from hetsched.slurm import config
from hetsched.slurm.config import SlurmNode, check_name
from hetsched.slurm.processes import (
    INSTALL_HINT,
    busy_ports,
    daemon_pids,
    log_tail,
    missing_programs,
    node_job_pids,
    owned,
    program,
    read_pid,
    terminate,
    wait_gone,
)

log = logging.getLogger(__name__)

#: Where a local cluster lives unless told (``--dir``).
DEFAULT_STATE_DIR = Path("/tmp/hetsched-slurm")
#: slurmctld's port; node ``i`` (0-based, in order) listens on ``port + 1 + i``. Not
#: Slurm's 6817/6818, so that a real Slurm on the machine keeps its ports.
DEFAULT_PORT = 16817
#: CPUs and memory (MB) a node declares per GPU when its spec gives none.
CPUS_PER_GPU = 8
MEMORY_MB_PER_GPU = 32 * 1024
#: One slurmd per node on one machine: more than this is not a local cluster.
MAX_NODES = 64
#: The deadline (s) of :meth:`LocalCluster.start`.
START_TIMEOUT_S = 15.0
#: Node states (sinfo --json) in which a node is up and schedulable.
_UP_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
_DOWN_FLAGS = frozenset({"NOT_RESPONDING", "DRAIN", "DRAINED", "DRAINING", "FAIL"})
_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the final NUL
#: Seconds a daemon may take after its launch to write its pid file.
_DAEMON_GRACE_S = 5.0


class LocalClusterError(RuntimeError):
    """A local cluster failed to start or stop; ``log_tail``: the daemons' last log lines."""

    def __init__(self, problem: str, log_tail: str = "") -> None:
        self.problem = problem
        self.log_tail = log_tail
        super().__init__(problem + (f"\n{log_tail}" if log_tail else ""))


@dataclass(frozen=True)
class LocalCluster:
    """A Slurm cluster of ``nodes`` run on this machine from ``state_dir`` (see the
    module's docstring); slurmctld listens on ``port``, node ``i`` on ``port + 1 + i``."""

    nodes: tuple[SlurmNode, ...]
    state_dir: Path = DEFAULT_STATE_DIR
    port: int = DEFAULT_PORT
    name: str = "hetsched"
    #: Seconds a finished job stays in squeue's answer (Slurm's MinJobAge).
    min_job_age_s: int = 300
    #: Seconds between SIGTERM and SIGKILL when a job is cancelled or requeued (KillWait).
    kill_wait_s: int = 5
    partition: str = "gpu"
    #: The longest (s) each node's epilog waits for the agent (0: no epilog); see
    #: :data:`config.EPILOG_S`.
    epilog_s: float = config.EPILOG_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_dir", Path(self.state_dir).absolute())
        if not 1 <= len(self.nodes) <= MAX_NODES:
            raise InputError("bad number of nodes", path="cluster_spec", value=len(self.nodes),
                             expected=f"1 to {MAX_NODES} nodes (one slurmd each)")
        names = [node.name for node in self.nodes]
        if len(set(names)) < len(names):
            raise InputError("node name given twice", path="cluster_spec", value=names,
                             expected="distinct names")
        for node in self.nodes:
            check_name(node.gpu_type, "GPU type")
            check_name(node.name, "node name")
        if not 1024 <= self.port <= 65535 - len(self.nodes) - 1:
            raise InputError("bad port", path="--port", value=self.port,
                             expected=f"1024 to {65535 - len(self.nodes) - 1} (the nodes "
                             "take the ports after it)")
        if not (math.isfinite(self.epilog_s) and 0 <= self.epilog_s <= 60):
            raise InputError("bad epilog length", path="--epilog", value=self.epilog_s,
                             expected="seconds from 0 to 60")
        if re.search(r"[\s#=,\"']", str(self.state_dir)):
            raise InputError("a folder slurm.conf cannot name", path="--dir",
                             value=str(self.state_dir),
                             expected="a path without spaces, '#', '=', ',' or quotes")
        if len(str(self.munge_socket)) > _SOCKET_PATH_MAX:
            raise InputError("folder path too long for MUNGE's socket", path="--dir",
                             value=str(self.state_dir),
                             expected=f"a path of at most {_SOCKET_PATH_MAX - 20} characters")

    @classmethod
    def from_gpus(cls, gpus: Mapping[str, int], *, gpus_per_node: int = 4,
                  **settings: Any) -> LocalCluster:
        """``gpus[type]`` GPUs of each type in nodes of ``gpus_per_node`` (the last node
        of a type holds the remainder), named ``TYPE-0``, ``TYPE-1``, ...; ``settings``
        are the other fields (``state_dir``, ``port``)."""
        if gpus_per_node < 1:
            raise InputError("bad GPUs per node", path="--gpus-per-node",
                             value=gpus_per_node, expected="an integer >= 1")
        nodes = []
        for gpu_type, total in gpus.items():
            if total < 1:
                raise InputError("GPU counts must be >= 1", path="cluster_spec",
                                 value=f"{gpu_type}={total}")
            for index, first in enumerate(range(0, total, gpus_per_node)):
                count = min(gpus_per_node, total - first)
                nodes.append(SlurmNode(f"{gpu_type}-{index}", gpu_type, count,
                                       CPUS_PER_GPU * count, MEMORY_MB_PER_GPU * count))
        return cls(tuple(nodes), **settings)

    @classmethod
    def from_cluster(cls, cluster: Cluster, *, gpus_per_node: int | None = None,
                     **settings: Any) -> LocalCluster:
        """The nodes of a hetsched cluster (``--cluster``), with their names, CPUs and
        memory; with ``gpus_per_node``, each type's GPUs regrouped as by
        :meth:`from_gpus`."""
        if gpus_per_node is not None:
            totals: dict[str, int] = {}
            for node in cluster.nodes:
                totals[node.gpu_type] = totals.get(node.gpu_type, 0) + node.num_gpus
            return cls.from_gpus(totals, gpus_per_node=gpus_per_node, **settings)
        nodes = tuple(SlurmNode(
            node.name, node.gpu_type, node.num_gpus,
            node.cpus or CPUS_PER_GPU * node.num_gpus,
            int(node.memory_gb * 1024) if node.memory_gb else MEMORY_MB_PER_GPU * node.num_gpus)
            for node in cluster.nodes)
        return cls(nodes, **settings)

    @classmethod
    def load(cls, state_dir: Path = DEFAULT_STATE_DIR) -> LocalCluster:
        """The cluster :meth:`start` last wrote into ``state_dir``."""
        path = Path(state_dir) / "local-cluster.json"
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            nodes = tuple(SlurmNode(**node) for node in document.pop("nodes"))
            return cls(nodes, **{**document, "state_dir": Path(document["state_dir"])})
        except FileNotFoundError:
            raise InputError("no local cluster there", path="--dir", value=str(state_dir),
                             expected="a folder 'hetsched slurm cluster start' wrote") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"unreadable local cluster file ({exc})", path="--dir",
                             value=str(path)) from None

    # Where things are.
    @property
    def conf_path(self) -> Path:
        """slurm.conf: what ``SLURM_CONF`` names (gres.conf sits beside it)."""
        return self.state_dir / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        """The socket of this cluster's own munged (slurm.conf's ``AuthInfo=socket=``)."""
        return self.state_dir / "munge" / "munge.socket"

    @property
    def log_dir(self) -> Path:
        """The daemons' logs: slurmctld.log, slurmd-NODE.log, munged.log, jobcomp.txt."""
        return self.state_dir / "log"

    @property
    def handover_dir(self) -> Path:
        """Where the agent tells the nodes' epilogs it has decided on a job's GPUs."""
        return config.handover_dir(self)

    def node_port(self, index: int) -> int:
        """The port of the slurmd of node ``index`` (0-based)."""
        return self.port + 1 + index

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for Slurm commands (``subprocess.run(..., env=...)``) that
        talk to this cluster: ``base`` (default ``os.environ``) with ``SLURM_CONF``."""
        environment = dict(os.environ if base is None else base)
        environment["SLURM_CONF"] = str(self.conf_path)
        return environment

    # The configuration files (hetsched.slurm.config).
    def slurm_conf(self) -> str:
        """The text of slurm.conf (:mod:`hetsched.slurm.config` explains each setting)."""
        return config.slurm_conf(self)

    def gres_conf(self) -> str:
        """The text of gres.conf: each node's GPUs as files ``dev/NODE/gpuI``."""
        return config.gres_conf(self)

    # Daemons.
    def _markers(self) -> list[str]:
        """The arguments that mark this cluster's daemons (:meth:`_launch`)."""
        return [str(self.conf_path), f"--socket={self.munge_socket}"]

    def _pid_files(self) -> dict[str, tuple[Path, str]]:
        """Each daemon's pid file, and the argument that marks it as this cluster's."""
        run = self.state_dir / "run"
        conf, socket = self._markers()
        pid_files = {"munged": (self.state_dir / "munge" / "munged.pid", socket),
                     "slurmctld": (run / "slurmctld.pid", conf)}
        return pid_files | {f"slurmd {node.name}": (run / f"slurmd-{node.name}.pid", conf)
                            for node in self.nodes}

    def daemon_pids(self) -> dict[str, int | None]:
        """The pid of each daemon (``munged``, ``slurmctld``, ``slurmd NODE``) that
        runs now, None for one that does not."""
        return {name: pid if owned(pid := read_pid(path), marker) else None
                for name, (path, marker) in self._pid_files().items()}

    def is_running(self) -> bool:
        """Whether every daemon of this cluster runs."""
        return all(pid is not None for pid in self.daemon_pids().values())

    def node_states(self) -> dict[str, str]:
        """Each node's state as sinfo reports it (``idle``, ``mixed``, ...; flags such
        as ``NOT_RESPONDING`` joined with '+'); empty if slurmctld does not answer."""
        try:
            done = subprocess.run([program("sinfo") or "sinfo", "--json"], env=self.env(),
                                  capture_output=True, text=True, timeout=5, check=True)
            nodes = json.loads(done.stdout).get("nodes", [])
        except (OSError, subprocess.SubprocessError, ValueError):
            return {}
        states = {}
        for node in nodes:
            flags = [str(flag) for flag in node.get("state_flags") or []]
            states[str(node["name"])] = "+".join([str(node.get("state")), *flags])
        return states

    def _ready(self, states: Mapping[str, str]) -> list[str]:
        """The nodes not yet up, with their states."""
        waiting = []
        for node in self.nodes:
            state, *flags = states.get(node.name, "absent").split("+")
            if state not in _UP_STATES or _DOWN_FLAGS & set(flags):
                waiting.append(f"{node.name} ({states.get(node.name, 'absent')})")
        return waiting

    def start(self, timeout_s: float = START_TIMEOUT_S) -> bool:
        """Start munged, slurmctld and every slurmd, and wait until every node is up;
        False (and nothing done) if this cluster already runs from ``state_dir`` with
        the same configuration. Daemons of an earlier run from the same folder are
        stopped first; a changed configuration starts slurmctld with no saved state.

        Raises LocalClusterError (with the daemons' last log lines) if a program is
        missing, a port is taken or a node is not up within ``timeout_s`` seconds."""
        missing = missing_programs()
        if missing:
            raise LocalClusterError(f"not installed: {', '.join(missing)} "
                                    f"(install them: {INSTALL_HINT})")
        deadline = time.monotonic() + timeout_s
        same = self._written("slurm.conf", self.slurm_conf()) and \
            self._written("gres.conf", self.gres_conf()) and \
            (self.epilog_s == 0 or self._written("epilog", config.epilog_script(self)))
        if same and self.is_running() and not self._ready(self.node_states()):
            log.info("the local Slurm cluster in %s already runs", self.state_dir)
            return False
        self._stop_daemons(timeout_s=5.0)
        busy = busy_ports([self.port, *(self.node_port(i) for i in range(len(self.nodes)))])
        if busy:
            raise LocalClusterError(f"ports taken by another program: {busy} (choose "
                                    "another port for slurmctld; the nodes take the next)")
        config.write_files(self, {**asdict(self), "state_dir": str(self.state_dir)})
        for path, _ in self._pid_files().values():  # a pid file now is a new daemon's
            path.unlink(missing_ok=True)
        try:
            self._launch(clear_state=not same)
            self._wait_up(deadline)
        except BaseException:
            self._stop_daemons(timeout_s=2.0)
            raise
        log.info("started a local Slurm cluster of %d nodes in %s", len(self.nodes),
                 self.state_dir)
        return True

    def _written(self, name: str, text: str) -> bool:
        try:
            return (self.state_dir / name).read_text(encoding="utf-8") == text
        except OSError:
            return False

    def _launch(self, *, clear_state: bool) -> None:
        munge = self.state_dir / "munge"
        self._run_daemon("munged", [
            # --force: munged refuses a socket whose folder or any folder above it is
            # closed to other users (pytest's /tmp/pytest-of-root is 0700); every client
            # here is root.
            "--force", f"--socket={self.munge_socket}", f"--key-file={munge / 'munge.key'}",
            f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}",
            f"--log-file={self.log_dir / 'munged.log'}"])
        self._run_daemon("slurmctld", ["-f", str(self.conf_path), *(["-c"] * clear_state)])
        for node in self.nodes:
            self._run_daemon("slurmd", ["-f", str(self.conf_path), "-N", node.name],
                             label=f"slurmd-{node.name}")

    def _run_daemon(self, name: str, arguments: list[str], *, label: str = "") -> None:
        """Run a daemon that forks into the background; raise if it fails at once."""
        label = label or name
        stderr_path = self.log_dir / f"{label}.stderr"
        with stderr_path.open("w", encoding="utf-8") as stderr:
            done = subprocess.run([program(name) or name, *arguments], env=self.env(),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=stderr, timeout=30, check=False)
        if done.returncode == 0 and not stderr_path.stat().st_size:
            stderr_path.unlink()
        if done.returncode != 0:
            raise LocalClusterError(
                f"{label} failed to start (exit code {done.returncode})",
                "\n".join(filter(None, (log_tail(stderr_path), log_tail(
                    self.log_dir / f"{label}.log")))))

    def _wait_up(self, deadline: float) -> None:
        """Wait until every daemon runs and every node is up; raise past ``deadline``,
        once a daemon has exited, or once one has written no pid file for
        :data:`_DAEMON_GRACE_S` seconds."""
        launched = time.monotonic()
        gone_since: float | None = None
        while True:
            dead = [name for name, pid in self.daemon_pids().items() if pid is None]
            waiting = self._ready(self.node_states()) if not dead else []
            if not dead and not waiting:
                return
            now = time.monotonic()
            files = self._pid_files()  # a pid file, and no such process: it exited
            exited = any(files[name][0].exists() and not owned(read_pid(files[name][0]),
                                                               files[name][1]) for name in dead)
            # A pid file read while its daemon writes it (or forks away from the pid in
            # it) reads as an exit for a moment: an exit counts once it lasts a second.
            gone_since = (gone_since if gone_since is not None else now) if exited else None
            exited = gone_since is not None and now - gone_since >= 1.0
            if now > deadline or exited or (dead and now > launched + _DAEMON_GRACE_S):
                problem = (f"not running: {', '.join(dead)}" if dead else
                           f"nodes not up: {', '.join(waiting)}")
                stuck = [node.name for node in self.nodes if f"slurmd {node.name}" in dead
                         or any(entry.startswith(f"{node.name} ") for entry in waiting)]
                logs = ["slurmctld", "munged", *(f"slurmd-{name}" for name in stuck[:4])]
                raise LocalClusterError(
                    f"the local Slurm cluster in {self.state_dir} did not come up: {problem}",
                    "\n".join(filter(None, (log_tail(self.log_dir / f"{name}.log", 8)
                                            for name in logs))))
            time.sleep(0.1)

    # Faults, as an operator meets them (docs/slurm.md, "When a node fails").
    def _node(self, name: str) -> SlurmNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise InputError("no such node", path="node", value=name,
                         expected=f"one of {[node.name for node in self.nodes]}")

    def kill_node(self, name: str) -> list[int]:
        """Node ``name`` loses its power: SIGKILL to its slurmd and to everything it runs
        for jobs (their slurmstepd and programs); the pids killed. slurmctld finds it not
        responding within ``SlurmdTimeout`` and its jobs failed (requeued: they asked for
        it). :meth:`start_node` brings it back."""
        self._node(name)
        daemon = self.daemon_pids()[f"slurmd {name}"]
        pids = [*([daemon] if daemon is not None else []),
                *node_job_pids(str(self.conf_path), name)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_gone(pids, 5.0)
        log.info("node %s killed (pids %s)", name, pids)
        return pids

    def stop_node(self, name: str, timeout_s: float = 10.0) -> None:
        """Stop node ``name``'s slurmd alone (SIGTERM), as ``systemctl stop slurmd``: its
        jobs run on, and report to slurmctld when it is back (:meth:`start_node`)."""
        self._node(name)
        pid = self.daemon_pids()[f"slurmd {name}"]
        if pid is not None and terminate([pid], timeout_s):
            raise LocalClusterError(f"slurmd of {name} did not exit")

    def start_node(self, name: str) -> None:
        """Start node ``name``'s slurmd (after :meth:`kill_node` or :meth:`stop_node`)."""
        self._node(name)
        if self.daemon_pids()[f"slurmd {name}"] is None:
            self._run_daemon("slurmd", ["-f", str(self.conf_path), "-N", name],
                             label=f"slurmd-{name}")

    def restart_controller(self, timeout_s: float = 10.0) -> None:
        """Stop slurmctld (SIGTERM: it saves its state) and start it again from that
        state, as ``systemctl restart slurmctld``; the jobs run on meanwhile."""
        pid = self.daemon_pids()["slurmctld"]
        if pid is not None and terminate([pid], timeout_s):
            raise LocalClusterError("slurmctld did not exit")
        self._run_daemon("slurmctld", ["-f", str(self.conf_path)])

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel every job still queued or running (so no job step outlives the cluster),
        then stop every daemon of this cluster and wait until they have exited. Files
        stay (logs included); nothing happens if nothing runs."""
        if all(self.daemon_pids()[name] is not None for name in ("slurmctld", "munged")):
            self._cancel_jobs(timeout_s=self.kill_wait_s + 3.0)
        self._stop_daemons(timeout_s)

    def _cancel_jobs(self, timeout_s: float) -> None:
        environment = self.env()
        subprocess.run([program("scancel") or "scancel", f"--partition={self.partition}"],
                       env=environment, capture_output=True, timeout=10, check=False)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = subprocess.run([program("squeue") or "squeue", "-h", "-o", "%i",
                                   "--states=RUNNING,COMPLETING,CONFIGURING,SUSPENDED"],
                                  env=environment, capture_output=True, text=True,
                                  timeout=10, check=False)
            if done.returncode != 0 or not done.stdout.strip():
                return
            time.sleep(0.1)
        log.warning("jobs still ending after %.0f s; stopping the daemons anyway", timeout_s)

    def _stop_daemons(self, timeout_s: float) -> None:
        """Stop the slurm daemons, then munged (they need it to the end); then any
        process of this cluster a pid file does not name (an earlier run's)."""
        pids = self.daemon_pids()
        slurm = [pid for name, pid in pids.items() if pid is not None and name != "munged"]
        left = terminate(slurm, timeout_s)
        left += terminate([pid for pid in (pids["munged"],) if pid is not None], timeout_s)
        strays = daemon_pids(self._markers(), str(self.conf_path))
        if strays:
            log.info("stopping processes of an earlier local cluster in %s: %s",
                     self.state_dir, strays)
            left += terminate(strays, timeout_s)
        if left:
            raise LocalClusterError(f"daemons of {self.state_dir} did not exit: pids {left}")
