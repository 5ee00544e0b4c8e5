"""What a bench runs: the lists of ``hetsched bench``'s options (policies, seeds, loads)
and sweep spec files (``hetsched bench --spec sweep.toml``: traces with their formats
and clusters, policies with their settings, seeds, loads), validated with errors that
name the file, the key and the value; :func:`run_sweep` runs one.

A spec's relative paths are relative to its ``root`` (default: the spec file's folder).
The spec is copied into the output folder as ``sweep.toml``, with ``root`` set to that
folder when the file had none, so the copy runs the same sweep again from anywhere
(docs/bench.md, "Sweep spec files").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import tomllib

from hetsched.bench.engine import Engine
from hetsched.bench.inputs import Prefetched
from hetsched.bench.runner import BenchOutcome, default_workers, run_benches
from hetsched.bench.settings import LABEL, BenchSettings, PolicyVariant, bench_settings, load_label
from hetsched.bench.spec_reader import SpecReader, check_inputs, input_file, reading_setting
from hetsched.core.errors import InputError
from hetsched.core.outputs import check_output_folder, locked_folder, write_text, writing
from hetsched.core.ranges import text_float
from hetsched.core.settings import MAX_LOAD, MIN_LOAD, check_period
from hetsched.formulations.options import MAX_SEED, check_seed

if TYPE_CHECKING:
    from hetsched.bench.references import Reference

#: The name of the spec's copy in the output folder.
COPY = "sweep.toml"


# --- the options' lists -----------------------------------------------------------------


def _split(text: str, option: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise InputError("empty item in a list", path=option, value=text,
                         expected="comma-separated values, e.g. a,b,c")
    return list(dict.fromkeys(items))


def parse_policies(text: str) -> tuple[str, ...]:
    """``fifo,deadline`` -> ``("fifo", "deadline")``; every name must be a known rolling
    policy (an :class:`InputError` lists the unknown ones and the known ones)."""
    from hetsched.replaying import rolling_policy

    names = _split(text, "policies")
    unknown: list[str] = []
    expected = ""
    for name in names:
        try:
            rolling_policy(name)
        except InputError as exc:
            unknown.append(name)
            expected = exc.expected or ""
    if unknown:
        raise InputError("unknown policies", path="policies", value=",".join(unknown),
                         expected=expected or "known policy names")
    return tuple(names)


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0,1,2`` -> ``(0, 1, 2)``; integers >= 0, duplicates dropped."""
    seeds = []
    for item in _split(text, "seeds"):
        if not (item.isascii() and item.isdigit()):  # ("²".isdigit() is True)
            raise InputError("bad seed", path="seeds", value=item,
                             expected=f"integers from 0 to {MAX_SEED:,}, e.g. 0,1,2")
        seeds.append(check_seed(int(item), "seeds"))
    return tuple(dict.fromkeys(seeds))


def parse_loads(text: str) -> tuple[float, ...]:
    """``0.5,1,2`` -> ``(0.5, 1.0, 2.0)``: arrival-rate multipliers, finite and > 0;
    loads written alike (:func:`hetsched.bench.settings.load_label`) are one."""
    loads: dict[str, float] = {}
    for item in _split(text, "load"):
        try:
            value = text_float(item)  # (ASCII digits: not '٣', not '1_0')
        except ValueError:
            value = math.nan
        if not (MIN_LOAD <= value <= MAX_LOAD):  # (NaN too)
            raise InputError("bad load", path="load", value=item,
                             expected=f"numbers from {MIN_LOAD:g} to {MAX_LOAD:g} "
                             "(arrival-rate multipliers), e.g. 0.5,1,2")
        loads.setdefault(load_label(value), value)
    return tuple(loads.values())


# --- sweep spec files -------------------------------------------------------------------


#: How a trace is read, as ``hetsched replay``'s options of the same names
#: (docs/traces.md): a trace table's own, or the spec's default for every trace.
READING_KEYS = ("reference_gpu", "gpu_aliases", "unknown_gpus", "gpu_sharing", "spread_speed",
                "colocation_factor", "elastic", "knowledge", "learn")
