"""The ``--cluster`` option: a cluster from a short spec, a JSON file, an openb node list
or a PAI machine list.

Four forms (docs/traces.md, "Cluster spec"):

* ``v100=36,p100=36,k80=36``: that many GPUs of each type, in servers of
  :data:`GPUS_PER_SERVER` GPUs (the last server of a type holds the remainder);
  ``v100=36x8`` sets the server size of one type. Known types (hetsched.files.generate's
  catalogue) carry its memory and price.
* ``cluster.json``: a cluster or instance file; its ``gpu_types``, ``nodes`` and
  optional ``topologies`` / ``network_gbps`` are read as in the instance format (jobs
  and throughput, if present, are ignored).
* ``openb:NODE_LIST.csv``: Alibaba's openb node list (:func:`hetsched.files.traces.openb_cluster`).
* ``pai:pai_machine_spec.csv``: Alibaba PAI's machine list (cluster-trace-gpu-v2020), one
  node per machine with GPUs, its CPUs and memory (:func:`hetsched.files.interconnect.pai_cluster`).

Relative paths are taken from ``base_dir``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.json_files import read_json
from hetsched.core.records import MAX_CLUSTER_GPUS, MAX_GPUS_PER_NODE, Cluster, GpuType, Node
from hetsched.files.generate import GPU_TYPES
from hetsched.files.instance import _build, _topology_graph, check_schema, schema
from hetsched.files.interconnect import pai_cluster
from hetsched.files.traces.openb import openb_cluster

#: GPUs per server when the spec does not say. Gavel's simulator scripts default to
#: ``--num_gpus_per_server 1:1:1``, which makes every multi-GPU job spread; 4 lets the
#: 1-4 GPU jobs that dominate the traces run packed and leaves 8-GPU jobs spread
#: (docs/traces.md).
GPUS_PER_SERVER = 4

#: ``PREFIX:FILE`` specs: what the file is, an example, and its reader.
FILE_SPECS: dict[str, tuple[str, str, Callable[[Path], Cluster]]] = {
    "openb:": ("node list", "openb:NODE_LIST.csv", openb_cluster),
    "pai:": ("machine list", "pai:pai_machine_spec.csv", pai_cluster),
}

_ITEM = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)=([0-9]+)(?:x([0-9]+))?$")


def parse_cluster(spec: str, *, base_dir: Path | None = None) -> Cluster:
    """The cluster that ``spec`` describes (one of the forms above)."""
    base = base_dir if base_dir is not None else Path.cwd()
    text = spec.strip()
    if not text:
        raise InputError("empty cluster spec", path="cluster_spec", value=spec,
                         expected="TYPE=GPUS[,TYPE=GPUS...], a JSON file, openb:NODES.csv or "
                         "pai:MACHINES.csv")
    for prefix, (what, example, reader) in FILE_SPECS.items():
        if text.startswith(prefix):
            relative = text.removeprefix(prefix).strip()
            if not relative:
                raise InputError(f"no {what} after '{prefix}'", path="cluster_spec",
                                 value=spec, expected=example)
            return reader(base / relative)
    if text.endswith(".json") or _is_file(base / text):
        return _cluster_file(base / text)
    return _gpu_counts(text)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False for a name the system cannot even look up."""
    try:
        return path.is_file()
    except OSError:
        return False


def _gpu_counts(text: str) -> Cluster:
    gpu_types: list[GpuType] = []
    nodes: list[Node] = []
    for part in text.split(","):
        match = _ITEM.match(part.strip())
        if match is None:
            raise InputError("bad cluster spec item", path="cluster_spec", value=part,
                             expected="TYPE=GPUS or TYPE=GPUSxPER_SERVER, e.g. v100=36 or "
                             "v100=36x8 (or a JSON file, or openb:NODES.csv)")
        digits = [match.group(2), match.group(3) or str(GPUS_PER_SERVER)]
        if any(len(text) > 9 for text in digits):
            raise InputError("GPU count too large", path="cluster_spec", value=part,
                             expected=f"at most {MAX_CLUSTER_GPUS} GPUs, {MAX_GPUS_PER_NODE} "
                             "per server")
        name, total, size = match.group(1), int(digits[0]), int(digits[1])
        if total < 1 or size < 1:
            raise InputError("GPU counts must be >= 1", path="cluster_spec", value=part,
                             expected="TYPE=GPUS with GPUS >= 1 (and PER_SERVER >= 1)")
        if size > MAX_GPUS_PER_NODE or total + sum(n.num_gpus for n in nodes) > \
                MAX_CLUSTER_GPUS:
            raise InputError("GPU count too large", path="cluster_spec", value=part,
                             expected=f"at most {MAX_CLUSTER_GPUS} GPUs in all, "
                             f"{MAX_GPUS_PER_NODE} per server")
        if any(t.name == name for t in gpu_types):
            raise InputError("GPU type given twice", path="cluster_spec", value=name,
                             expected="each type once")
        gpu_types.append(GPU_TYPES.get(name, GpuType(name)))
        for index, start in enumerate(range(0, total, size)):
            nodes.append(Node(f"{name}-{index}", name, min(size, total - start)))
    return Cluster(tuple(gpu_types), tuple(nodes))


def _cluster_file(path: Path) -> Cluster:
    file = str(path)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("not a cluster file", path="$", file=file, value=type(doc).__name__,
                         expected="an object with gpu_types and nodes")
    for key in ("gpu_types", "nodes"):
        if not isinstance(doc.get(key), list):
            raise InputError(f"missing or bad {key}", path=f"$.{key}", file=file,
                             value=doc.get(key), expected="a list of objects "
                             "(docs/instance-format.md)")
    fields = schema()["properties"]
    check_schema(doc, {"type": "object", "required": ["gpu_types", "nodes"], "properties": {
        key: fields[key] for key in ("gpu_types", "nodes", "topologies", "network_gbps")}}, file)
    gpu_types = _build(GpuType, doc["gpu_types"], "$.gpu_types", file)
    nodes = _build(Node, doc["nodes"], "$.nodes", file)
    topology = _topology_graph(doc, nodes, file, path.parent)
    try:
        return Cluster(tuple(gpu_types), tuple(nodes), topology)
    except InputError as exc:
        raise exc.at("$").in_file(file) from None
