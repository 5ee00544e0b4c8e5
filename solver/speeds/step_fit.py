"""Fitting the step-time model (:mod:`hetsched.speeds.steps`) to measured step and sync
times, and the network prior that stands in for multi-node rows a job type lacks.

:func:`fit_step_model` fits one job type on one GPU type by least squares on the logs
(relative errors) of two measured quantities per row, as Pollux fits its model: the
compute time ``step_time - sync_time`` against ``T_c(b)`` and the step time against ``T``.
Every coefficient is kept >= 0 (fitted as an exponential), the overlap in [1, 10]; the
one-GPU sync is the median measured, not fitted. A coefficient the rows cannot tell apart
is not fitted (Pollux fixes them the same way):

* with one local batch only, the compute time is split half fixed, half per sample
  (Pollux's rule, optimistic about larger batches);
* the per-GPU slopes need rows at two GPU counts or more (on one node, across nodes);
  ``nic_sharing`` needs rows on three nodes or more with two fullest-node counts ``k``
  or more; ``two_node_penalty`` two-node rows with two ``k`` or more.

What is not fitted comes from a :class:`NetworkPrior` when one is given, else from
Pollux's rule: no NIC sharing, no two-node penalty, and with no multi-node row, across
nodes 1.1 times the within-node sync (``alpha_n = 1.1 alpha_r``, ``beta_n = 1.1
beta_r``), the overlap fitted on one node alone.

Rows on one node cannot tell the network across nodes (docs/elastic.md: the ratio of the
two is 1.2 for Pollux's deepspeech2, 2.8 for its imagenet). A :class:`NetworkPrior` is that
network, calibrated by :func:`calibrate_network` on job types measured across nodes on the
same GPU type: the overlap, the NIC-sharing, two-node and retrogression factors
and the ``cross_ratio`` of the multi-node sync base to the within-node sync at the
fullest node measured, all fitted to predict those job types' multi-node rows from their
one-node fits as the prior will be used. When every job type it is calibrated on states
its ``model_parameters``, the multi-node sync base is instead ``seconds_per_parameter *
model_parameters + node_sync_weight * within-node sync``, the two fitted with the rest
(the cross ratio then fitted alone with the same factors, for job types that state no
size). A ring across nodes carries the whole gradient through each node's network card
(the first term: its size over the network's bandwidth) and still runs through the
node's own links (the second); on Pollux's T4 nodes 8.2-8.7 ns per parameter and 0.66-0.79
of the within-node sync, calibrated on any five of its six models, where the cross ratio
alone needs 1.2 for deepspeech2 and 2.8 for imagenet (deepspeech2's GRUs synchronise as
slowly within a node as bert, with 2.7 times fewer parameters). Fitted on one node, the
sixth model's multi-node rows are then predicted with a median APE of 7.6 % and a p90 of
19.4 % (docs/elastic.md).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_TIME_S
from hetsched.speeds.settings import MAX_GPUS
from hetsched.speeds.step_prior import MAX_PRIOR_VALUE, NetworkPrior, network_base
from hetsched.speeds.steps import (
    COEFFICIENTS,
    OVERLAP_RANGE,
    Array,
    CrossNodeBasis,
    StatedError,
    StepModel,
    StepRow,
    placement_features,
    step_times,
)

log = logging.getLogger(__name__)

#: The fitted parameters: the model's coefficients with the multi-node per-GPU slope as a
#: ratio to the multi-node base (``retrogression``), so that a prior can carry it.
PARAMETERS = ("compute_base_s", "compute_per_sample_s", "single_sync_s", "node_sync_base_s",
              "node_sync_per_gpu_s", "network_sync_base_s", "retrogression", "nic_sharing",
              "two_node_penalty", "overlap")
#: Pollux's rule: the multi-node sync of a job type never measured there, as a multiple of
#: its within-node sync (adaptdl's ``fit_perf_params``).
POLLUX_CROSS_NODE_FACTOR = 1.1
#: Starting overlaps when the overlap is fitted (the best of the fits is kept).
_OVERLAP_STARTS = (1.3, 2.0, 4.0)
#: The overlaps a network prior is calibrated at (the best is kept).
OVERLAP_GRID = (1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.3, 2.7, 3.2, 4.0, 5.0, 7.0, 10.0)
#: The logs of the largest values the fits may reach: the ranges the model and the prior
#: accept (a multi-node sync measured at 3 and 4 GPUs only, rising steeply, drives its
#: base at 2 GPUs towards 0 and the retrogression, slope over base, without end).
_LOG_MAX_TIME = math.log(MAX_TIME_S)
_LOG_LIMITS = dict.fromkeys(("retrogression", "nic_sharing", "two_node_penalty",
                             "cross_ratio", "seconds_per_parameter", "node_sync_weight"),
                            math.log(MAX_PRIOR_VALUE))


@dataclass(frozen=True)
class _Data:
    """The rows as arrays."""

    gpus: Array
    nodes: Array
    most: Array
    local_bsz: Array
    step: Array
    compute: Array

    @classmethod
    def of(cls, rows: Sequence[StepRow]) -> _Data:
        gpus, nodes, most = placement_features([row.placement for row in rows])
        return cls(gpus, nodes, most, np.array([r.local_bsz for r in rows], dtype=float),
                   np.array([r.step_time for r in rows], dtype=float),
                   np.array([r.compute_time for r in rows], dtype=float))


def _coefficients(values: Mapping[str, float]) -> list[float]:
    """The model's coefficients from :data:`PARAMETERS` values."""
    return [values["compute_base_s"], values["compute_per_sample_s"], values["single_sync_s"],
            values["node_sync_base_s"], values["node_sync_per_gpu_s"],
            values["network_sync_base_s"],
            values["retrogression"] * values["network_sync_base_s"], values["nic_sharing"],
            values["two_node_penalty"], values["overlap"]]


