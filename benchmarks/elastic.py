"""Elastic jobs on Pollux's measurements, one named section at a time.

Sections (``--sections a,b``; all by default):

- ``extrapolation``: the step model (hetsched.speeds.steps) fitted on each model's one-node
  rows predicts every multi-node placement and scalability row, the network across nodes
  calibrated on the other five models (leave one model out), per model parameter
  (hetsched.speeds.step_fit). Writes
  ``elastic_extrapolation.csv``, one row per predicted row (model, placement, local_bsz,
  measured and predicted step time, APE, the sync times, what was wrong in a row that
  fails: the sync or the compute time, over or under, or an outlier), and prints the
  median and p90 APE, overall and per model. The full run adds, in
  ``elastic_extrapolation_summary.csv`` (per variant and model): the ceiling (each
  model's own multi-node sync base), the network as a ratio of the within-node sync (the
  models' sizes left out), Pollux's own rule
  instead of the calibrated network, the model fitted on every row (in-sample), the same
  without its NIC-sharing and two-node factors (Pollux's form), and one two-node
  placement (``11``) fitted besides the one-node rows.

- ``policy``: elastic ``progress`` on Pollux's 8 workloads at its 4 loads beside
  non-elastic ``progress`` and Pollux's ``pollux`` (benchmarks/elastic_policy.py: its
  figures, ``elastic_policy.csv``, and the decision time).

A new section is a function ``(settings) -> None`` added to :data:`SECTIONS`.

Usage: python benchmarks/elastic.py [--quick] [--sections extrapolation] [--data FOLDER]
       [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from elastic_policy import RUNS, policy_section

from hetsched.speeds.step_extrapolation import FAILURE_APE, Extrapolation, extrapolate
from hetsched.speeds.step_fit import fit_step_model, group_rows
from hetsched.speeds.step_profiles import read_pollux_profile
from hetsched.speeds.steps import StatedError, StepRow

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "pollux" / "traces"
RESULTS = ROOT / "benchmarks" / "results"
ROW_FIELDS = ("model", "placement", "num_gpus", "num_nodes", "local_bsz", "measured",
              "predicted", "ape", "measured_sync", "predicted_sync", "source", "reason")
SUMMARY_FIELDS = ("variant", "model", "rows", "median_ape", "p90_ape", "failing")


@dataclass(frozen=True)
class Settings:
    """What to run: ``quick`` (the headline figures only), the data and output folders,
    and the policy section's loads (``None``: all)."""

    quick: bool
    data: Path
    out: Path
    loads: tuple[float, ...] | None = None
    runs: tuple[str, ...] | None = None


def _figures(label: str, error: StatedError) -> str:
    return f"{label}: median {error.median_ape:.1f}%, p90 {error.p90_ape:.1f}% ({error.rows} rows)"


def _summary_rows(variant: str, extrapolation: Extrapolation) -> list[dict[str, object]]:
    rows = []
    for job_type in (None, *extrapolation.job_types):
        error = extrapolation.error(job_type)
        failing = sum(1 for p in extrapolation.failures()
                      if job_type in (None, p.row.job_type))
        rows.append({"variant": variant, "model": job_type or "all", "rows": error.rows,
                     "median_ape": round(error.median_ape, 2),
                     "p90_ape": round(error.p90_ape, 2), "failing": failing})
    return rows


def _ceiling_rows(extrapolation: Extrapolation) -> list[dict[str, object]]:
    rows = []
    for job_type in (None, *extrapolation.job_types):
        error = extrapolation.ceiling_error(job_type)
        assert error is not None
        failing = sum(1 for c, p in zip(extrapolation.ceiling, extrapolation.predictions,
                                        strict=True)
                      if job_type in (None, p.row.job_type)
                      and abs(c - p.row.step_time) > FAILURE_APE / 100 * p.row.step_time)
        rows.append({"variant": "ceiling: own multi-node sync base", "model": job_type or "all",
                     "rows": error.rows, "median_ape": round(error.median_ape, 2),
                     "p90_ape": round(error.p90_ape, 2), "failing": failing})
    return rows


def _in_sample(rows: Sequence[StepRow], pollux_form: bool) -> list[dict[str, object]]:
    """Every model fitted on all its rows, its multi-node rows predicted; with
    ``pollux_form`` the NIC-sharing and two-node factors held at 0."""
    out, everything = [], []
    variant = "in-sample, Pollux's form" if pollux_form else "in-sample"
    for (job_type, _), group in group_rows(rows).items():
        model = fit_step_model(group, pollux_form=pollux_form)
        spread = [r for r in group if r.num_nodes > 1]
        measured = np.array([r.step_time for r in spread])
        predicted = model.predict_rows(spread)
        ape = np.abs(predicted - measured) / measured * 100
        everything.append(ape)
        out.append({"variant": variant, "model": job_type, "rows": len(ape),
                    "median_ape": round(float(np.median(ape)), 2),
                    "p90_ape": round(float(np.percentile(ape, 90)), 2),
                    "failing": int(np.sum(ape > 20))})
    ape = np.concatenate(everything)
    return [{"variant": variant, "model": "all", "rows": len(ape),
             "median_ape": round(float(np.median(ape)), 2),
             "p90_ape": round(float(np.percentile(ape, 90)), 2),
             "failing": int(np.sum(ape > 20))}, *out]


