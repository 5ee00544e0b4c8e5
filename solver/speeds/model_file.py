"""The fitted throughput model as a JSON file (:func:`save_model`, :func:`load_model`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.json_files import read_json
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.speeds.model import FORMAT, VERSION, FitSettings, FittedThroughputModel, SeriesFit

log = logging.getLogger(__name__)


# --- persistence -----------------------------------------------------------------------


def save_model(model: FittedThroughputModel, path: str | Path) -> None:
    """Write ``model`` as a model file (JSON)."""
    Path(path).write_text(json.dumps(model.as_dict(), indent=1, allow_nan=False) + "\n",
                          encoding="utf-8")


def _field(doc: Mapping[str, Any], name: str, kind: type | tuple[type, ...], path: str,
           expected: str) -> Any:
    if name not in doc:
        raise InputError(f"missing field '{name}'", path=path, expected=expected)
    value = doc[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InputError("wrong type", path=f"{path}.{name}", value=value, expected=expected)
    return value


def model_from_dict(doc: Any, *, file: str = "<model>") -> FittedThroughputModel:
    """Build a model from a parsed model file, with errors naming file and JSON path."""
    try:
        return _model_from_dict(doc)
    except InputError as exc:
        raise exc.in_file(file) from None


def _model_from_dict(doc: Any) -> FittedThroughputModel:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError("not a throughput model file", path="$.format",
                         value=doc.get("format") if isinstance(doc, dict) else type(doc).__name__,
                         expected=f'"{FORMAT}" (a file written by hetsched fit)')
    if doc.get("version") != VERSION:
        raise InputError("unsupported model file version", path="$.version",
                         value=doc.get("version"), expected=str(VERSION))
    raw = _field(doc, "settings", dict, "$", "an object of fit settings")
    try:
        settings = FitSettings(**raw)
    except TypeError:
        raise InputError("unknown settings field", path="$.settings", value=sorted(raw),
                         expected="fields of FitSettings: " + ", ".join(FitSettings().as_dict())
                         ) from None
    except InputError as exc:
        raise exc.at("$.settings") from None
    gpu_types = _field(doc, "gpu_types", list, "$", "a list of GPU type names")
    families = _field(doc, "families", dict, "$", "an object job type -> family")
    for name in [*gpu_types, *families, *families.values()]:
        if not isinstance(name, str) or not name:
            raise InputError("bad name", path="$", value=name, expected="non-empty strings")
    series = {}
    for i, item in enumerate(_field(doc, "series", list, "$", "a list of series")):
        where = f"$.series[{i}]"
        if not isinstance(item, dict):
            raise InputError("wrong type", path=where, value=item, expected="an object")
        try:
            fit = SeriesFit(
                _field(item, "job_type", str, where, "a job type"),
                _field(item, "gpu_type", str, where, "a GPU type"),
                Placement(_field(item, "placement", str, where, "packed or spread")),
                tuple(_field(item, "coefficients", list, where, "a list of seconds")),
                tuple(tuple(p) if isinstance(p, list) else p
                      for p in item.get("corrections", [])),
                tuple(item.get("measured_counts", [])), tuple(item.get("shape_counts", [])),
                tuple(item.get("unsupported_counts", [])), item.get("unsupported_from"),
                str(item.get("note", "")))
        except ValueError as exc:
            error = exc if isinstance(exc, InputError) else InputError(
                "bad placement", path="placement", value=item.get("placement"),
                expected="packed or spread")
            raise error.at(where) from None
        if fit.key in series:
            raise InputError("duplicate series", path=where, value=list(fit.key),
                             expected="one series per (job_type, gpu_type, placement)")
        series[fit.key] = fit
    rows = []
    for i, row in enumerate(doc.get("data", [])):
        try:
            rows.append((row["job_type"], row["gpu_type"], row["num_gpus"],
                         Placement(row["placement"]), row["throughput"]))
        except (KeyError, TypeError, ValueError):
            raise InputError("bad data row", path=f"$.data[{i}]", value=row,
                             expected="{job_type, gpu_type, num_gpus, placement, throughput}"
                             ) from None
    ThroughputTable.from_rows(rows)  # validates the measurements
    source = doc.get("source") or {}
    return FittedThroughputModel(settings, series, families, tuple(gpu_types), tuple(rows),
                                 None, {str(k): str(v) for k, v in source.items()})


def load_model(path: str | Path) -> FittedThroughputModel:
    """Read a model file written by :func:`save_model` (``hetsched fit``)."""
    path = Path(path)
    return model_from_dict(read_json(path), file=str(path))