def _encode(name: str, value: float) -> float:
    if name == "overlap":
        low, high = OVERLAP_RANGE
        share = min(max((value - low) / (high - low), 1e-6), 1 - 1e-6)
        return math.log(share / (1 - share))
    return math.log(max(value, 1e-12))


def _decode(name: str, value: float) -> float:
    if name == "overlap":
        low, high = OVERLAP_RANGE
        return low + (high - low) / (1.0 + math.exp(-value))
    return math.exp(min(value, _LOG_LIMITS.get(name, _LOG_MAX_TIME)))


def _least_squares(data: _Data, start: Mapping[str, float], free: Sequence[str]
                   ) -> tuple[dict[str, float], float]:
    """The fitted values (``free`` ones fitted from ``start``, the others as given) and
    the sum of squared log residuals."""
    values = dict(start)

    def residuals(x: Array) -> Array:
        for name, value in zip(free, x, strict=True):
            values[name] = _decode(name, float(value))
        compute, step = step_times(_coefficients(values), data.gpus, data.nodes, data.most,
                                   data.local_bsz)
        # a trial point whose times underflow to 0 is not finite: the optimiser steps back
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.concatenate([np.log(compute) - np.log(data.compute),
                                   np.log(step) - np.log(data.step)])

    if free:
        solution = least_squares(residuals, np.array([_encode(n, start[n]) for n in free]),
                                 method="trf", max_nfev=400 * len(free))
        x = solution.x
    else:
        x = np.array([])
    cost = float(np.sum(residuals(x) ** 2))
    return dict(values), cost


def _initial(rows: Sequence[StepRow], data: _Data) -> dict[str, float]:
    """Starting values from the rows: a line through the compute times, median syncs."""
    slope, base = np.polyfit(data.local_bsz, data.compute, 1) if len(
        set(data.local_bsz)) > 1 else (0.5 * float(np.mean(data.compute / data.local_bsz)),
                                       0.5 * float(np.mean(data.compute)))
    scale = float(np.median(data.compute))
    syncs = defaultdict(list)
    for row in rows:
        kind = "single" if row.num_gpus == 1 else "node" if row.num_nodes == 1 else "network"
        syncs[kind].append(row.sync_time)
    node = 2 * float(np.median(syncs["node"])) if syncs["node"] else 0.1 * scale
    # the floors are relative to the compute time, so that the units do not matter
    floor = min(1e-6, 1e-6 * scale)
    return {"compute_base_s": max(float(base), 0.05 * scale),
            "compute_per_sample_s": max(float(slope), 1e-4 * scale / max(
                float(np.max(data.local_bsz)), 1.0)),
            "single_sync_s": float(np.median(syncs["single"])) if syncs["single"] else 0.0,
            "node_sync_base_s": max(node, floor),
            "node_sync_per_gpu_s": max(0.1 * node, floor),
            "network_sync_base_s": max(1.5 * float(np.median(syncs["network"])) if
                                       syncs["network"] else 2 * node, floor),
            "retrogression": 0.02, "nic_sharing": 0.05, "two_node_penalty": 0.1,
            "overlap": 2.0}


