"""What not knowing the future costs each policy (issue 64): every policy replayed under
``--knowledge truth`` (the trace's work: an oracle), ``estimate`` (QSSF's history rule,
hetsched.knowledge) and ``none`` (one guess for every job), through ``hetsched bench``,
on

* ``ee9e8c-400``: Gavel's ee9e8c trace, first 400 jobs, load 1, on 36 V100 + 36 P100 +
  36 K80 (the issue's first cell; every registered policy by default);
* the four bench cells: ee9e8c and 6214e9, first 1,000 jobs, loads 0.5 and 1, the same
  cluster (benchmarks/bench_policies.py's cells, seed 0);
* ``philly-20000``: the first 20,000 jobs of Philly (../shared/data/philly/philly.csv)
  on 192 V100 + 192 P100 + 192 K80, the owner being each job's virtual cluster.

Gavel's traces get synthetic deadlines on half of the jobs (bench_policies.py's).
One bench per cell and knowledge setting into ``OUT/<cell>-<knowledge>/`` (results.csv,
report.md; a rerun resumes), their runs in one queue. Prints, per cell, the table
policy x knowledge (average and p95 JCT, deadlines met, the loss against the policy's own
truth run) and the estimator's accuracy, and writes ``OUT/knowledge.csv`` (a row per
cell, policy and knowledge) and a plot per cell (``OUT/knowledge_<cell>.png``).

    python benchmarks/knowledge.py                       # every cell (about an hour)
    python benchmarks/knowledge.py --cells ee9e8c-400    # the first cell only
    python benchmarks/knowledge.py --cells ee9e8c-400 --policies fifo,srtf,progress
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from common import DATA, RESULTS, row_line, write_csv

from hetsched.bench.results import read_results
from hetsched.bench.runner import run_benches
from hetsched.bench.settings import BenchSettings, bench_settings
from hetsched.bench.spec import parse_policies
from hetsched.core.errors import InputError
from hetsched.core.settings import KNOWLEDGE
from hetsched.registry import ENTRIES

OUT = RESULTS / "knowledge"
GAVEL_CLUSTER = "v100=36,p100=36,k80=36"
PHILLY_CLUSTER = "v100=192,p100=192,k80=192"
#: The policies of the four bench cells and of Philly (the others of the registry are
#: variants of these: packed, water-filling, cost; each 1,000-job cell of them all
#: would take hours here).
CELL_POLICIES = ("fifo,sjf,qssf,srtf,edf,tiresias,gandiva,gavel,optimus,allox,deadline,"
                 "ftf,min-total-duration,progress")
PHILLY_POLICIES = "fifo,sjf,qssf,srtf,edf,tiresias"


@dataclass(frozen=True)
class Cell:
    """One bench cell: a trace's first ``jobs`` jobs at ``loads`` on ``cluster``."""

    name: str
    trace: Path
    trace_format: str
    cluster: str
    jobs: int
    loads: tuple[float, ...]
    policies: str
    deadline_fraction: float | None


def _every_policy() -> str:
    """Every registered rolling policy."""
    return ",".join(ENTRIES)


CELLS = {cell.name: cell for cell in (
    Cell("ee9e8c-400", DATA / "gavel" / "traces" / "ee9e8c.trace", "gavel", GAVEL_CLUSTER,
         400, (1.0,), "every", 0.5),
    Cell("ee9e8c-1000", DATA / "gavel" / "traces" / "ee9e8c.trace", "gavel", GAVEL_CLUSTER,
         1000, (0.5, 1.0), CELL_POLICIES, 0.5),
    Cell("6214e9-1000", DATA / "gavel" / "traces" / "6214e9.trace", "gavel", GAVEL_CLUSTER,
         1000, (0.5, 1.0), CELL_POLICIES, 0.5),
    Cell("philly-20000", DATA / "philly" / "philly.csv", "philly", PHILLY_CLUSTER,
         20000, (1.0,), PHILLY_POLICIES, None))}


