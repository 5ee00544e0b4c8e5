"""Fitted step models as a JSON file (:func:`save_step_models`, :func:`load_step_models`):
what ``hetsched fit STEP_PROFILE -o FILE`` writes (docs/elastic.md, "Speed model with
communication")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.json_files import read_json
from hetsched.speeds.step_extrapolation import Extrapolation, StepModels
from hetsched.speeds.step_prior import NetworkPrior
from hetsched.speeds.steps import StepModel

FORMAT = "hetsched-step-models"
VERSION = 1
MODEL = ("step = (T_c^overlap + T_n^overlap)^(1/overlap); T_c = compute_base_s + "
         "compute_per_sample_s * local_bsz; T_n = single_sync_s on one GPU, node_sync_base_s "
         "+ node_sync_per_gpu_s * (n - 2) on one node, (network_sync_base_s + "
         "network_sync_per_gpu_s * (n - 2)) * (1 + nic_sharing * (k - 1)) * (1 + "
         "two_node_penalty * (k - 1) * [2 nodes]) on several; n GPUs, k on the fullest node")


def step_models_dict(models: StepModels, source: str = "",
                     extrapolation: Extrapolation | None = None) -> dict[str, Any]:
    """The JSON document of ``models`` (and ``extrapolation``'s figures, if given)."""
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION,
        "units": "seconds per iteration; local_bsz in samples per GPU",
        "model": MODEL, "source": source,
        "priors": {gpu: prior.as_dict() for gpu, prior in sorted(models.priors.items())},
        "models": [model.as_dict() for model in models.models],
    }
    if extrapolation is not None:
        doc["extrapolation"] = {
            "method": extrapolation.method,
            "overall": vars(extrapolation.error()),
            "job_types": {job: vars(extrapolation.error(job))
                          for job in extrapolation.job_types}}
    return doc


def save_step_models(models: StepModels, path: str | Path, source: str = "",
                     extrapolation: Extrapolation | None = None) -> None:
    """Write ``models`` as JSON (see :func:`step_models_dict`)."""
    text = json.dumps(step_models_dict(models, source, extrapolation), indent=1,
                      allow_nan=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


def _models_from_dict(doc: Any) -> StepModels:
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise InputError("not a step model file", path="$.format",
                         value=doc.get("format") if isinstance(doc, Mapping) else
                         type(doc).__name__, expected=f'"{FORMAT}" (written by hetsched fit)')
    if doc.get("version") != VERSION:
        raise InputError("unsupported step model file version", path="$.version",
                         value=doc.get("version"), expected=str(VERSION))
    priors_doc = doc.get("priors", {})
    if not isinstance(priors_doc, Mapping):
        raise InputError("wrong type", path="$.priors", value=type(priors_doc).__name__,
                         expected="an object of network priors by GPU type")
    priors = {}
    for gpu, item in priors_doc.items():
        try:
            priors[gpu] = NetworkPrior.from_dict(item)
        except InputError as exc:
            raise exc.at(f"$.priors[{gpu!r}]") from None
    items = doc.get("models")
    if not isinstance(items, list) or not items:
        raise InputError("no models", path="$.models", value=items,
                         expected="a non-empty list of step models")
    models: list[StepModel] = []
    for index, item in enumerate(items):
        try:
            models.append(StepModel.from_dict(item))
        except InputError as exc:
            raise exc.at(f"$.models[{index}]") from None
    return StepModels(tuple(models), priors)


def load_step_models(path: str | Path) -> StepModels:
    """Read a step model file; errors name the file and the JSON path."""
    file = str(path)
    doc = read_json(Path(path))
    try:
        return _models_from_dict(doc)
    except InputError as exc:
        raise exc.in_file(file) from None