def _identifiable(rows: Sequence[StepRow]) -> set[str]:
    """The parameters the rows can tell (module notes; the overlap is decided apart)."""
    free = {"compute_base_s", "compute_per_sample_s"}
    if len({row.local_bsz for row in rows}) < 2:
        free.discard("compute_base_s")
    node_counts = {row.num_gpus for row in rows if row.num_nodes == 1 and row.num_gpus > 1}
    if node_counts:
        free.add("node_sync_base_s")
    if len(node_counts) > 1:
        free.add("node_sync_per_gpu_s")
    spread = [row for row in rows if row.num_nodes > 1]
    if spread:
        free.add("network_sync_base_s")
    if len({row.num_gpus for row in spread}) > 1:
        free.add("retrogression")
    # the fullest node's count k: on three nodes or more it tells the NIC sharing; on two
    # nodes the two-node penalty (with the NIC sharing known from more nodes or a prior)
    if len({max(row.placement) for row in spread if row.num_nodes > 2}) > 1:
        free.add("nic_sharing")
    if len({max(row.placement) for row in spread if row.num_nodes == 2}) > 1:
        free.add("two_node_penalty")
    return free


def _fit(rows: Sequence[StepRow], fixed: Mapping[str, float]) -> dict[str, float]:
    """The parameters of ``rows``: every identifiable one not in ``fixed`` fitted, the
    others from ``fixed``, else 0 (the overlap: fitted unless fixed)."""
    data = _Data.of(rows)
    start = _initial(rows, data)
    free = [name for name in PARAMETERS if name in _identifiable(rows) and name not in fixed]
    for name in PARAMETERS:
        if name in fixed:
            start[name] = fixed[name]
        elif name not in free and name not in ("overlap", "single_sync_s"):
            start[name] = 0.0
    if "compute_base_s" not in free and "compute_base_s" not in fixed:
        # one local batch: half of the compute time fixed, the rest fitted per sample
        start["compute_base_s"] = 0.5 * float(np.mean(data.compute))
    if "overlap" in fixed:
        return _least_squares(data, start, free)[0]
    best: tuple[dict[str, float], float] | None = None
    for overlap in _OVERLAP_STARTS:
        fitted = _least_squares(data, {**start, "overlap": overlap}, [*free, "overlap"])
        if best is None or fitted[1] < best[1] - 1e-12:
            best = fitted
    assert best is not None
    return best[0]


def _group(rows: Iterable[StepRow]) -> dict[tuple[str, str], list[StepRow]]:
    groups: dict[tuple[str, str], list[StepRow]] = defaultdict(list)
    for row in rows:
        groups[(row.job_type, row.gpu_type)].append(row)
    return dict(groups)


def _check_rows(rows: Sequence[StepRow]) -> tuple[str, str]:
    if not rows:
        raise InputError("no step rows", path="rows", value=[],
                         expected="at least one measured step time")
    for index, row in enumerate(rows):
        if not isinstance(row, StepRow):
            raise InputError("not a step row", path=f"rows[{index}]",
                             value=type(row).__name__, expected="a StepRow")
    keys = sorted(_group(rows))
    if len(keys) > 1:
        raise InputError("rows of several job types or GPU types", path="rows",
                         value=[f"{job} on {gpu}" for job, gpu in keys[:3]],
                         expected="the rows of one job type on one GPU type")
    model_parameters(rows)
    return keys[0]


