"""Do time limits hold? Every model x back-end x instance size x time limit, each solve in a
fresh process; the solve's wall time (``Result.runtime_s``: model data, start plan, local
search, model building, cuts, every stage) against the target ``1.1 x limit + 0.5 s``.

    python benchmarks/time_limits.py --quick    # sizes up to 500 jobs, limits 1 and 5 s
    python benchmarks/time_limits.py            # + 2,000 jobs and a 10 s limit

Prints one row per cell and writes benchmarks/results/time_limits.csv (--quick:
time_limits_quick.csv, so that the full table is kept) with columns model, backend,
instance, jobs, limit_s, solve_wall_s, process_wall_s, overrun, ok, status, objective,
plan_source, message. Run it on a quiet machine: it measures wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, write_csv

#: model -> back-ends ("" for a heuristic without back-end)
MODELS = {"fifo": [""], "deadline": ["cpsat", "highs", "cbc", "scip"],
          "allox": ["matching", "highs", "cbc", "scip"],
          "topology": ["cpsat", "highs", "cbc", "scip"]}
#: generated instances: name -> (jobs, GPUs per type of v100/p100/k80, seed)
GENERATED = {"gen500": (500, 32, 5), "gen2000": (2000, 128, 5)}
COLUMNS = ["model", "backend", "instance", "jobs", "limit_s", "solve_wall_s", "process_wall_s",
           "overrun", "ok", "status", "objective", "plan_source", "message"]

CHILD = """
import json, sys, time
began = time.perf_counter()
from hetsched.files.instance import load_instance
from hetsched.solving import SolveOptions, solve
instance = load_instance(sys.argv[1])
backend = sys.argv[3] or None
result = solve(instance, sys.argv[2], SolveOptions(backend=backend,
                                                   time_limit_s=float(sys.argv[4])))
print(json.dumps({"runtime_s": result.runtime_s, "status": result.status.value,
                  "objective": result.objective, "jobs": len(instance.jobs),
                  "plan_source": result.extra.get("plan_source", ""),
                  "message": result.message[:160]}))
"""


def target(limit: float) -> float:
    """The wall time a solve with ``limit`` may take (s)."""
    return 1.1 * limit + 0.5


def instances(folder: Path, quick: bool) -> dict[str, Path]:
    """The shipped instances and the generated ones (written into ``folder``)."""
    from hetsched.files.generate import GeneratorSettings, generate
    from hetsched.files.instance import save_instance

    found = {name: ROOT / "instances" / f"{name}.json"
             for name in ("tiny", "small", "congested", "medium")}
    for name, (jobs, per_type, seed) in GENERATED.items():
        if quick and jobs > 500:
            continue
        path = folder / f"{name}.json"
        settings = GeneratorSettings(jobs=jobs, gpus={"v100": per_type, "p100": per_type,
                                                      "k80": per_type}, seed=seed)
        save_instance(generate(settings).replace(name=name), path,
                      comment=f"benchmarks/time_limits.py: {jobs} jobs, seed {seed}")
        found[name] = path
    return found


def run_cell(path: Path, model: str, backend: str, limit: float) -> dict[str, object]:
    """One solve in a fresh process; its figures, or why it failed."""
    began = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), model, backend,
                               str(limit)], cwd=ROOT, capture_output=True, text=True,
                              timeout=3 * limit + 120, check=False)
    except subprocess.TimeoutExpired:
        return {"process_wall_s": time.perf_counter() - began, "status": "KILLED",
                "message": "no answer within 3 x limit + 120 s"}
    wall = time.perf_counter() - began
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"process_wall_s": wall, "status": f"EXIT {done.returncode}", "message": tail}
    row: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    row["process_wall_s"] = wall
    return row


def main() -> None:
    """Run the cells, print them, write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="up to 500 jobs, 1 and 5 s")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", type=Path, default=None,
                        help="CSV (default: time_limits.csv; --quick: time_limits_quick.csv)")
    args = parser.parse_args()
    if args.out is None:
        args.out = RESULTS / ("time_limits_quick.csv" if args.quick else "time_limits.csv")
    limits = (1.0, 5.0) if args.quick else (1.0, 5.0, 10.0)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        paths = instances(Path(folder), args.quick)
        for model in args.models.split(","):
            for backend in MODELS[model]:
                for name, path in paths.items():
                    for limit in limits:
                        figures = run_cell(path, model, backend, limit)
                        runtime = figures.get("runtime_s")
                        wall = float(runtime) if isinstance(runtime, int | float) else None
                        row = {"model": model, "backend": backend or "-", "instance": name,
                               "jobs": figures.get("jobs", ""), "limit_s": limit,
                               "solve_wall_s": "" if wall is None else round(wall, 3),
                               "process_wall_s": round(float(str(figures["process_wall_s"])),
                                                       3),
                               "overrun": "" if wall is None else round(wall / limit, 3),
                               "ok": wall is not None and wall <= target(limit),
                               "status": figures.get("status", ""),
                               "objective": figures.get("objective", ""),
                               "plan_source": figures.get("plan_source", ""),
                               "message": figures.get("message", "")}
                        rows.append(row)
                        print(f"{model:9} {backend or '-':8} {name:10} {limit:4g} s: "
                              f"solve {row['solve_wall_s']} s, process "
                              f"{row['process_wall_s']} s, {row['status']}"
                              f"{'' if row['ok'] else '  <-- OVER ' + str(target(limit))}",
                              flush=True)
    write_csv(args.out, rows, COLUMNS)
    over = [r for r in rows if not r["ok"]]
    worst = max((float(str(r["solve_wall_s"])) - target(float(str(r["limit_s"])))
                 for r in rows if r["solve_wall_s"] != ""), default=0.0)
    print(f"{len(rows)} cells, {len(over)} over 1.1 x limit + 0.5 s; worst margin "
          f"{worst:+.2f} s (negative: under the target)")


if __name__ == "__main__":
    main()