def _benches(cells: list[Cell], policies: str | None, workers: int
             ) -> list[tuple[str, str, BenchSettings, Path]]:
    """(cell, knowledge, settings, folder) of every bench to run."""
    made = []
    for cell in cells:
        names = policies or (_every_policy() if cell.policies == "every" else cell.policies)
        for knowledge in KNOWLEDGE:
            settings = bench_settings(
                trace=cell.trace, trace_format=cell.trace_format, cluster=cell.cluster,
                policies=parse_policies(names), seeds=(0,), loads=cell.loads,
                workers=workers, limit_jobs=cell.jobs, time_limit_s=0.1,
                deadline_fraction=cell.deadline_fraction, knowledge=knowledge,
                lp_bound=False)
            made.append((cell.name, knowledge, settings, OUT / f"{cell.name}-{knowledge}"))
    return made


def _number(row: dict[str, str], column: str) -> float:
    text = row.get(column) or ""
    try:
        return float(text)
    except ValueError:
        return math.nan


def _rows(cell: str, knowledge: str, folder: Path) -> list[dict[str, object]]:
    """The bench's rows, with the estimator's accuracy of each run's summary.json."""
    rows: list[dict[str, object]] = []
    if not (folder / "results.csv").is_file():
        return rows
    for found in read_results(folder / "results.csv"):
        row: dict[str, object] = {
            "cell": cell, "policy": found["policy"], "load": found["load"],
            "knowledge": knowledge, "jobs": found["jobs"], "completed": found["completed"],
            "avg_jct_s": _number(found, "avg_jct_s"), "p95_jct_s": _number(found, "p95_jct_s"),
            "deadline_jobs": found.get("deadline_jobs", ""),
            "deadline_met": found.get("deadline_met", ""),
            "wall_time_s": _number(found, "wall_time_s")}
        summary = next((folder / "runs").glob(
            f"{found['policy']}-s{found['seed']}-l{found['load']}/summary.json"), None)
        estimates = json.loads(summary.read_text()).get("estimates") if summary else None
        if estimates:
            row.update(median_abs_error=estimates["median_abs_error"],
                       p90_abs_error=estimates["p90_abs_error"],
                       under=estimates["under"], over=estimates["over"])
        rows.append(row)
    return rows


def _with_losses(rows: list[dict[str, object]]) -> None:
    """Each row's average JCT over its policy's truth run in the same cell and load."""
    truth = {(r["cell"], r["policy"], r["load"]): r["avg_jct_s"] for r in rows
             if r["knowledge"] == "truth"}
    for row in rows:
        base = truth.get((row["cell"], row["policy"], row["load"]))
        value = row["avg_jct_s"]
        row["loss_vs_truth"] = value / base if isinstance(base, float) and isinstance(
            value, float) and base > 0 else math.nan


def _table(rows: list[dict[str, object]], cell: str, load: str) -> list[str]:
    """The cell's policy x knowledge table, best estimate first."""
    group = [r for r in rows if r["cell"] == cell and r["load"] == load]
    by = {(r["policy"], r["knowledge"]): r for r in group}
    policies = sorted({str(r["policy"]) for r in group},
                      key=lambda p: float(by.get((p, "estimate"), {}).get("avg_jct_s",
                                                                          math.inf)))
    lines = [f"{cell} load {load}: avg JCT h (p95 h, deadlines met, x own truth)",
             f"  {'policy':<28}" + "".join(f"{k:>34}" for k in KNOWLEDGE)]
    for policy in policies:
        cells = []
        for knowledge in KNOWLEDGE:
            row = by.get((policy, knowledge))
            if row is None:
                cells.append(f"{'-':>34}")
                continue
            met = f"{row['deadline_met']}/{row['deadline_jobs']}" if row["deadline_jobs"] \
                not in ("", "0") else "-"
            avg, p95 = float(row["avg_jct_s"]) / 3600, float(row["p95_jct_s"]) / 3600
            cells.append(f"{avg:>9.1f} ({p95:,.0f}, {met}, "
                         f"x{float(row['loss_vs_truth']):.2f})".rjust(34))
        lines.append(f"  {policy:<28}" + "".join(cells))
    accuracy = next((r for r in group if r["knowledge"] == "estimate"
                     and "median_abs_error" in r), None)
    if accuracy is not None:
        lines.append(f"  estimator accuracy (history): median |error| "
                     f"{float(accuracy['median_abs_error']):.2f}, p90 "
                     f"{float(accuracy['p90_abs_error']):.1f}, under "
                     f"{float(accuracy['under']):.0%}, over {float(accuracy['over']):.0%}")
    return lines