def model_parameters(rows: Sequence[StepRow]) -> float | None:
    """The trainable parameters the rows of one job type state (``None`` if none does);
    an InputError if they state different ones."""
    stated = {row.model_parameters for row in rows} - {None}
    if len(stated) > 1:
        raise InputError("rows of one job type state different model_parameters",
                         path="rows", value=sorted(stated),
                         expected="one count of trainable parameters per job type")
    return stated.pop() if stated else None


def _node_sync_reference(values: Mapping[str, float], rows: Sequence[StepRow]) -> float:
    """Within-node sync (s, no overlap) at the most GPUs the rows put on one node."""
    counts = [row.num_gpus for row in rows if row.num_nodes == 1 and row.num_gpus > 1]
    if not counts:
        return 0.0
    return values["node_sync_base_s"] + values["node_sync_per_gpu_s"] * (max(counts) - 2)


def _error(coefficients: Sequence[float], rows: Sequence[StepRow], basis: str
           ) -> StatedError:
    """The error of the step times ``coefficients`` give for ``rows``."""
    gpus, nodes, most = placement_features([row.placement for row in rows])
    predicted = step_times(coefficients, gpus, nodes, most,
                           np.array([row.local_bsz for row in rows], dtype=float))[1]
    return StatedError.of(predicted, np.array([row.step_time for row in rows]), basis)


def _model(job_type: str, gpu_type: str, values: Mapping[str, float],
           rows: Sequence[StepRow], cross_node: CrossNodeBasis,
           network_error: StatedError | None, max_gpus: int) -> StepModel:
    coefficients = _coefficients(values)
    node_rows = [row for row in rows if row.num_nodes == 1]
    node_error = _error(coefficients, node_rows, "in-sample, one node") if node_rows else \
        _error(coefficients, rows, "in-sample, every row")
    if cross_node == "measured":
        network_error = _error(coefficients, [row for row in rows if row.num_nodes > 1],
                               "in-sample, several nodes")
    return StepModel(job_type, gpu_type, **dict(zip(COEFFICIENTS, coefficients, strict=True)),
                     local_bsz_range=(min(r.local_bsz for r in rows),
                                      max(r.local_bsz for r in rows)),
                     cross_node=cross_node, node_error=node_error,
                     network_error=network_error, max_gpus=max_gpus)


def fit_step_model(rows: Sequence[StepRow], prior: NetworkPrior | None = None, *,
                   max_gpus: int = MAX_GPUS, pollux_form: bool = False) -> StepModel:
    """The step model of one job type on one GPU type fitted to ``rows`` (module notes).

    With multi-node rows, every identifiable coefficient is fitted (``cross_node``
    ``measured``); the others, and the overlap, come from ``prior`` if given (a few
    multi-node rows tell the overlap worse than the prior: one two-node placement added to
    the one-node rows of Pollux's models predicts the rest with a p90 of 21.3 % with the
    prior's overlap, 22.3 % with its own). Without, the one-node rows are fitted and the
    multi-node coefficients come from ``prior`` (``calibrated``: the overlap too, before
    fitting) or Pollux's rule (``pollux-rule``, no stated error). ``pollux_form``: the
    NIC-sharing and two-node factors held at 0, Pollux's own form (for comparisons).
    """
    job_type, gpu_type = _check_rows(rows)
    if prior is not None and not isinstance(prior, NetworkPrior):
        raise InputError("bad prior", path="prior", value=type(prior).__name__,
                         expected="a NetworkPrior or None")
    fixed = {} if prior is None else {
        name: value for name, value in _prior_factors(prior).items() if name != "overlap"}
    if any(row.num_nodes > 1 for row in rows):
        identifiable = _identifiable(rows)
        fixed = {k: v for k, v in fixed.items() if k not in identifiable}
        if pollux_form:
            fixed.update(nic_sharing=0.0, two_node_penalty=0.0)
        values = _fit(rows, fixed if prior is None else {**fixed, "overlap": prior.overlap})
        return _model(job_type, gpu_type, values, rows, "measured", None, max_gpus)
    if prior is None:
        values = _fit(rows, {})
        values["network_sync_base_s"] = POLLUX_CROSS_NODE_FACTOR * values["node_sync_base_s"]
        values["retrogression"] = (values["node_sync_per_gpu_s"] / values["node_sync_base_s"]
                                   if values["node_sync_base_s"] > 0 else 0.0)
        return _model(job_type, gpu_type, values, rows, "pollux-rule", None, max_gpus)
    if pollux_form:
        fixed.update(nic_sharing=0.0, two_node_penalty=0.0)
    values = _fit(rows, {**fixed, "overlap": prior.overlap})
    reference = _node_sync_reference(values, rows)
    size = model_parameters(rows)
    if reference <= 0 and (size is None or not prior.sized):
        log.warning("%s on %s: no multi-GPU row on one node, so the network prior has "
                    "nothing to scale; multi-node sync taken as 0", job_type, gpu_type)
    values["network_sync_base_s"] = prior.network_base(reference, size)
    return _model(job_type, gpu_type, values, rows, "calibrated", prior.transfer_error,
                  max_gpus)


