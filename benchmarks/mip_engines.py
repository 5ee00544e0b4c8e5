"""HiGHS, CBC and SCIP on the project's MILPs under one wall budget: outcome, objective,
bound, gap, wall time and overrun against the limit.

Models
- ``deadline``: the per-GPU disjunctive MILP (formulations/deadline/milp.py, with the
  mean-busy-time cuts) on instances/small.json, instances/congested.json and generated
  30- and 50-job instances (``hetsched generate --jobs N --gpus v100=8,p100=4,k80=4
  --seed 7``). Each engine gets the greedy plan as its start. With deadlines, two rows
  per engine and limit: the deadline stage, then the completion stage with the deadline
  term held at the start's value (as ``solve`` does with its first stage's value).
- ``placement``: the placement column model's first stage (communication cost;
  formulations/topology/milp.py) on benchmarks/placement.py's cases: 64 gangs on 32
  DGX-1 (``dgx1``) and 200 gangs on the PAI inventory (``pai``), 30 % busy; the start is
  first fit, completed by fixing its columns and solving the rest.

Every solve is one :func:`hetsched.formulations.mip.solve_mip` call with ``Budget.wall(limit)``
(files, engine and reading back are inside the measured wall time; building the model
is not). Prints a table and writes benchmarks/results/mip_engines.csv. Figures depend on
the machine and its load: run it on a quiet machine.

Usage: python benchmarks/mip_engines.py [--quick] [--limits 5,20] [--engines highs,cbc,scip]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from common import DATA, RESULTS, ROOT, write_csv

from hetsched.core.records import Instance
from hetsched.core.result import Status
from hetsched.files.generate import GeneratorSettings, generate
from hetsched.files.instance import load_instance
from hetsched.formulations.budget import Budget
from hetsched.formulations.mip import (
    MatrixModel,
    MipSettings,
    available_engines,
    engine_version,
    solve_mip,
)
from hetsched.formulations.mip.pulp_io import from_pulp

#: The target: wall time <= 1.1 x limit + 0.5 s.
TARGET_RATIO, TARGET_SLACK_S = 1.1, 0.5


@dataclass
class Case:
    """One model to hand to every engine."""

    model_name: str
    case: str
    stage: str
    model: MatrixModel
    start: np.ndarray | None
    build_s: float
    jobs: int


# -- deadline ------------------------------------------------------------------------------
def deadline_instances(quick: bool) -> Iterator[tuple[str, Instance]]:
    yield "small", load_instance(ROOT / "instances" / "small.json")
    yield "congested", load_instance(ROOT / "instances" / "congested.json")
    if not quick:
        for jobs in (30, 50):
            settings = GeneratorSettings(jobs=jobs, gpus={"v100": 8, "p100": 4, "k80": 4},
                                         seed=7)
            yield f"gen-{jobs}", generate(settings)


def deadline_cases(name: str, instance: Instance) -> list[Case]:
    """The deadline MILP's stages (formulations/deadline/milp.py, arrays) from the greedy
    plan."""
    from hetsched.formulations.deadline.milp import DeadlineMilp
    from hetsched.formulations.deadline.problem import build_problem
    from hetsched.policies.deadline.search import greedy_plan

    began = time.perf_counter()
    problem = build_problem(instance, "missed")
    plan = greedy_plan(problem)
    milp = DeadlineMilp(problem, Budget.unlimited(), cuts=True)
    start = milp.start_values(plan)
    deadline_cost = milp.deadline_cost()
    cost, offset = milp.completion_cost()
    base = milp.model
    built = time.perf_counter() - began
    cases = []
    if problem.has_deadlines and start is not None:
        cases.append(Case("deadline", name, "deadline", base.with_objective(deadline_cost),
                          start, built, len(problem.jobs)))
        held = float(deadline_cost @ start)
        base = base.with_row(deadline_cost, -np.inf, held, "stage1")
    cases.append(Case("deadline", name, "completion", base.with_objective(cost, offset), start,
                      built, len(problem.jobs)))
    return cases


# -- placement -----------------------------------------------------------------------------
def placement_cases(quick: bool, seed: int) -> list[Case]:
    """benchmarks/placement.py's cases, first stage (communication cost)."""
    if not DATA.is_dir():
        logging.warning("placement cases need the real data in %s: skipped", DATA)
        return []
    import placement as cases_of  # benchmarks/placement.py (this script's folder)

    from hetsched.files.generate import catalogue_table
    from hetsched.files.interconnect import pai_cluster, read_topology, server_cluster
    from hetsched.policies.topology import first_fit

    rng = np.random.default_rng(seed)
    dgx1 = read_topology(DATA / "topology" / "dgx1-v100.nvidia-smi-topo.txt")
    cluster = server_cluster(dgx1, 32, "v100")
    busy = cases_of.busy_gpus(cluster, 0.30, cases_of.SIZES, rng)
    instance, gangs = cases_of.workload(cluster, cases_of.gavel_speeds(), 64, cases_of.SIZES,
                                        ["v100"], rng)
    made = [("dgx1", cluster, busy, instance, gangs)]
    if not quick:
        pcie = read_topology(DATA / "topology" / "dgx1-v100-pcie-only.nvidia-smi-topo-mp.txt")
        pai = pai_cluster(DATA / "alibaba" / "pai_machine_spec.csv",
                          servers={"v100": dgx1, "v100m32": dgx1, "misc": pcie})
        like = {"p100": "p100", "t4": "t4", "v100": "v100", "v100m32": "v100", "misc": "t4"}
        speeds = catalogue_table({t: like[t] for t in pai.type_names}, counts=(1, 2, 4, 8))
        busy = cases_of.busy_gpus(pai, 0.30, cases_of.SIZES, rng)
        instance, gangs = cases_of.workload(pai, speeds, 200, cases_of.SIZES,
                                            list(pai.type_names), rng)
        made.append(("pai", pai, busy, instance, gangs))
    cases = []
    for name, cluster, busy, instance, gangs in made:
        began = time.perf_counter()
        gangs = cases_of.allow_spread_where_needed(cluster, busy, gangs, instance)
        model, start = placement_model(cluster, busy, gangs, first_fit(cluster, busy, gangs))
        cases.append(Case("placement", name, "cost", model, start, time.perf_counter() - began,
                          len(gangs)))
    return cases