#: The spec's top-level keys (the settings every bench of the sweep shares, and the
#: defaults of each trace's own).
TOP_KEYS = ("root", "traces", "policies", "seeds", "loads", "limit_jobs",
            "deadline_fraction", "on_bad_row", "time_limit", "wall_clock", "backend",
            "interval", "batch", "restart_penalty", "start_latency", "prices", "lp_bound",
            "tenants", "pairs", "jct_window", "references", *READING_KEYS)
#: A trace table's keys.
TRACE_KEYS = ("path", "format", "cluster", "clusters", "name", "throughput", "limit_jobs",
              "deadline_fraction", "on_bad_row", "tenants", "pairs", *READING_KEYS)
#: The keys of a policy table that are not the policy's own settings.
POLICY_KEYS = ("name", "label")


@dataclass(frozen=True)
class Sweep:
    """What to run: one bench per trace and cluster (the folder name under the sweep's
    output folder, and the settings), and the spec file it was read from (its path, its
    text and its ``root``; none for a bench given by the command's options, whose one
    bench is the output folder itself, named "")."""

    benches: tuple[tuple[str, BenchSettings], ...]
    path: Path | None = None
    text: str = ""
    root: Path | None = None
    #: each bench's inputs, read when the spec was checked (none: read by the bench)
    prefetched: tuple[Prefetched | None, ...] = ()

    def copy_text(self) -> str:
        """The spec as written, with ``root`` set first when the file has none."""
        if "root" in tomllib.loads(self.text):
            return self.text
        return f"root = {json.dumps(str(self.root))}\n" + self.text


def options_sweep(*, trace: Path | None, trace_format: str | None, cluster: str | None,
                  policies: str | None, seeds: str, loads: str, workers: int | None,
                  **settings: Any) -> Sweep:
    """The one bench of ``hetsched bench``'s options (the comma-separated lists parsed,
    ``settings`` as :class:`BenchSettings` takes them); the trace, its format, the cluster
    and the policies are required."""
    from hetsched.files.cluster_spec import parse_cluster

    for option, value in (("--trace", trace), ("--format", trace_format),
                          ("--cluster", cluster), ("--policies", policies)):
        if value is None:
            raise InputError("missing option", path=option, expected="--trace, --format, "
                             "--cluster and --policies, or --spec SWEEP.toml")
    assert trace is not None
    assert trace_format is not None
    assert cluster is not None
    cluster_types = parse_cluster(cluster).type_names
    if settings.get("tenants") is not None:  # (quotas on the cluster's types, before any run)
        from hetsched.files.tenants import read_tenants

        read_tenants(settings["tenants"]).check_cluster(cluster_types, str(settings["tenants"]))
    return Sweep(((("", bench_settings(
        trace=trace, trace_format=trace_format, cluster=cluster,
        policies=parse_policies(policies or ""), seeds=parse_seeds(seeds),
        loads=parse_loads(loads), workers=workers or default_workers(), **settings))),))


