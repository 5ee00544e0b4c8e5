"""How far the step model extrapolates: fitted on one node, asked for several.

:func:`extrapolate` fits each job type on its one-node rows only (Pollux's: placements of
one digit, at most 4 GPUs) and predicts every row on two nodes or more (its multi-node
placements and its scalability rows, 6-64 GPUs). Rows on one node cannot tell the
network across nodes, so the multi-node coefficients come from

* ``calibrated``: a :class:`~hetsched.speeds.step_prior.NetworkPrior` calibrated on the
  *other* job types of the same GPU type (leave one job type out: nothing measured of the
  predicted job type across nodes enters its prediction; per trainable parameter for job
  types that state theirs, else as a ratio of the within-node sync), or
* ``pollux-rule``: Pollux's own rule, across nodes 1.1 times the within-node sync.

Beside it, the *ceiling*: each job type predicted with its own multi-node sync base
(fitted on the very rows predicted, the prior's other factors kept), the best any prior
of that base could do; on Pollux's models a median 6.7 % and a p90 17.8 %.

A row fails when its absolute percentage error exceeds :data:`FAILURE_APE`; its reason
says which part of the step was wrong (the exposed sync or the compute time), and flags a
measurement its own permutations contradict (the same GPUs per node in another order,
same batch, measured more than 20 % apart). :func:`fit_step_models` fits every job type
of a profile for use, with the calibrated prior for those never measured across nodes.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from hetsched.core.errors import InputError
from hetsched.speeds.step_fit import (
    calibrate_network,
    calibrates,
    fit_step_model,
    group_rows,
    own_cross_ratio,
    own_network_base,
)
from hetsched.speeds.step_prior import NetworkPrior
from hetsched.speeds.steps import StatedError, StepModel, StepRow

log = logging.getLogger(__name__)

#: A row fails beyond this absolute percentage error of its step time.
FAILURE_APE = 20.0
Method = Literal["calibrated", "pollux-rule"]


@dataclass(frozen=True)
class PredictedRow:
    """A measured row and the step and exposed sync time (s) predicted for it; ``reason``
    says why it fails (``""`` if it does not)."""

    row: StepRow
    step_time: float
    sync_time: float
    reason: str = ""

    @property
    def ape(self) -> float:
        """Absolute percentage error of the step time (%)."""
        return abs(self.step_time - self.row.step_time) / self.row.step_time * 100.0


@dataclass(frozen=True)
class Extrapolation:
    """Every multi-node row predicted from one-node fits (module notes), and the prior
    each job type was predicted with (none under Pollux's rule). ``own_ratio``: each job
    type's own cross ratio, fitted on its multi-node rows with the prior's other factors,
    to set beside the prior's (what the prior would have needed); ``network_base``: each
    job type's multi-node sync base (s) as predicted and its own, so fitted; ``ceiling``:
    the step time of each prediction with that own base (module notes)."""

    method: Method
    predictions: tuple[PredictedRow, ...]
    priors: Mapping[str, NetworkPrior] = field(default_factory=dict)
    own_ratio: Mapping[str, float] = field(default_factory=dict)
    also_fitted: tuple[tuple[int, ...], ...] = ()
    network_base: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    ceiling: tuple[float, ...] = ()

    @property
    def job_types(self) -> tuple[str, ...]:
        """The job types predicted, sorted."""
        return tuple(sorted({p.row.job_type for p in self.predictions}))

    def error(self, job_type: str | None = None) -> StatedError:
        """Median and p90 APE over every predicted row (of ``job_type`` only if given)."""
        chosen = [p for p in self.predictions if job_type in (None, p.row.job_type)]
        if not chosen:
            raise InputError("no predicted row", path="job_type", value=job_type,
                             expected="one of " + ", ".join(self.job_types))
        fitted = "one node" + (" and " + ", ".join(
            "".join(map(str, p)) for p in self.also_fitted) if self.also_fitted else "")
        return StatedError.of(np.array([p.step_time for p in chosen]),
                              np.array([p.row.step_time for p in chosen]),
                              f"fitted on {fitted}, {self.method} across nodes")

    def ceiling_error(self, job_type: str | None = None) -> StatedError | None:
        """:meth:`error` of the ceiling (``None`` if it was not computed: Pollux's rule)."""
        if len(self.ceiling) != len(self.predictions):
            return None
        chosen = [(c, p) for c, p in zip(self.ceiling, self.predictions, strict=True)
                  if job_type in (None, p.row.job_type)]
        return StatedError.of(np.array([c for c, _ in chosen]),
                              np.array([p.row.step_time for _, p in chosen]),
                              "each job type's own multi-node sync base")

    def failures(self) -> tuple[PredictedRow, ...]:
        """The rows beyond :data:`FAILURE_APE`, worst first."""
        return tuple(sorted((p for p in self.predictions if p.reason),
                            key=lambda p: -p.ape))


def _permutation_medians(rows: Sequence[StepRow]) -> dict[tuple[object, ...], float]:
    """The median step time of the rows with the same sorted placement and batch."""
    groups: dict[tuple[object, ...], list[float]] = defaultdict(list)
    for row in rows:
        groups[(row.job_type, row.gpu_type, tuple(sorted(row.placement)),
                row.local_bsz)].append(row.step_time)
    return {key: float(np.median(times)) for key, times in groups.items() if len(times) > 2}


def _reason(row: StepRow, step: float, sync: float, mates: float | None) -> str:
    if abs(step - row.step_time) / row.step_time * 100.0 <= FAILURE_APE:
        return ""
    if mates is not None and abs(row.step_time - mates) / mates > 0.2 and \
            abs(step - mates) / mates * 100.0 <= FAILURE_APE:
        return (f"outlier: its permutations measure {mates:.3g} s, the prediction is within "
                f"{FAILURE_APE:g} % of that")
    compute = step - sync
    if abs(sync - row.sync_time) >= abs(compute - row.compute_time):
        word = "over" if sync > row.sync_time else "under"
        return f"sync {word}-predicted: {sync:.3g} s against {row.sync_time:.3g} s measured"
    word = "over" if compute > row.compute_time else "under"
    return (f"compute {word}-predicted: {compute:.3g} s against {row.compute_time:.3g} s "
            "measured")


def _predict(model: StepModel, rows: Sequence[StepRow],
             mates: Mapping[tuple[object, ...], float]) -> list[PredictedRow]:
    steps = model.predict_rows(rows)
    computes = model.compute_base_s + model.compute_per_sample_s * np.array(
        [row.local_bsz for row in rows])
    out = []
    for row, step, compute in zip(rows, steps, computes, strict=True):
        key = (row.job_type, row.gpu_type, tuple(sorted(row.placement)), row.local_bsz)
        sync = float(step - compute)
        out.append(PredictedRow(row, float(step), sync,
                                _reason(row, float(step), sync, mates.get(key))))
    return out


def extrapolate(rows: Sequence[StepRow], method: Method = "calibrated",
                also_fitted: Sequence[tuple[int, ...]] = ()) -> Extrapolation:
    """Fit each job type of ``rows`` on its one-node rows (and its rows on the placements
    ``also_fitted``, then not predicted) and predict its multi-node ones (module notes).
    Job types with no row on one node, or none on several, are left out, and under
    ``calibrated`` those with no other job type of their GPU type to calibrate the network
    on (one measured on several GPUs of one node and on several nodes); nothing left to
    predict is an error saying which of the two it lacks."""
    fitted_too = {tuple(placement) for placement in also_fitted}
    if method not in ("calibrated", "pollux-rule"):
        raise InputError("bad method", path="method", value=method,
                         expected="calibrated or pollux-rule")
    groups = group_rows(rows)
    mates = _permutation_medians(rows)
    predictions: list[PredictedRow] = []
    priors: dict[str, NetworkPrior] = {}
    own: dict[str, float] = {}
    bases: dict[str, tuple[float, float]] = {}
    ceiling: list[float] = []
    alone: list[tuple[str, str]] = []
    for (job_type, gpu_type), group in groups.items():
        node_rows = [row for row in group if row.num_nodes == 1 or
                     row.placement in fitted_too]
        spread = [row for row in group if row.num_nodes > 1 and
                  row.placement not in fitted_too]
        if not node_rows or not spread:
            log.info("%s on %s: not predicted (no %s row)", job_type, gpu_type,
                     "one-node" if not node_rows else "multi-node")
            continue
        prior = None
        if method == "calibrated":
            others = {job: other for (job, gpu), other in groups.items()
                      if gpu == gpu_type and job != job_type}
            if not any(calibrates(other) for other in others.values()):
                log.info("%s on %s: not predicted (no other job type of %s to calibrate "
                         "the network on)", job_type, gpu_type, gpu_type)
                alone.append((job_type, gpu_type))
                continue
            prior = calibrate_network([row for other in others.values() for row in other])
            priors[job_type] = prior
        model = fit_step_model(node_rows, prior)
        predictions.extend(_predict(model, spread, mates))
        if prior is not None:
            base = own_network_base(group, prior)
            own[job_type] = own_cross_ratio(group, prior, base)
            bases[job_type] = (model.network_sync_base_s, base)
            ceiling.extend(float(t) for t in replace(
                model, network_sync_base_s=base,
                network_sync_per_gpu_s=prior.retrogression * base).predict_rows(spread))
        log.info("%s on %s: %s", job_type, gpu_type, StatedError.of(
            model.predict_rows(spread), np.array([r.step_time for r in spread]), method))
    if alone and not predictions:
        job_type, gpu_type = alone[0]
        raise InputError(f"no job type on {gpu_type} other than {job_type} is measured on "
                         "several GPUs of one node and across nodes: the network that "
                         f"predicts {job_type} across nodes is calibrated on those (leave "
                         "one job type out)", path="rows",
                         expected="two job types or more of one GPU type with rows on "
                         "several GPUs of one node and on several nodes (or method "
                         "pollux-rule)")
    if not predictions:
        raise InputError("nothing to extrapolate", path="rows",
                         expected="a job type with rows on one node and on several")
    return Extrapolation(method, tuple(predictions), priors, own,
                         tuple(sorted(fitted_too)), bases, tuple(ceiling))


def report_lines(extrapolation: Extrapolation, baseline: Extrapolation | None = None,
                 worst: int = 10, ratio_only: Extrapolation | None = None) -> list[str]:
    """The extrapolation figures as ``hetsched fit --report`` prints them; ``baseline``
    (Pollux's rule) and ``ratio_only`` (the rows' model parameters left out) beside."""
    overall = extrapolation.error()
    sized = any(prior.sized for prior in extrapolation.priors.values())
    also = "".join(f" and {''.join(map(str, p))}" for p in extrapolation.also_fitted)
    lines = [f"extrapolation: fitted on one-node rows{also}, predicting {overall.rows} rows "
             f"on several nodes of {len(extrapolation.job_types)} job types",
             "network across nodes: " + (
                 "calibrated on the other job types (leave one job type out)"
                 + (", per model parameter where stated" if sized else "")
                 if extrapolation.method == "calibrated" else
                 "Pollux's rule (1.1 x the within-node sync)"),
             f"median APE: {overall.median_ape:.1f}%", f"p90 APE: {overall.p90_ape:.1f}%"]
    ceiling = extrapolation.ceiling_error()
    if ceiling is not None:
        lines.append("ceiling (each job type's own multi-node sync base, fitted on the rows "
                     f"predicted): median APE {ceiling.median_ape:.1f}%, p90 APE "
                     f"{ceiling.p90_ape:.1f}%")
    lines.append(f"per job type (median / p90 APE, rows failing > {FAILURE_APE:g}%"
                 + (", multi-node sync base: predicted / its own" if
                    extrapolation.network_base else "") + "):")
    failures = extrapolation.failures()
    for job_type in extrapolation.job_types:
        error = extrapolation.error(job_type)
        failing = sum(1 for p in failures if p.row.job_type == job_type)
        base = ""
        if job_type in extrapolation.network_base:
            predicted, own = extrapolation.network_base[job_type]
            base = f", {predicted:.3g} s / {own:.3g} s"
        lines.append(f"  {job_type}: {error.median_ape:.1f}% / {error.p90_ape:.1f}%, "
                     f"{failing} of {error.rows} failing{base}")
    if ratio_only is not None:
        ratio = ratio_only.error()
        lines.append("the network as a ratio of the within-node sync instead (no model "
                     f"parameters): median APE {ratio.median_ape:.1f}%, p90 APE "
                     f"{ratio.p90_ape:.1f}%")
    if baseline is not None:
        rule = baseline.error()
        lines.append(f"Pollux's rule instead: median APE {rule.median_ape:.1f}%, p90 APE "
                     f"{rule.p90_ape:.1f}%")
    kinds: dict[str, int] = defaultdict(int)
    for p in failures:
        kinds[p.reason.split(":")[0]] += 1
    lines.append(f"failing rows: {len(failures)} of {overall.rows} ("
                 + (", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "none")
                 + ")")
    if failures:
        lines.append(f"worst {min(worst, len(failures))}:")
        lines.extend(f"  {p.row.job_type} {p.row.placement_text} at local batch "
                     f"{p.row.local_bsz:g}: {p.row.step_time:.3g} s measured, "
                     f"{p.step_time:.3g} s predicted ({p.ape:.0f}%): {p.reason} "
                     f"[{p.row.source}]" for p in failures[:worst])
    return lines


@dataclass(frozen=True)
class StepModels:
    """Fitted step models, one per (job type, GPU type), and the network prior of each
    GPU type that had job types to calibrate it on."""

    models: tuple[StepModel, ...]
    priors: Mapping[str, NetworkPrior] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen = set()
        for model in self.models:
            key = (model.job_type, model.gpu_type)
            if key in seen:
                raise InputError("two models of one job type and GPU type", path="models",
                                 value=list(key), expected="one model per pair")
            seen.add(key)

    def model(self, job_type: str, gpu_type: str) -> StepModel:
        """The model of ``job_type`` on ``gpu_type``; an InputError if there is none."""
        for model in self.models:
            if (model.job_type, model.gpu_type) == (job_type, gpu_type):
                return model
        raise InputError("no step model", path="job_type", value=[job_type, gpu_type],
                         expected="one of " + ", ".join(
                             f"{m.job_type} on {m.gpu_type}" for m in self.models[:5]))


def fit_step_models(rows: Sequence[StepRow], extrapolation: Extrapolation | None = None
                    ) -> StepModels:
    """A model per (job type, GPU type) of ``rows``: job types measured across nodes on
    their own rows alone; the others with the GPU type's network prior, calibrated on the job
    types measured across nodes, whose ``transfer_error`` is ``extrapolation``'s error
    over them (computed here when not given and two job types or more calibrate it), or
    with Pollux's rule when no job type of the GPU type was measured across nodes."""
    groups = group_rows(rows)
    priors: dict[str, NetworkPrior] = {}
    for gpu_type in sorted({gpu for _, gpu in groups}):
        own = [row for (_, gpu), group in groups.items() if gpu == gpu_type for row in group]
        try:
            prior = calibrate_network(own)
        except InputError:
            continue
        if len(prior.job_types) > 1:
            measured = extrapolation if extrapolation is not None else extrapolate(own)
            chosen = [p for p in measured.predictions if p.row.gpu_type == gpu_type]
            if chosen:
                prior = replace(prior, transfer_error=StatedError.of(
                    np.array([p.step_time for p in chosen]),
                    np.array([p.row.step_time for p in chosen]),
                    "fitted on one node, calibrated on the other job types"))
        priors[gpu_type] = prior
    models = tuple(fit_step_model(group, None if any(r.num_nodes > 1 for r in group) else
                                  priors.get(gpu)) for (_, gpu), group in groups.items())
    return StepModels(models, priors)