def _plot(rows: list[dict[str, object]], cell: str, path: Path) -> None:
    """Bars: each policy's average JCT under each knowledge setting, per load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = sorted({str(r["load"]) for r in rows if r["cell"] == cell}, key=float)
    figure, axes = plt.subplots(len(loads), 1, figsize=(11, 3.6 * len(loads)), squeeze=False)
    for axis, load in zip(axes[:, 0], loads, strict=True):
        group = [r for r in rows if r["cell"] == cell and r["load"] == load]
        policies = sorted({str(r["policy"]) for r in group})
        for offset, knowledge in enumerate(KNOWLEDGE):
            values = {str(r["policy"]): float(r["avg_jct_s"]) / 3600 for r in group
                      if r["knowledge"] == knowledge}
            axis.bar([i + (offset - 1) * 0.27 for i in range(len(policies))],
                     [values.get(p, math.nan) for p in policies], width=0.27,
                     label=knowledge)
        axis.set_xticks(range(len(policies)), policies, rotation=45, ha="right")
        axis.set_ylabel("avg JCT (h)")
        axis.set_title(f"{cell}, load {load}: what the policy knows of the jobs' work")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    print(f"wrote {path}")


def main() -> None:
    """Run the benches, print the tables, write the CSV and the plots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=",".join(CELLS),
                        help="of " + ", ".join(CELLS))
    parser.add_argument("--policies", default=None,
                        help="instead of each cell's (default: every registered policy on "
                        "ee9e8c-400, " + CELL_POLICIES + " on the 1,000-job cells, "
                        + PHILLY_POLICIES + " on Philly)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-run", action="store_true",
                        help="only collate what the benches' folders hold")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        cells = [CELLS[name] for name in args.cells.split(",")]
    except KeyError as exc:
        raise SystemExit(f"error: unknown cell {exc}; known: {', '.join(CELLS)}") from None
    try:
        benches = _benches(cells, args.policies, args.workers)
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    began = time.monotonic()
    if not args.no_run:
        outcomes = run_benches([(settings, out) for _, _, settings, out in benches],
                               names=[f"{cell}-{knowledge}" for cell, knowledge, _, _ in benches])
        for (cell, knowledge, _, _), outcome in zip(benches, outcomes, strict=True):
            print(f"{cell} {knowledge}: {outcome.ran} runs, {outcome.skipped} resumed, "
                  f"{len(outcome.failed)} failed")
    rows = [row for cell, knowledge, _, out in benches for row in _rows(cell, knowledge, out)]
    if not rows:
        raise SystemExit("no results yet")
    _with_losses(rows)
    columns = ["cell", "policy", "load", "knowledge", "jobs", "completed", "avg_jct_s",
               "p95_jct_s", "deadline_jobs", "deadline_met", "loss_vs_truth", "wall_time_s",
               "median_abs_error", "p90_abs_error", "under", "over"]
    everything = OUT / "knowledge.csv"
    kept = [r for r in _read_csv(everything) if r["cell"] not in {c.name for c in cells}]
    write_csv(everything, kept + rows, columns)
    for cell in cells:
        if any(r["cell"] == cell.name for r in rows):
            _plot(rows, cell.name, OUT / f"knowledge_{cell.name}.png")
    for row in rows:
        logging.info(row_line(row))
    for cell in cells:
        for load in sorted({str(r["load"]) for r in rows if r["cell"] == cell.name},
                           key=float):
            print("\n".join(_table(rows, cell.name, load)))
    print(f"wall time {(time.monotonic() - began) / 60:.1f} min (resumed runs not counted)")


def _read_csv(path: Path) -> list[dict[str, object]]:
    """The rows already in ``path`` (none if it is missing)."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


if __name__ == "__main__":
    main()