def load_sweep(path: Path) -> Sweep:
    """Read and validate the sweep spec ``path`` (TOML; docs/bench.md): every trace
    exists, every cluster parses, every policy and its settings are known, seeds and
    loads are in range. Any problem is an :class:`InputError` naming the file, the key
    (``traces[1].format``) and the value."""
    reader = SpecReader(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the spec ({exc})", file=str(path), path="--spec",
                         expected="a readable UTF-8 TOML file") from None
    try:
        spec = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise reader.error(f"not TOML: {exc}", "", expected="a TOML sweep spec "
                           "(docs/bench.md, 'Sweep spec files')") from None
    reader.table(spec, "", TOP_KEYS)
    root = path.resolve().parent
    if "root" in spec:
        root = (root / reader.text(spec["root"], "root", "a folder")).resolve()
        if not root.is_dir():
            raise reader.error("no such folder", "root", spec["root"], "an existing folder")
    if "traces" not in spec or "policies" not in spec:
        missing = "traces" if "traces" not in spec else "policies"
        raise reader.error("missing key", missing, expected="traces and policies (both)")
    shared = _shared(reader, spec)
    labels, variants = _policies(reader, spec["policies"])
    benches: dict[str, BenchSettings] = {}
    where: dict[str, tuple[str, dict[str, Any], str]] = {}
    for index, entry in enumerate(reader.items(spec["traces"], "traces", "trace tables")):
        for folder, settings, cluster_key in _trace(reader, root, entry, f"traces[{index}]",
                                                    spec, shared, labels, variants):
            if folder in benches:
                raise reader.error("two benches with one folder name", f"traces[{index}]",
                                   folder, "a distinct name = '...' for each trace")
            benches[folder] = settings
            where[folder] = (f"traces[{index}]", entry, cluster_key)
    # Every bench's inputs read as its runs will read them, before anything is written.
    prefetched = tuple(check_inputs(reader, *where[folder], settings)
                       for folder, settings in benches.items())
    return Sweep(tuple(benches.items()), path, text, root, prefetched)