def extrapolation_section(settings: Settings) -> None:
    """The step model fitted on one node, predicting every multi-node row (module notes)."""
    rows = read_pollux_profile(settings.data)
    calibrated = extrapolate(rows)
    path = settings.out / "elastic_extrapolation.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=ROW_FIELDS)
        writer.writeheader()
        for p in calibrated.predictions:
            writer.writerow({
                "model": p.row.job_type, "placement": p.row.placement_text,
                "num_gpus": p.row.num_gpus, "num_nodes": p.row.num_nodes,
                "local_bsz": f"{p.row.local_bsz:g}", "measured": round(p.row.step_time, 6),
                "predicted": round(p.step_time, 6), "ape": round(p.ape, 3),
                "measured_sync": round(p.row.sync_time, 6),
                "predicted_sync": round(p.sync_time, 6), "source": p.row.source,
                "reason": p.reason.split(":")[0]})  # its figures are the row's
    print(f"wrote {path}")
    print(_figures("extrapolation from one node, network calibrated on the other models",
                   calibrated.error()))
    for job_type in calibrated.job_types:
        predicted, own = calibrated.network_base[job_type]
        print("  " + _figures(job_type, calibrated.error(job_type)) +
              f"; multi-node sync base {predicted:.3g} s (its own {own:.3g} s)")
    failing = calibrated.failures()
    print(f"  rows failing (> 20%): {len(failing)} of {len(calibrated.predictions)}")
    if settings.quick:
        return
    summary = _summary_rows("one node, calibrated network", calibrated)
    ceiling = calibrated.ceiling_error()
    assert ceiling is not None
    print(_figures("the ceiling: each model's own multi-node sync base", ceiling))
    summary += _ceiling_rows(calibrated)
    ratio = extrapolate([replace(row, model_parameters=None) for row in rows])
    print(_figures("the network as a ratio of the within-node sync (no model sizes)",
                   ratio.error()))
    summary += _summary_rows("one node, calibrated network as a ratio", ratio)
    baseline = extrapolate(rows, "pollux-rule")
    print(_figures("the same with Pollux's rule (1.1 x the within-node sync)",
                   baseline.error()))
    summary += _summary_rows("one node, Pollux's rule", baseline)
    two_node = extrapolate(rows, also_fitted=[(1, 1)])
    print(_figures("one-node rows and placement 11 fitted, the rest predicted",
                   two_node.error()))
    summary += _summary_rows("one node and 11, calibrated network", two_node)
    for pollux_form in (False, True):
        in_sample = _in_sample(rows, pollux_form)
        print(f"{in_sample[0]['variant']} (multi-node rows): median "
              f"{in_sample[0]['median_ape']}%, p90 {in_sample[0]['p90_ape']}%")
        summary += in_sample
    path = settings.out / "elastic_extrapolation_summary.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY_FIELDS)
        writer.writeheader()
        writer.writerows(summary)
    print(f"wrote {path}")


#: The sections, in the order they run.
SECTIONS: dict[str, Callable[[Settings], None]] = {
    "extrapolation": extrapolation_section,
    "policy": policy_section,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen sections; 2 for an unknown section or a missing data folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the headline figures only (each section says which)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated, of {', '.join(SECTIONS)} (default: all)")
    parser.add_argument("--data", type=Path, default=DATA,
                        help="Pollux's traces folder (<model>/placements.csv)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the CSVs go")
    parser.add_argument("--loads", default=None,
                        help="policy section: only these loads (comma-separated), the "
                        "CSV's rows of the other loads kept")
    parser.add_argument("--runs", default=None,
                        help="policy section: only these replays (comma-separated, of "
                        f"{', '.join(RUNS)}), the CSV's figures of the others kept")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown or not chosen:
        print(f"unknown section {unknown[0] if unknown else '(none)'}: choose from "
              f"{', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    if not args.data.is_dir():
        print(f"no data folder {args.data}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    loads = None if args.loads is None else tuple(float(x) for x in args.loads.split(","))
    runs = None if args.runs is None else tuple(x.strip() for x in args.runs.split(","))
    if runs is not None and (not runs or any(run not in RUNS for run in runs)):
        print(f"unknown run in {args.runs}: choose from {', '.join(RUNS)}", file=sys.stderr)
        return 2
    settings = Settings(args.quick, args.data, args.out, loads, runs)
    for name in chosen:
        print(f"== {name}")
        SECTIONS[name](settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
