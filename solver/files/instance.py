"""Reading and writing instance files (JSON; format in docs/instance-format.md).

Reading goes in three steps, each with errors that name the file, the JSON path,
the value and what was expected: parse the JSON (rejecting NaN and infinities),
check it against the shipped JSON Schema, then build the validated records.
"""

from __future__ import annotations

import csv
import json
import sys
from functools import cache
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hetsched.core.errors import InputError
from hetsched.core.json_files import json_path, read_json
from hetsched.core.ranges import text_float, text_int
from hetsched.core.records import (
    MAX_GPUS_PER_JOB,
    MAX_THROUGHPUT,
    MIN_THROUGHPUT,
    Cluster,
    GpuType,
    Instance,
    Job,
    Node,
    check_node_links,
    in_range,
)
from hetsched.core.throughput import Placement, ThroughputModel, ThroughputTable

if TYPE_CHECKING:  # (jsonschema is imported when a document is checked: its import
    # takes seconds where rfc3987-syntax is installed, and most commands never need it)
    from jsonschema.exceptions import ValidationError

FORMAT = "hetsched-instance"
VERSION = 1
THROUGHPUT_COLUMNS = ("job_type", "gpu_type", "num_gpus", "placement", "throughput")


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of instance files, shipped inside the package."""
    text = resources.files("hetsched").joinpath("schema/instance.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


_TYPE_WORDS = {
    "object": "an object", "array": "a list", "string": "a string", "number": "a number",
    "integer": "an integer", "boolean": "true or false", "null": "null",
}

_RELATIONS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<="}


def _schema_error(error: ValidationError, file: str) -> InputError:
    """One readable line from a JSON Schema validation error."""
    path = json_path(error.absolute_path)
    kind = error.validator
    # jsonschema types these as "Any | Unset"; they are set on every error it yields.
    rule: Any = error.validator_value
    found: Any = error.instance
    schema_part: Any = error.schema
    if kind == "required":
        missing = [name for name in rule if name not in found]
        return InputError(f"missing field '{missing[0]}'", path=path, file=file,
                          expected="the fields " + ", ".join(rule))
    if kind == "additionalProperties":
        allowed = sorted(schema_part.get("properties", {}))
        extra = sorted(set(found) - set(allowed))
        return InputError(f"unknown field '{extra[0]}'", path=path, file=file,
                          expected="only the fields " + ", ".join(allowed))
    if kind == "type":
        wanted = rule if isinstance(rule, list) else [rule]
        words = [_TYPE_WORDS.get(str(w), str(w)) for w in wanted]
        return InputError("wrong type", path=path, value=found, file=file,
                          expected=" or ".join(words))
    if kind in _RELATIONS:  # the lower bound broken (or the first one) and the upper one
        low = kind if kind != "maximum" else next(
            (key for key in ("minimum", "exclusiveMinimum") if key in schema_part), None)
        bounds = [f"{_RELATIONS[key]} {schema_part[key]:g}" for key in (low, "maximum")
                  if key is not None and key in schema_part]
        return InputError("value too large" if kind == "maximum" else "value too small",
                          path=path, value=found, file=file,
                          expected="a number " + " and ".join(bounds))
    if kind == "anyOf" and path.endswith(".throughput"):
        return InputError("throughput out of range", path=path, value=found, file=file,
                          expected=f"0 (cannot run) or a number of steps/s from "
                          f"{MIN_THROUGHPUT:g} to {MAX_THROUGHPUT:g}")
    if kind == "minItems":
        return InputError("list is empty", path=path, value=found, file=file,
                          expected=f"at least {rule} item(s)")
    if kind == "minLength":
        return InputError("empty string", path=path, value=found, file=file,
                          expected="a non-empty string")
    if kind in ("enum", "const"):
        options = rule if kind == "enum" else [rule]
        return InputError("value not allowed", path=path, value=found, file=file,
                          expected="one of " + ", ".join(json.dumps(o) for o in options))
    if kind == "oneOf" and path == "$" and isinstance(found, dict):
        if "throughput" in found:
            return InputError("both throughput and throughput_model given", path=path, file=file,
                              expected="one of them: a throughput table or a fitted model file")
        return InputError("missing field 'throughput'", path=path, file=file,
                          expected="throughput (a table) or throughput_model (a fitted model "
                          "file)")
    if kind == "oneOf" and path == "$.throughput_model":
        return InputError("bad throughput_model", path=path, value=found, file=file,
                          expected="a path to a model file, or {file, mode: fitted or measured}")
    if kind == "oneOf" and path == "$.throughput":
        return InputError("bad throughput", path=path, value=found, file=file,
                          expected="a list of rows {job_type, gpu_type, num_gpus, placement, "
                          "throughput} or a path to a table file")
    return InputError(error.message, path=path, file=file)


def _deepest(error: ValidationError) -> ValidationError:
    """For ``oneOf``/``anyOf`` errors, the sub-error that got furthest into the document."""
    if error.context:
        best = max(error.context, key=lambda e: (len(e.absolute_path), -len(e.schema_path)))
        if len(best.absolute_path) > len(error.absolute_path):
            return _deepest(best)
    return error


def validate_document(doc: Any, file: str) -> None:
    """Check a parsed document against the instance JSON Schema."""
    if not isinstance(doc, dict):
        raise InputError("the top level must be a JSON object", path="$", file=file,
                         value=type(doc).__name__, expected="an object with gpu_types, nodes, "
                         "jobs and throughput")
    check_schema(doc, schema(), file)


def check_schema(doc: Any, part: dict[str, Any], file: str) -> None:
    """Check ``doc`` against ``part`` (the instance schema or a piece of it); the first
    error, in document order, becomes one readable :class:`InputError`."""
    validator = _jsonschema().Draft202012Validator(part)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise _schema_error(_deepest(errors[0]), file)


def _jsonschema() -> ModuleType:
    """``jsonschema``, imported without its optional ``rfc3987_syntax``: when that is
    installed (the notebooks' dependencies bring it), jsonschema imports it to check the
    ``iri`` format, and it compiles 38 grammars on import, 1.0 of the 1.2 s that importing
    jsonschema took here, in every command that reads an instance (a ``solve`` with
    ``--time-limit 30`` lost that second to its search). No schema here uses that format
    nor a format checker. The module is hidden only while jsonschema is imported."""
    hidden = "rfc3987_syntax" not in sys.modules
    if hidden:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # import fails
    try:
        import jsonschema
    finally:
        if hidden:
            del sys.modules["rfc3987_syntax"]
    return jsonschema


def read_throughput_table(path: Path) -> ThroughputTable:
    """A throughput table from CSV (columns ``job_type, gpu_type, num_gpus, placement,
    throughput``; other columns ignored) or JSON (a list of such rows)."""
    file = str(path)
    if not path.is_file():
        raise InputError("no such throughput table file", file=file)
    if path.suffix.lower() == ".json":
        doc = read_json(path)
        rows = doc.get("throughput") if isinstance(doc, dict) else doc
        if not isinstance(rows, list):
            raise InputError("wrong type", path="$", file=file, value=type(rows).__name__,
                             expected="a list of throughput rows")
        table_schema = schema()["properties"]["throughput"]["oneOf"][1]
        if isinstance(doc, dict):
            table_schema = {"type": "object", "properties": {"throughput": table_schema}}
        check_schema(doc, table_schema, file)
        return _table_from_rows(rows, file, "$.throughput" if isinstance(doc, dict) else "$")
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            entries = _csv_entries(csv.DictReader(handle), file)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"not a readable CSV table ({exc})", file=file) from None
    try:
        return ThroughputTable(entries)
    except InputError as exc:
        raise exc.in_file(file) from None


def _csv_entries(reader: csv.DictReader[str], file: str
                 ) -> dict[tuple[str, str, int, Placement], float]:
    """The rows of a CSV throughput table, each checked, by (job, GPU type, count,
    placement)."""
    header = reader.fieldnames or []
    missing = [c for c in THROUGHPUT_COLUMNS if c not in header]
    if missing:
        raise InputError(f"missing column '{missing[0]}'", path="line 1", file=file,
                         value=header, expected="columns " + ", ".join(THROUGHPUT_COLUMNS))
    entries: dict[tuple[str, str, int, Placement], float] = {}
    for line, row in enumerate(reader, start=2):
        where = f"line {line}"
        try:
            count = text_int(row["num_gpus"])
            speed = text_float(row["throughput"])
            placement = Placement(row["placement"])
        except (TypeError, ValueError):
            raise InputError("bad row", path=where, file=file, value=row,
                             expected="an integer num_gpus, a numeric throughput and "
                             "placement packed or spread") from None
        if not (speed == 0 or in_range(speed, MIN_THROUGHPUT, MAX_THROUGHPUT)):
            raise InputError("throughput out of range", path=f"{where}.throughput",
                             file=file, value=row["throughput"],
                             expected=f"0 (cannot run) or a number of steps/s from "
                             f"{MIN_THROUGHPUT:g} to {MAX_THROUGHPUT:g}")
        if not in_range(count, 1, MAX_GPUS_PER_JOB):
            raise InputError("bad num_gpus", path=f"{where}.num_gpus", file=file,
                             value=count, expected=f"an integer from 1 to "
                             f"{MAX_GPUS_PER_JOB}")
        entries[(row["job_type"], row["gpu_type"], count, placement)] = speed
    return entries


def write_throughput_csv(table: ThroughputTable, path: Path) -> None:
    """Write a table in the CSV form :func:`read_throughput_table` reads."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(THROUGHPUT_COLUMNS)
        for job_type, gpu_type, count, placement, speed in table.rows():
            writer.writerow([job_type, gpu_type, count, placement.value, repr(speed)])


def _table_from_rows(rows: list[Any], file: str, prefix: str) -> ThroughputTable:
    entries: dict[tuple[str, str, int, Placement], float] = {}
    for index, row in enumerate(rows):
        key = (row["job_type"], row["gpu_type"], row["num_gpus"], Placement(row["placement"]))
        if key in entries:
            raise InputError("duplicate throughput row", path=f"{prefix}[{index}]", file=file,
                             value=[*key[:3], key[3].value],
                             expected="one row per (job_type, gpu_type, num_gpus, placement)")
        entries[key] = row["throughput"]
    return ThroughputTable(entries)


def _throughput_from_model_file(reference: Any, file: str, base_dir: Path | None,
                                jobs: list[Job], gpu_types: list[GpuType]) -> ThroughputModel:
    """The throughput of an instance that names a fitted model file (``throughput_model``:
    a path, or ``{file, mode}``; docs/throughput-model.md). In fitted mode every job type
    and GPU type of the instance must be known to the model."""
    from hetsched.speeds.fit import throughput_model
    from hetsched.speeds.model import FittedThroughputModel
    from hetsched.speeds.model_file import load_model

    if isinstance(reference, str):
        reference = {"file": reference}
    model_path = (base_dir or Path.cwd()) / reference["file"]
    if not model_path.is_file():
        raise InputError("throughput model file does not exist", path="$.throughput_model",
                         value=reference["file"], file=file,
                         expected=f"a path relative to {base_dir or Path.cwd()}")
    model = throughput_model(load_model(model_path), reference.get("mode", "fitted"))
    if isinstance(model, FittedThroughputModel):
        known = [(f"$.jobs[{i}].job_type", job.job_type, model.job_types)
                 for i, job in enumerate(jobs)]
        known += [(f"$.gpu_types[{i}].name", t.name, model.gpu_types)
                  for i, t in enumerate(gpu_types)]
        for path, name, names in known:
            if name not in names:
                shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
                raise InputError(f"not in the throughput model {reference['file']}", path=path,
                                 value=name, file=file, expected=f"one of {shown}")
    return model


def _build(kind: Any, items: list[dict[str, Any]], prefix: str, file: str) -> list[Any]:
    built = []
    for index, fields in enumerate(items):
        try:
            if kind is Job:
                for key in ("allowed_gpu_counts", "allowed_gpu_types", "allowed_nodes"):
                    if fields.get(key) is not None:
                        fields = {**fields, key: tuple(fields[key])}
            built.append(kind(**fields))
        except InputError as exc:
            raise exc.at(f"{prefix}[{index}]").in_file(file) from None
    return built


def instance_from_dict(doc: Any, *, file: str = "<instance>", base_dir: Path | None = None,
                       throughput: ThroughputModel | None = None) -> Instance:
    """Build a validated :class:`Instance` from a parsed instance document.

    A ``throughput`` that is a path is read relative to ``base_dir``; passing
    ``throughput`` overrides the document's.
    """
    validate_document(doc, file)
    gpu_types = _build(GpuType, doc["gpu_types"], "$.gpu_types", file)
    nodes = _build(Node, doc["nodes"], "$.nodes", file)
    jobs = _build(Job, doc["jobs"], "$.jobs", file)
    if throughput is None and "throughput_model" in doc:
        throughput = _throughput_from_model_file(doc["throughput_model"], file, base_dir,
                                                 jobs, gpu_types)
    if throughput is None:
        source = doc["throughput"]
        if isinstance(source, str):
            table_path = (base_dir or Path.cwd()) / source
            if not table_path.is_file():
                raise InputError("throughput table file does not exist", path="$.throughput",
                                 value=source, file=file,
                                 expected=f"a path relative to {base_dir or Path.cwd()}")
            throughput = read_throughput_table(table_path)
        else:
            try:
                throughput = _table_from_rows(source, file, "$.throughput")
            except InputError as exc:
                raise (exc if exc.file else exc.at("$.throughput").in_file(file)) from None
    topology = _topology_graph(doc, nodes, file, base_dir)
    try:
        cluster = Cluster(tuple(gpu_types), tuple(nodes), topology)
        return Instance(cluster, tuple(jobs), throughput, now=float(doc.get("now", 0.0)),
                        name=doc.get("name", ""))
    except InputError as exc:
        raise exc.at("$").in_file(file) from None


def _topology_graph(doc: dict[str, Any], nodes: list[Node], file: str,
                    base_dir: Path | None) -> Any:
    """The cluster graph from the document's ``topologies`` (GPU type -> nvidia-smi topo
    file) and ``network_gbps``; ``None`` (the default topology) when neither is given."""
    if "topologies" not in doc and "network_gbps" not in doc:
        return None
    try:
        check_node_links(nodes)
    except InputError as exc:
        raise exc.at("$").in_file(file) from None
    from hetsched.files.interconnect import (
        NetworkSpec,
        ServerTopology,
        cluster_graph,
        read_topology,
    )

    types = {node.gpu_type for node in nodes}
    servers: dict[str, ServerTopology] = {}
    for gpu_type, relative in doc.get("topologies", {}).items():
        where = f"$.topologies.{gpu_type}"
        if gpu_type not in types:
            raise InputError("no node has this GPU type", path=where, value=gpu_type, file=file,
                             expected="one of " + ", ".join(sorted(types)))
        topo_path = (base_dir or Path.cwd()) / relative
        if not topo_path.is_file():
            raise InputError("topology file does not exist", path=where, value=relative,
                             file=file, expected=f"a path relative to {base_dir or Path.cwd()}")
        servers[gpu_type] = read_topology(topo_path)
    by_node: dict[str, ServerTopology] = {}
    for index, node in enumerate(nodes):
        server = servers.get(node.gpu_type)
        if server is None:
            continue
        if server.num_gpus != node.num_gpus:
            raise InputError("node's GPU count differs from its type's topology file",
                             path=f"$.nodes[{index}].num_gpus", value=node.num_gpus, file=file,
                             expected=f"{server.num_gpus} GPUs as in {server.source}")
        by_node[node.name] = server
    network = NetworkSpec(network_gbps=float(doc.get("network_gbps", NetworkSpec().network_gbps)))
    return cluster_graph(nodes, by_node, network)


def load_instance(path: str | Path) -> Instance:
    """Read, check and build the instance in ``path``."""
    path = Path(path)
    doc = read_json(path)
    instance = instance_from_dict(doc, file=str(path), base_dir=path.parent)
    if not instance.name:
        instance = instance.replace(name=path.stem)
    return instance


def instance_to_dict(instance: Instance, *, comment: str = "",
                     generator: dict[str, Any] | None = None) -> dict[str, Any]:
    """The instance document for ``instance`` (throughput inline; it must be a table)."""
    if not isinstance(instance.throughput, ThroughputTable):
        raise TypeError("only a ThroughputTable can be written inline")
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": instance.name}
    if comment:
        doc["comment"] = comment
    if generator is not None:
        doc["generator"] = generator
    doc["now"] = instance.now
    doc["gpu_types"] = [_drop_none(vars(t)) for t in instance.cluster.gpu_types]
    doc["nodes"] = [_drop_none(vars(n)) for n in instance.cluster.nodes]
    jobs = []
    for job in instance.jobs:
        fields = _drop_none(vars(job))
        if job.allowed_gpu_counts is not None:
            fields["allowed_gpu_counts"] = list(job.allowed_gpu_counts)
        if job.allowed_gpu_types is not None:
            fields["allowed_gpu_types"] = list(job.allowed_gpu_types)
        if job.allowed_nodes is not None:
            fields["allowed_nodes"] = list(job.allowed_nodes)
        jobs.append(fields)
    doc["jobs"] = jobs
    doc["throughput"] = [
        {"job_type": j, "gpu_type": g, "num_gpus": n, "placement": p.value, "throughput": v}
        for j, g, n, p, v in instance.throughput.rows()
    ]
    return doc


def _drop_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None and not k.startswith("_")}


def save_instance(instance: Instance, path: str | Path, **kwargs: Any) -> None:
    """Write ``instance`` as an instance file (keyword arguments go to
    :func:`instance_to_dict`)."""
    Path(path).write_text(dumps_compact(instance_to_dict(instance, **kwargs)), encoding="utf-8")


def dumps_compact(doc: dict[str, Any]) -> str:
    """JSON with one line per top-level field and per list item: easy to read and diff."""
    lines = []
    for key, value in doc.items():
        head = f" {json.dumps(key)}: "
        if isinstance(value, list) and value:
            items = [f"  {json.dumps(item, allow_nan=False)}" for item in value]
            lines.append(head + "[\n" + ",\n".join(items) + "\n ]")
        else:
            lines.append(head + json.dumps(value, allow_nan=False))
    return "{\n" + ",\n".join(lines) + "\n}\n"