def _shared(reader: SpecReader, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The BenchSettings fields every bench of the spec shares."""
    from hetsched.core.settings import MAX_RESTART_PENALTY_S, check_interval
    from hetsched.registry import ENTRIES

    seeds = tuple(dict.fromkeys(
        int(reader.number(seed, f"seeds[{i}]", 0, MAX_SEED, integer=True))
        for i, seed in enumerate(reader.items(spec.get("seeds", [0]), "seeds", "seeds"))))
    loads: dict[str, float] = {}
    for i, load in enumerate(reader.items(spec.get("loads", [1]), "loads", "loads")):
        value = float(reader.number(load, f"loads[{i}]", MIN_LOAD, MAX_LOAD))
        loads.setdefault(load_label(value), value)
    shared: dict[str, Any] = {"seeds": seeds, "loads": tuple(loads.values())}
    if "time_limit" in spec:
        shared["time_limit_s"] = float(reader.number(spec["time_limit"], "time_limit", 1e-6,
                                                     1e6))
    shared["deterministic"] = not reader.flag(spec.get("wall_clock", False), "wall_clock")
    if "backend" in spec:
        backends = sorted({b for entry in ENTRIES.values() for b in entry.backends})
        shared["backend"] = reader.choice(spec["backend"], "backend", backends)
    if "interval" in spec:
        shared["interval_s"] = reader.within("interval", check_interval, reader.number(
            spec["interval"], "interval", 1.0, 1e9))
    if "batch" in spec:
        shared["batch_s"] = reader.within("batch", lambda v: check_period(v, "batch_s"),
                                          reader.number(spec["batch"], "batch", 1.0, 1e9))
    if "restart_penalty" in spec:
        shared["restart_penalty_s"] = float(reader.number(
            spec["restart_penalty"], "restart_penalty", 0, MAX_RESTART_PENALTY_S))
    if "prices" in spec:
        from hetsched.core.prices import parse_prices

        if isinstance(spec["prices"], str):  # "" is no price list (not the defaults)
            reader.text(spec["prices"], "prices", "TYPE=USD,... (USD per GPU-hour), e.g. "
                        "v100=2.48,k80=0.45, or a table {v100 = 2.48}")
        shared["prices"] = reader.within("prices", parse_prices, spec["prices"])
    if "start_latency" in spec:
        shared["start_latency_s"] = float(reader.number(
            spec["start_latency"], "start_latency", 0, MAX_RESTART_PENALTY_S))
    shared["lp_bound"] = reader.flag(spec.get("lp_bound", True), "lp_bound")
    if "jct_window" in spec:
        from hetsched.core.settings import parse_jct_window

        shared["jct_window"] = reader.within("jct_window", parse_jct_window,
                                             spec["jct_window"])
    return shared


def _policies(reader: SpecReader, value: object
              ) -> tuple[tuple[str, ...], tuple[PolicyVariant, ...]]:
    """The labels in order and the labelled policies with settings."""
    from hetsched.replaying import rolling_policy

    labels: list[str] = []
    variants: list[PolicyVariant] = []
    for index, item in enumerate(reader.items(value, "policies", "policy names or tables")):
        key = f"policies[{index}]"
        if not isinstance(item, str | dict):
            raise reader.error("bad policy", key, item, "a policy name, or a table with its "
                               "name, a label and its settings")
        entry: dict[str, Any] = {"name": item} if isinstance(item, str) else item
        name = reader.text(entry.get("name"), f"{key}.name", "a policy name")
        params = {k: v for k, v in entry.items() if k not in POLICY_KEYS}
        for setting, setting_value in params.items():
            if isinstance(setting_value, list | dict):
                raise reader.error("bad value", f"{key}.{setting}", setting_value,
                                   "a number, a string or true/false")
        try:
            rolling_policy(name, params=params)
        except (InputError, TypeError, ValueError) as exc:
            where = key if isinstance(item, str) else f"{key}.{_bad_key(exc, params)}"
            raise reader.error(getattr(exc, "problem", str(exc)), where,
                               getattr(exc, "value", None), getattr(exc, "expected", None)
                               ) from None
        label = entry.get("label", name if not params else None)
        if label is None:
            raise reader.error("a policy with settings needs a label", f"{key}.label",
                               expected="the name its rows carry in results.csv, e.g. "
                               f"{name}-{next(iter(params))}")
        if not isinstance(label, str) or not LABEL.fullmatch(label):
            raise reader.error("bad label", f"{key}.label", label,
                               "1-64 letters, digits, '.', '_', '+' or '-'")
        if label in labels:
            raise reader.error("two policies with one label", key, label,
                               "a distinct label for each policy")
        labels.append(label)
        if params or label != name:
            variants.append(PolicyVariant(label, name, tuple(sorted(params.items()))))
    return tuple(labels), tuple(variants)


def _bad_key(exc: Exception, params: Mapping[str, Any]) -> str:
    """The key of a policy table that an error is about (its ``name`` if none)."""
    path = getattr(exc, "path", None)
    return path if isinstance(path, str) and path in params else "name"


def _trace(reader: SpecReader, root: Path, value: object, key: str, spec: Mapping[str, Any],
           shared: Mapping[str, Any], labels: tuple[str, ...],
           variants: tuple[PolicyVariant, ...]) -> list[tuple[str, BenchSettings, str]]:
    """The benches of one trace table: one per cluster (its folder, its settings, the key
    of its cluster)."""
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.traces import FORMATS

    entry = reader.table(value, key, TRACE_KEYS)
    for required in ("path", "format"):
        if required not in entry:
            raise reader.error("missing key", f"{key}.{required}",
                               expected="path, format and cluster (or clusters)")
    trace = (root / reader.text(entry["path"], f"{key}.path", "a trace file")).resolve()
    if not trace.is_file():
        raise reader.error("no such trace file", f"{key}.path", str(trace),
                           "an existing file (relative paths: from root)")
    trace_format = reader.choice(entry["format"], f"{key}.format", list(FORMATS))
    if ("cluster" in entry) == ("clusters" in entry):
        raise reader.error("one of cluster or clusters", key, expected="cluster = 'SPEC' or "
                           "clusters = ['SPEC', ...]")
    specs = [entry["cluster"]] if "cluster" in entry else reader.items(
        entry["clusters"], f"{key}.clusters", "cluster specs")
    name = entry.get("name", trace.stem)
    if not isinstance(name, str) or not LABEL.fullmatch(name):
        raise reader.error("bad name", f"{key}.name", name,
                           "1-64 letters, digits, '.', '_', '+' or '-' (a folder name)")
    own: dict[str, Any] = {}
    for setting in ("limit_jobs", "deadline_fraction", "on_bad_row", *READING_KEYS):
        where = setting if setting not in entry else f"{key}.{setting}"
        found = entry.get(setting, spec.get(setting))
        if found is None:
            continue
        if setting == "limit_jobs":
            own[setting] = int(reader.number(found, where, 1, 10**9, integer=True))
        elif setting == "deadline_fraction":
            own[setting] = float(reader.number(found, where, 0, 1))
        elif setting == "on_bad_row":
            own[setting] = reader.choice(found, where, ("fatal", "skip"))
        else:
            own[setting] = reading_setting(reader, setting, found, where)
    if "throughput" in entry:
        throughput = (root / reader.text(entry["throughput"], f"{key}.throughput",
                                         "a file")).resolve()
        if not throughput.is_file():
            raise reader.error("no such throughput file", f"{key}.throughput",
                               str(throughput), "a profile or fitted model file")
        own["throughput"] = throughput
    for setting in ("tenants", "pairs"):
        if setting in entry or setting in spec:
            own[setting] = input_file(reader, root, setting,
                                       entry.get(setting, spec.get(setting)),
                                       f"{key}.{setting}" if setting in entry else setting)
    benches = []
    for index, cluster in enumerate(specs):
        where = f"{key}.cluster" if "cluster" in entry else f"{key}.clusters[{index}]"
        text = reader.text(cluster, where, "a cluster spec: v100=36,p100=36,k80=36, a "
                           "cluster JSON or openb:NODES.csv")
        reader.within(where, lambda t: parse_cluster(t, base_dir=root), text)
        absolute = _cluster_paths(text, root)
        folder = name if len(specs) == 1 else f"{name}/{_slug(text)}"
        settings = reader.within(key, lambda c, refs: bench_settings(
            trace=trace, trace_format=trace_format, cluster=c, policies=labels,
            variants=variants, workers=default_workers(), references=refs,
            **shared, **own), absolute,
            _references(reader, spec, labels, shared["loads"], folder))
        benches.append((folder, settings, where))
    return benches


def _references(reader: SpecReader, spec: Mapping[str, Any], labels: tuple[str, ...],
                loads: Sequence[float], folder: str) -> tuple[Reference, ...]:
    """The spec's references that apply to the bench ``folder`` (hetsched.bench.references)."""
    if "references" not in spec:
        return ()
    from hetsched.bench.references import parse_references

    try:
        return parse_references(spec["references"], labels, loads, folder)
    except InputError as error:
        raise reader.error(error.problem, error.path or "references", error.value,
                           error.expected) from None


def _cluster_paths(spec: str, root: Path) -> str:
    """A cluster spec with its file (a cluster JSON, ``openb:NODES.csv``) made absolute
    from ``root``, so the bench reads it wherever it runs."""
    text = spec.strip()
    if text.startswith("openb:"):
        return "openb:" + str((root / text.removeprefix("openb:").strip()).resolve())
    if text.endswith(".json") or (root / text).is_file():
        return str((root / text).resolve())
    return text


def _slug(text: str) -> str:
    """A cluster spec as a folder name: ``v100=36,k80=36`` -> ``v100_36_k80_36``."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", Path(text).name if "/" in text else text)[:64]


def run_sweep(sweep: Sweep, out: Path, *, engine: Engine | None = None,
              stream: TextIO | None = None, report: bool = True) -> list[BenchOutcome]:
    """Run the benches of ``sweep``, each into its folder under ``out``, their runs in one
    queue on ``engine`` (:func:`hetsched.bench.runner.run_benches`); a rerun resumes every bench.
    A spec is copied into ``out`` first (``sweep.toml``, :meth:`Sweep.copy_text`)."""
    benches = [(settings, out / name) for name, settings in sweep.benches]
    names = [name for name, _ in sweep.benches]
    if sweep.path is None:
        return run_benches(benches, engine=engine, stream=stream, report=report, names=names,
                           prefetched=sweep.prefetched or None)
    check_output_folder(out)
    with writing(out, "out", "the output folder"):
        out.mkdir(parents=True, exist_ok=True)
    with locked_folder(out):
        write_text(out / COPY, sweep.copy_text(), "out", COPY)
        return run_benches(benches, engine=engine, stream=stream, report=report, names=names,
                           prefetched=sweep.prefetched or None)
