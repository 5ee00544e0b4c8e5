"""Alibaba's 2023 GPU traces (clusterdata ``cluster-trace-gpu-v2023``, "openb").

Pod list columns ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time`` (times in s). A pod is a
job that arrives at ``creation_time`` and runs from ``scheduled_time`` to
``deletion_time`` on ``num_gpu`` GPUs; ``gpu_spec`` (empty, or GPU models joined by
``|``) restricts the GPU types it may use. Node list columns ``sn, cpu_milli,
memory_mib, gpu, model``. Rules in docs/traces.md.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.records import (
    MAX_CPUS,
    MAX_GPUS_PER_JOB,
    MAX_GPUS_PER_NODE,
    MAX_MEMORY_GB,
    MAX_TIME_S,
    Cluster,
    GpuType,
    Node,
)
from hetsched.files.traces.base import BadRowError, Options, Row, Trace, integer, number, read_rows
from hetsched.files.traces.rules import read_csv

log = logging.getLogger(__name__)

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


def gpu_type_name(model: str) -> str:
    """hetsched's GPU type name for an openb GPU model: lower case (``V100M32`` ->
    ``v100m32``), the same rule for pods and nodes."""
    return model.strip().lower()


def _time(cells: dict[str, str], column: str) -> float | None:
    """A time in s (0 is a time: the trace's first moment), or None when the cell is
    empty (openb's "never")."""
    if not cells[column]:
        return None
    return number(cells[column], column, low=0.0, high=MAX_TIME_S,
                  what=f"a time in s from 0 to {MAX_TIME_S:g}, or empty")


def read_openb(path: Path, options: Options) -> Trace:
    """Read an openb pod list into a :class:`~hetsched.files.traces.base.Trace`."""
    return read_csv(path, "openb", options, POD_COLUMNS,
                    lambda line, cells: _pod(line, cells, gpu_sharing=options.gpu_sharing),
                    types_column="gpu_spec")


def _pod(line: int, cells: dict[str, str], *, gpu_sharing: bool) -> Row | str:
    """The row of one pod, or why it is left out (no GPU, never ran, still running);
    ``gpu_sharing`` off, a share of one GPU is counted as the whole GPU (noted)."""
    if not cells["name"]:
        raise BadRowError("empty name", cells["name"], "a pod name", "name")
    num_gpu = integer(cells["num_gpu"], "num_gpu", high=MAX_GPUS_PER_JOB)
    gpu_milli = integer(cells["gpu_milli"] or "0", "gpu_milli", high=1000)
    cpu_milli = integer(cells["cpu_milli"] or "0", "cpu_milli", high=1000 * MAX_CPUS)
    memory_mib = number(cells["memory_mib"] or "0", "memory_mib", low=0.0,
                        high=1024 * MAX_MEMORY_GB, what=f"MiB from 0 to {1024 * MAX_MEMORY_GB:g}")
    created = _time(cells, "creation_time")
    if created is None:
        raise BadRowError("empty creation_time", cells["creation_time"], "a time in s",
                          "creation_time")
    scheduled = _time(cells, "scheduled_time")
    deleted = _time(cells, "deletion_time")
    if num_gpu == 0:
        return "num_gpu 0"
    if scheduled is None or cells["pod_phase"] == "Pending":
        return "never scheduled"
    if deleted is None:
        return "no deletion_time (still running)"
    if deleted <= scheduled:
        return "deletion_time not after scheduled_time"
    share = note = None
    if num_gpu == 1 and 0 < gpu_milli < 1000:
        if gpu_sharing:
            share = gpu_milli / 1000
        else:
            note = "gpu_milli < 1000 (a share of one GPU): counted as one whole GPU (GPU " \
                "sharing off)"
    models = [m for m in cells["gpu_spec"].split("|") if m.strip()]
    allowed = tuple(dict.fromkeys(gpu_type_name(m) for m in models)) or None
    return Row(line, created, num_gpu, duration=deleted - scheduled, id=cells["name"],
               allowed_gpu_types=allowed, gpu_share=share, cpus=cpu_milli / 1000,
               memory_gb=memory_mib / 1024, note=note)


#: Why a machine of a node list is left out of the cluster.
CPU_ONLY = "no GPU"


def _node(line: int, cells: dict[str, str]) -> Node | str:
    """The node of one machine, or :data:`CPU_ONLY`."""
    gpus = integer(cells["gpu"] or "0", "gpu", high=MAX_GPUS_PER_NODE)
    cpus = integer(cells["cpu_milli"], "cpu_milli", high=1000 * MAX_CPUS) // 1000
    memory = number(cells["memory_mib"], "memory_mib", low=0.0,
                    high=1024 * MAX_MEMORY_GB) / 1024
    if gpus > 0 and not cells["model"]:
        raise BadRowError("empty model for a machine with GPUs", cells["model"],
                          "a GPU model name", "model")
    if gpus == 0:
        return CPU_ONLY
    try:
        return Node(cells["sn"], gpu_type_name(cells["model"]), gpus, cpus=cpus,
                    memory_gb=memory)
    except InputError as exc:
        raise BadRowError(exc.problem, exc.value, exc.expected or "", exc.path) from None


def openb_cluster(path: str | Path) -> Cluster:
    """A cluster from an openb node list (``sn, cpu_milli, memory_mib, gpu, model``):
    one node per machine with GPUs (``cpus`` = cpu_milli / 1000 rounded down,
    ``memory_gb`` = memory_mib / 1024); machines without GPUs are left out."""
    path = Path(path)
    reading, nodes = read_rows(path, "openb-nodes", Options(), NODE_COLUMNS, _node)
    cpu_only = reading.excluded[CPU_ONLY]
    if not nodes:
        raise InputError("no machine with GPUs in the node list", file=str(path),
                         expected="rows with gpu >= 1")
    types = tuple(GpuType(t) for t in dict.fromkeys(node.gpu_type for node in nodes))
    try:
        cluster = Cluster(types, tuple(nodes))
    except InputError as exc:
        raise exc.in_file(str(path)) from None
    log.info("read %s: %d nodes with %d GPUs (%d CPU-only machines left out)", path,
             len(nodes), cluster.num_gpus(), cpu_only)
    return cluster