#: The network prior's fitted values, as ratio (every job type) or sized (module notes).
_RATIO_FORM = ("cross_ratio", "retrogression", "nic_sharing", "two_node_penalty")
_SIZED_FORM = ("seconds_per_parameter", "node_sync_weight", "retrogression", "nic_sharing",
               "two_node_penalty")
_TRANSFER_STARTS = {"cross_ratio": 2.0, "seconds_per_parameter": 1e-8,
                    "node_sync_weight": 0.5, "retrogression": 0.02, "nic_sharing": 0.05,
                    "two_node_penalty": 0.1}


@dataclass(frozen=True)
class _Part:
    """One job type as a network prior is calibrated on it: its one-node fit, its
    within-node sync reference, its stated parameters and its multi-node rows."""

    values: dict[str, float]
    reference: float
    model_parameters: float | None
    data: _Data


def _transfer_fit(parts: Sequence[_Part], free: Sequence[str],
                  fixed: Mapping[str, float]) -> tuple[dict[str, float], float]:
    """The ``free`` network values (of :data:`_RATIO_FORM` or :data:`_SIZED_FORM`, the
    others ``fixed``) that best predict the multi-node step times of ``parts`` from their
    one-node fits, each job type weighing the same; and the cost (sum of squared log
    residuals)."""

    limits = np.array([_LOG_LIMITS[name] for name in free])

    def values(x: Array) -> dict[str, float]:
        return {**fixed, **{name: float(value) for name, value in
                            zip(free, np.exp(np.minimum(x, limits)), strict=True)}}

    def residuals(x: Array) -> Array:
        network = values(x)
        out = []
        for part in parts:
            coefficients = _coefficients({
                **part.values, "retrogression": network["retrogression"],
                "nic_sharing": network["nic_sharing"],
                "two_node_penalty": network["two_node_penalty"],
                "network_sync_base_s": network_base(network, part.reference,
                                                     part.model_parameters)})
            step = step_times(coefficients, part.data.gpus, part.data.nodes, part.data.most,
                              part.data.local_bsz)[1]
            with np.errstate(divide="ignore", invalid="ignore"):
                out.append((np.log(step) - np.log(part.data.step))
                           / math.sqrt(len(part.data.step)))
        return np.concatenate(out)

    solution = least_squares(residuals, np.log([_TRANSFER_STARTS[n] for n in free]),
                             method="trf")
    return values(solution.x), float(np.sum(solution.fun ** 2))