def placement_model(cluster: Any, busy: set[str], gangs: list[Any],
                    hint: dict[str, tuple[str, ...]]) -> tuple[MatrixModel, np.ndarray | None]:
    """The cost stage as arrays, and the hint as a full start: its placement columns are
    fixed and the other columns (spread and fragmentation flags) solved for."""
    from hetsched.formulations.topology.milp import PlacementMilp
    from hetsched.formulations.topology.problem import build

    milp = PlacementMilp(build(cluster, frozenset(busy), tuple(gangs)))
    milp.problem.setObjective(milp.cost)
    model, variables = from_pulp(milp.problem)
    milp.hint(hint)
    known = {v.name: v.varValue for v in milp.take}
    lower, upper = model.col_lower.copy(), model.col_upper.copy()
    for j, var in enumerate(variables):
        if known.get(var.name) is not None:
            lower[j] = upper[j] = float(known[var.name] or 0.0)
    fixed = MatrixModel(model.cost, model.matrix, model.row_lower, model.row_upper, lower,
                        upper, model.integer, model.offset)
    completed = solve_mip(fixed, "highs", Budget.unlimited())
    return model, completed.values if completed.outcome is Status.OPTIMAL else None


# -- running -------------------------------------------------------------------------------
def run(case: Case, engine: str, limit: float) -> dict[str, object]:
    """One solve; one CSV row."""
    start_objective = None if case.start is None else case.model.objective(case.start)
    began = time.perf_counter()
    result = solve_mip(case.model, engine, Budget.wall(limit), MipSettings(), case.start)
    wall = time.perf_counter() - began
    return {
        "model": case.model_name, "case": case.case, "stage": case.stage, "jobs": case.jobs,
        "variables": case.model.num_cols, "rows": case.model.num_rows,
        "nonzeros": int(case.model.matrix.nnz), "build_s": round(case.build_s, 3),
        "engine": engine, "version": engine_version(engine), "limit_s": limit,
        "outcome": result.outcome.value, "objective": result.objective, "bound": result.bound,
        "gap": result.gap, "start_objective": start_objective,
        "source": result.detail.get("source"), "start": result.detail.get("start"),
        "nodes": result.detail.get("nodes"), "wall_s": round(wall, 3),
        "overrun_s": round(wall - limit, 3), "ratio": round(wall / limit, 3),
        "within_target": wall <= TARGET_RATIO * limit + TARGET_SLACK_S,
        "message": str(result.detail.get("message", ""))[:200],
    }


def show(row: dict[str, object]) -> None:
    def number(value: object, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    gap = row["gap"]
    gap_text = "-" if not isinstance(gap, float) else f"{100 * gap:.3f}%"
    print(f"  {row['case']:<10} {row['stage']:<10} {row['engine']:<6} {row['limit_s']:>5g} s "
          f"{row['outcome']:<12} obj {number(row['objective'], '>14,.3f')} "
          f"bound {number(row['bound'], '>14,.3f')} gap {gap_text:>8} "
          f"wall {row['wall_s']:>7.2f} s ({row['ratio']:.2f} x) "
          f"from {row['source'] or '-'}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small.json, congested.json and the DGX-1 placement; 5 s only")
    parser.add_argument("--limits", default=None, help="wall limits (s), e.g. 5,20")
    parser.add_argument("--engines", default=",".join(available_engines()))
    parser.add_argument("--seed", type=int, default=0, help="seed of the placement cases")
    parser.add_argument("--out", type=Path, default=RESULTS / "mip_engines.csv")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    limits = [float(x) for x in (args.limits or ("5" if args.quick else "5,20")).split(",")]
    engines = [e for e in args.engines.split(",") if e]
    missing = sorted(set(engines) - set(available_engines()))
    if missing:
        print(f"not installed: {', '.join(missing)}", file=sys.stderr)
        return 2
    cases: list[Case] = []
    for name, instance in deadline_instances(args.quick):
        cases += deadline_cases(name, instance)
    cases += placement_cases(args.quick, args.seed)
    rows: list[dict[str, object]] = []
    for case in cases:
        print(f"\n[{case.model_name} {case.case} {case.stage}] {case.model.num_cols:,} "
              f"variables, {case.model.num_rows:,} rows, {case.model.matrix.nnz:,} nonzeros, "
              f"built in {case.build_s:.2f} s; start objective "
              f"{'-' if case.start is None else f'{case.model.objective(case.start):,.3f}'}",
              flush=True)
        for limit in limits:
            for engine in engines:
                row = run(case, engine, limit)
                show(row)
                rows.append(row)
    if not rows:
        print("nothing was solved", file=sys.stderr)
        return 1
    write_csv(args.out, rows)
    late = [r for r in rows if not r["within_target"]]
    print(f"\n{len(rows)} solves, {len(late)} beyond {TARGET_RATIO} x limit + "
          f"{TARGET_SLACK_S} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
