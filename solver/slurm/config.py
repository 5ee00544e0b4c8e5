"""The files of a local Slurm cluster (hetsched.slurm.local): slurm.conf, gres.conf, the
GPUs' placeholder device files, the MUNGE key and ``local-cluster.json``.

Why slurm.conf says what it says (:func:`slurm_conf`):

- ``SlurmctldHost=localhost``, per node ``NodeHostname=localhost NodeAddr=127.0.0.1
  Port=...``: every slurmd runs on this machine, told apart by its port and ``-N NAME``.
- ``SlurmUser=root``, ``SlurmdUser=root``: nothing to set up for a ``slurm`` user.
- ``AuthInfo=socket=DIR/munge/munge.socket``: the cluster's own munged; the system's
  (``/run/munge``) is neither needed nor touched. Its folder is 0755 and the socket's
  path at most 107 characters (a Unix socket's), so a deeper ``--dir`` is refused.
- ``SelectType=select/cons_tres``, ``SelectTypeParameters=CR_Core_Memory``,
  ``DefMemPerCPU``: GPUs, cores and memory as consumable resources; without a default
  memory a job asking for none would hold a whole node's memory.
- ``GresTypes=gpu``, ``Gres=gpu:TYPE:N`` and gres.conf's ``AutoDetect=off`` with
  ``File=DIR/dev/NODE/gpu[0-3]``: typed GPUs with indices, over placeholder files.
- ``SlurmdParameters=config_overrides``: a node may declare more CPUs and memory than
  the machine has.
- ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``, no accounting
  (``accounting_storage/none``, ``jobacct_gather/none``): no cgroups and no slurmdbd to
  run; ``sacct`` then does not work, and ``JobCompType=jobcomp/filetxt`` (``log/jobcomp.txt``:
  a line per run with ``JobState``, ``StartTime``, ``EndTime``, ``NodeList``,
  ``SubmitTime``; a requeue writes one with ``JobState=PENDING`` for the run it ended)
  stands in.
- ``SchedulerParameters`` (:data:`SCHEDULER_PARAMETERS`): see there.
- ``Epilog=DIR/epilog`` (:data:`EPILOG_S`): the end of an epilog is the one event on
  which slurmctld schedules at once.
- ``JobRequeue=1``, ``ReturnToService=2``, ``PreemptType=preempt/none``: jobs may be
  requeued; a node that was down comes back when its slurmd registers; Slurm preempts
  nothing by itself (the agent does).
- ``MinJobAge=300``, ``KillWait=5``: a finished job stays in ``squeue --json`` for 5
  minutes (the agent reads ends from there); a cancelled or requeued job gets SIGTERM,
  then SIGKILL 5 s later.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hetsched.core.errors import InputError

#: Memory (MB) of a job per CPU when it asks for none (else it would hold a whole node).
DEFAULT_MEMORY_PER_CPU_MB = 1024
#: Released jobs start within a second (slurmctld's default batch_sched_delay=3 held them
#: up to 3 s); Slurm's own backfill looks every second, not every 30 s.
SCHEDULER_PARAMETERS = "batch_sched_delay=0,sched_min_interval=0,bf_interval=1"
#: The longest (s) a node's epilog (slurm.conf ``Epilog=``) waits for the agent. slurmctld
#: 22.05 starts a pending job at once only when an epilog completes; otherwise at its next
#: pass, up to a second later. So a managed job's GPUs pass to the next job during its
#: epilog: the agent sees the job COMPLETING (or preempts it), releases the next job onto
#: its GPUs, then writes ``handover/JOBID``; the epilog ends when it sees that file, and
#: Slurm starts the next job (docs/slurm.md, "Handing GPUs over"). Longer than the agent's
#: reaction (a poll of 0.1 s, a reading, a decision, two ``scontrol`` calls).
EPILOG_S = 0.5
#: How often (s) the epilog looks for the agent's file.
EPILOG_LOOK_S = 0.01
#: Node and GPU type names Slurm reads as one plain name (no hostlist brackets, commas).
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class SlurmNode:
    """One node: its Slurm name, ``gpus`` GPUs of ``gpu_type``, CPUs and memory (MB)."""

    name: str
    gpu_type: str
    gpus: int
    cpus: int
    memory_mb: int


def check_name(name: str, what: str) -> None:
    """Raise an InputError unless Slurm takes ``name`` as a node or GPU type name."""
    if not _NAME.match(name):
        raise InputError(f"{what} Slurm cannot take", path="cluster_spec", value=name,
                         expected="a letter, then letters, digits, '-' or '_'")


class SlurmSetup(Protocol):
    """What the files are written from: a :class:`hetsched.slurm.local.LocalCluster`."""

    @property
    def nodes(self) -> tuple[SlurmNode, ...]: ...
    @property
    def state_dir(self) -> Path: ...
    @property
    def port(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def min_job_age_s(self) -> int: ...
    @property
    def kill_wait_s(self) -> int: ...
    @property
    def epilog_s(self) -> float: ...
    @property
    def conf_path(self) -> Path: ...
    @property
    def munge_socket(self) -> Path: ...
    @property
    def log_dir(self) -> Path: ...
    def node_port(self, index: int) -> int: ...


def slurm_conf(cluster: SlurmSetup) -> str:
    """The text of the cluster's slurm.conf."""
    state, logs = cluster.state_dir, cluster.log_dir
    settings = {
        "ClusterName": cluster.name, "SlurmctldHost": "localhost",
        "SlurmctldPort": cluster.port, "SlurmUser": "root", "SlurmdUser": "root",
        "AuthType": "auth/munge", "CredType": "cred/munge",
        "AuthInfo": f"socket={cluster.munge_socket}",
        "StateSaveLocation": state / "ctld", "SlurmdSpoolDir": state / "spool" / "%n",
        "SlurmctldPidFile": state / "run" / "slurmctld.pid",
        "SlurmdPidFile": state / "run" / "slurmd-%n.pid",
        "SlurmctldLogFile": logs / "slurmctld.log", "SlurmdLogFile": logs / "slurmd-%n.log",
        "SelectType": "select/cons_tres", "SelectTypeParameters": "CR_Core_Memory",
        "DefMemPerCPU": DEFAULT_MEMORY_PER_CPU_MB, "GresTypes": "gpu",
        "SlurmdParameters": "config_overrides",
        "ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/filetxt", "JobCompLoc": logs / "jobcomp.txt",
        "SchedulerType": "sched/backfill", "SchedulerParameters": SCHEDULER_PARAMETERS,
        "PreemptType": "preempt/none", "JobRequeue": 1, "ReturnToService": 2,
        "MinJobAge": cluster.min_job_age_s, "KillWait": cluster.kill_wait_s,
        "SlurmdTimeout": 30, "MpiDefault": "none", "MailProg": "/bin/true",
    }
    if cluster.epilog_s > 0:
        settings["Epilog"] = epilog_path(cluster)
    lines = ["# Written by hetsched (hetsched.slurm.local.LocalCluster); rewritten on each "
             "start.", *(f"{key}={value}" for key, value in settings.items())]
    lines += [f"NodeName={node.name} NodeHostname=localhost NodeAddr=127.0.0.1 "
              f"Port={cluster.node_port(index)} CPUs={node.cpus} "
              f"RealMemory={node.memory_mb} Gres=gpu:{node.gpu_type}:{node.gpus} "
              "State=UNKNOWN" for index, node in enumerate(cluster.nodes)]
    lines.append(f"PartitionName={cluster.partition} Nodes=ALL Default=YES "
                 "MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def epilog_path(cluster: SlurmSetup) -> Path:
    """The nodes' epilog script (slurm.conf's ``Epilog=``)."""
    return cluster.state_dir / "epilog"


def handover_dir(cluster: SlurmSetup) -> Path:
    """Where the agent tells the epilogs that it has decided on a job's GPUs: a file per
    Slurm job id (``hetsched slurm run --handover``)."""
    return cluster.state_dir / "handover"


def epilog_script(cluster: SlurmSetup) -> str:
    """The text of the epilog: it ends when the agent's file for the job appears
    (:func:`handover_dir`), removing it, or after the cluster's ``epilog_s``."""
    looks = max(1, round(cluster.epilog_s / EPILOG_LOOK_S))
    return f"""#!/bin/sh
# Written by hetsched: a job's GPUs pass to the next job as this epilog ends. It ends when
# the agent has decided on them (it writes {handover_dir(cluster)}/JOBID),
# or after {cluster.epilog_s:g} s ({looks} looks) (docs/slurm.md, "Handing GPUs over").
marker="{handover_dir(cluster)}/$SLURM_JOB_ID"
i=0
while [ "$i" -lt {looks} ]; do
    if [ -e "$marker" ]; then
        rm -f "$marker"
        exit 0
    fi
    sleep {EPILOG_LOOK_S:g}
    i=$((i + 1))
done
exit 0
"""


def gpu_files(cluster: SlurmSetup, node: SlurmNode) -> list[Path]:
    """The device files of ``node``'s GPUs, ``dev/NODE/gpuI`` (I = Slurm's GPU index)."""
    return [cluster.state_dir / "dev" / node.name / f"gpu{index}"
            for index in range(node.gpus)]


def gres_conf(cluster: SlurmSetup) -> str:
    """The text of the cluster's gres.conf: each node's typed GPUs over their files."""
    lines = ["AutoDetect=off"]
    for node in cluster.nodes:
        files = gpu_files(cluster, node)
        pattern = files[0] if len(files) == 1 else \
            f"{files[0].parent}/gpu[0-{len(files) - 1}]"
        lines.append(f"NodeName={node.name} Name=gpu Type={node.gpu_type} File={pattern}")
    return "\n".join(lines) + "\n"


def write_files(cluster: SlurmSetup, description: Mapping[str, Any]) -> None:
    """Make the cluster's folders, MUNGE key (once) and GPU files, and write
    gres.conf, slurm.conf and ``local-cluster.json`` (``description``, the cluster's
    fields)."""
    state = cluster.state_dir
    for folder in ("munge", "ctld", "run", "log", "handover",
                   *(f"spool/{n.name}" for n in cluster.nodes),
                   *(f"dev/{n.name}" for n in cluster.nodes)):
        (state / folder).mkdir(mode=0o755, parents=True, exist_ok=True)
    (state / "munge").chmod(0o755)  # munged: its socket's folder open to all
    key = state / "munge" / "munge.key"
    if not key.exists():  # munged: owned by its user (root), read by nobody else
        descriptor = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(descriptor, "wb") as file:
            file.write(os.urandom(1024))
    for node in cluster.nodes:
        for path in gpu_files(cluster, node):
            _placeholder_device(path)
    (state / "local-cluster.json").write_text(json.dumps(description, indent=1) + "\n",
                                              encoding="utf-8")
    (state / "gres.conf").write_text(gres_conf(cluster), encoding="utf-8")
    if cluster.epilog_s > 0:
        epilog_path(cluster).write_text(epilog_script(cluster), encoding="utf-8")
        epilog_path(cluster).chmod(0o755)
    cluster.conf_path.write_text(slurm_conf(cluster), encoding="utf-8")


def _placeholder_device(path: Path) -> None:
    """A GPU's device file: a character device like /dev/null (1, 3), as slurmd checks;
    an empty file where this system allows no device nodes (slurmd then logs an error
    per GPU, and schedules them all the same)."""
    if path.exists():
        return
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        path.touch()
