"""Where the gap of ``solve --model deadline`` stands at 200 jobs (the target: a
bound with a gap of at most 5 % in 30 s on ``instances/medium.json``, 200 jobs on
96 GPUs of 3 types).

Four measurements, each printed and written to ``benchmarks/results/deadline_gap.csv``:

``solve``: ``hetsched.solve`` at a 30-s wall-clock limit, as the CLI runs it, three times
(wall-clock budgets: the windows reached differ from run to run): objective, bound, gap,
which plan won, missed deadlines and the time the windows and the local search had.

``windows``: CP-SAT on windows of the first solve's plan
(:func:`hetsched.policies.deadline.windows.improve_by_windows`) with no limit but its own
(it stops after 5 sweeps in a row that gain less than 0.01 %) and 120 s: where that search
ends, and when.

``grid``: the time-indexed relaxation's bound (the plans' own, every deadline met, the
horizon at the returned plan's end) on grids of 400 (what ``solve`` uses), 800 and 1,600
slots, with the time each takes: how much of the gap is the grid's.

``type-level``: CP-SAT on the plans with each GPU type's nodes pooled (one cumulative of
the type's GPUs per type, a job's modes grouped by GPU type and gang size, every deadline
met, durations rounded up to whole seconds), hinted with the plan ``solve`` returned,
2 workers, for 30 and 90 s. Every plan ``solve`` can return is a plan of this model, so
its optimum is at most the node-level optimum; what CP-SAT reaches here says what a plan
search reaches on a model 8 times smaller than the node-level one (714 optional intervals
against 5,712; wall-clock, so not deterministic).

    python benchmarks/deadline_gap.py                 # all four (about 8 min)
    python benchmarks/deadline_gap.py --parts solve,grid
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import time
from pathlib import Path

from ortools.sat.python import cp_model

from hetsched.allocation.layout import layout
from hetsched.files.instance import load_instance
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import TICK_S
from hetsched.formulations.deadline.problem import DeadlineProblem, Plan, build_problem
from hetsched.formulations.deadline.timeindexed import job_kinds, time_indexed_bound
from hetsched.policies.deadline.windows import improve_by_windows
from hetsched.solving import SolveOptions, solve

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = ROOT / "instances" / "medium.json"
OUT = ROOT / "benchmarks" / "results" / "deadline_gap.csv"
log = logging.getLogger("deadline_gap")
#: The ``windows`` part stops here if the windows have not stalled by then.
WINDOWS_MAX_S = 120.0


def type_level(problem: DeadlineProblem, seconds: float, hint: Plan | None
               ) -> tuple[float, str]:
    """The best weighted JCT (s) CP-SAT finds in ``seconds`` with each type's nodes pooled
    (module notes), hinted with ``hint``'s kinds and starts (rounded up to seconds, so
    perhaps not feasible as it is), and its status."""
    model = cp_model.CpModel()
    where = layout(problem.instance.cluster)
    types = sorted(where.type_gpus)
    per_second = round(1 / TICK_S)
    horizon = math.ceil(problem.horizon / per_second)
    intervals: dict[str, list[tuple[cp_model.IntervalVar, int]]] = {t: [] for t in types}
    ends = []
    for data, kinds in zip(problem.jobs, job_kinds(problem, {t: i for i, t in enumerate(types)}),
                           strict=True):
        release = math.ceil(data.release / per_second)
        start = model.new_int_var(release, horizon, "")
        end = model.new_int_var(release, 2 * horizon, "")
        chosen = []
        hinted = None
        if hint is not None:
            index, tick = hint[data.job.id]
            hinted = (data.modes[index].gpu_type, data.modes[index].num_gpus)
            model.add_hint(start, math.ceil(tick / per_second))
        for kind in kinds:  # each (GPU type, gang size) once, its shortest duration
            gpu_type = types[kind.gpu_type]
            used = model.new_bool_var("")
            if hinted is not None:
                model.add_hint(used, (gpu_type, kind.gpus) == hinted)
            interval = model.new_optional_interval_var(
                start, math.ceil(kind.duration_s), end, used, "")
            intervals[gpu_type].append((interval, kind.gpus))
            chosen.append(used)
        model.add_exactly_one(chosen)
        if data.deadline is not None:
            model.add(end <= data.deadline // per_second)
        ends.append((data.weight, end))
    for gpu_type, pairs in intervals.items():
        model.add_cumulative([i for i, _ in pairs], [g for _, g in pairs],
                             where.type_gpus[gpu_type])
    model.minimize(sum(weight * end for weight, end in ends))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 2
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return math.nan, solver.status_name(status)
    # objective: sum of (integer weight x end second); the model's JCT from end ticks
    return problem.completion_seconds(solver.objective_value * per_second), \
        solver.status_name(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="solve,windows,grid,type-level")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=30.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    parts = args.parts.split(",")
    instance = load_instance(INSTANCE)
    problem = build_problem(instance)
    records: list[dict[str, object]] = []
    horizon_s = None
    plan = None
    if parts:
        for run in range(args.repeats if "solve" in parts else 1):
            began = time.perf_counter()
            result = solve(instance, "deadline", SolveOptions(time_limit_s=args.time_limit))
            wall = time.perf_counter() - began
            assert result.objective is not None
            assert result.schedule is not None
            if plan is None:
                horizon_s = max(a.finish for a in result.schedule)
                plan = problem.plan_from_schedule(result.schedule)
            if "solve" in parts:
                records.append({
                    "part": "solve", "setting": f"time limit {args.time_limit:g} s, run {run + 1}",
                    "objective_s": round(result.objective, 1),
                    "bound_s": round(result.bound or math.nan, 1),
                    "gap": round(result.gap or math.nan, 4), "seconds": round(wall, 2),
                    "detail": f"plan from {result.extra.get('plan_source')}; missed "
                              f"{len(result.extra.get('missed_deadlines', []))}; windows "
                              f"{result.extra.get('windows_s', 0)} s, local search after them "
                              f"{result.extra.get('leftover_search_s', 0)} s"})
    if "windows" in parts and plan is not None:
        began = time.perf_counter()
        windowed = improve_by_windows(problem, plan, Budget.wall(WINDOWS_MAX_S))
        value = problem.completion_seconds(problem.evaluate(windowed)[1])
        records.append({"part": "windows",
                        "setting": f"from run 1's plan, until they stall or {WINDOWS_MAX_S:g} s",
                        "objective_s": round(value, 1),
                        "seconds": round(time.perf_counter() - began, 2),
                        "detail": f"missed {problem.evaluate(windowed)[0]}"})
    if "grid" in parts:
        for slots in (400, 800, 1600):
            began = time.perf_counter()
            bound = time_indexed_bound(problem, Budget.unlimited(), late_cap=0.0,
                                       horizon_s=horizon_s, slots=slots, max_rounds=10_000)
            records.append({"part": "grid", "setting": f"{slots} slots",
                            "bound_s": round(bound.bound_s, 1),
                            "seconds": round(time.perf_counter() - began, 2),
                            "detail": f"{bound.status}, slot {bound.slot_s:.1f} s, "
                                      f"{bound.rounds} rounds, {bound.columns} columns"})
    if "type-level" in parts:
        for seconds in (30.0, 90.0):
            value, status = type_level(problem, seconds, plan)
            records.append({"part": "type-level", "setting": f"{seconds:g} s, 2 workers",
                            "objective_s": round(value, 1), "seconds": seconds,
                            "detail": status})
    for record in records:
        print(", ".join(f"{k} {v}" for k, v in record.items()))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    columns = ["part", "setting", "objective_s", "bound_s", "gap", "seconds", "detail"]
    with OUT.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