def calibrate_network(rows: Sequence[StepRow]) -> NetworkPrior:
    """The network prior that best carries the job types of ``rows`` from one node to
    several (module notes); job types with no row on one node, or none on several, are
    left out. Calibrated as it is used: for each overlap of :data:`OVERLAP_GRID`, each job
    type's one-node rows are fitted with that overlap, and the network's values (sized if
    every job type states its parameters, else the cross ratio) and its retrogression,
    NIC-sharing and two-node factors are fitted to the multi-node step times all of them
    then predict (each job type weighing the same; a factor their rows cannot tell, as in
    :func:`fit_step_model`, is 0; every value at most
    :data:`~hetsched.speeds.step_prior.MAX_PRIOR_VALUE`); the overlap with the smallest
    error is kept. No ``transfer_error`` (:func:`hetsched.speeds.step_extrapolation.extrapolate`
    measures it)."""
    groups = {key: group for key, group in _group(rows).items() if calibrates(group)}
    if not groups:
        raise InputError("no job type measured on several GPUs of one node and across "
                         "nodes", path="rows", expected="rows of one job type on several "
                         "GPUs of one node and on several nodes, to calibrate the network on")
    sized = all(model_parameters(group) is not None for group in groups.values())
    # the factors no row tells apart are not fitted (as in fit_step_model): 0
    told = _identifiable([row for group in groups.values() for row in group])
    untold = {name: 0.0 for name in _RATIO_FORM[1:] if name not in told}
    form = tuple(name for name in (_SIZED_FORM if sized else _RATIO_FORM)
                 if name not in untold)
    best: tuple[float, float, dict[str, float], list[_Part]] | None = None
    for overlap in OVERLAP_GRID:
        fixed = {"overlap": overlap, "retrogression": 0.0, "nic_sharing": 0.0,
                 "two_node_penalty": 0.0}
        parts = []
        for group in groups.values():
            node_rows = [row for row in group if row.num_nodes == 1]
            values = _fit(node_rows, fixed)
            parts.append(_Part(values, _node_sync_reference(values, node_rows),
                               model_parameters(group),
                               _Data.of([row for row in group if row.num_nodes > 1])))
        network, cost = _transfer_fit(parts, form, untold)
        if best is None or cost < best[0]:
            best = (cost, overlap, network, parts)
    assert best is not None
    _, overlap, network, parts = best
    if sized:
        # for job types that state no size: the cross ratio, the other factors kept
        network = _transfer_fit([replace(part, model_parameters=None) for part in parts],
                                ("cross_ratio",), network)[0]
    return NetworkPrior(network["cross_ratio"], network["retrogression"], overlap,
                        network["nic_sharing"], network["two_node_penalty"],
                        tuple(sorted({job for job, _ in groups})), None,
                        network.get("seconds_per_parameter", 0.0),
                        network.get("node_sync_weight", 0.0))


def calibrates(rows: Sequence[StepRow]) -> bool:
    """Whether one job type's ``rows`` can calibrate a network prior: some on several GPUs
    of one node, some on several nodes."""
    return (any(row.num_nodes > 1 for row in rows) and
            any(row.num_nodes == 1 and row.num_gpus > 1 for row in rows))


def own_network_base(rows: Sequence[StepRow], prior: NetworkPrior) -> float:
    """One job type's multi-node sync base (s) fitted on its rows with ``prior``'s
    overlap and shape factors (what a prior's base would need to be; :func:`calibrate_
    network` relates job types by it); NaN without a multi-node row."""
    _check_rows(rows)
    if all(row.num_nodes == 1 for row in rows):
        return math.nan
    return _fit(rows, _prior_factors(prior))["network_sync_base_s"]


def _prior_factors(prior: NetworkPrior) -> dict[str, float]:
    return {"overlap": prior.overlap, "retrogression": prior.retrogression,
            "nic_sharing": prior.nic_sharing, "two_node_penalty": prior.two_node_penalty}


def own_cross_ratio(rows: Sequence[StepRow], prior: NetworkPrior,
                    base: float | None = None) -> float:
    """The cross ratio of one job type's own rows, with ``prior``'s overlap and shape
    factors: its multi-node sync base fitted on every row (``base`` if already fitted,
    :func:`own_network_base`) over its within-node sync fitted on one node (as
    :func:`calibrate_network` relates them); NaN without a multi-GPU row on one node."""
    _check_rows(rows)
    node_rows = [row for row in rows if row.num_nodes == 1]
    reference = _node_sync_reference(_fit(node_rows, _prior_factors(prior)), node_rows) \
        if node_rows else 0.0
    if reference <= 0:
        return math.nan
    return (own_network_base(rows, prior) if base is None else base) / reference


def group_rows(rows: Iterable[StepRow]) -> dict[tuple[str, str], list[StepRow]]:
    """The rows by ``(job_type, gpu_type)``, in the order first seen."""
    return _group(rows)
