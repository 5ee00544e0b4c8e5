"""What a decision at every event buys: the four bench cells (Gavel's ee9e8c and 6214e9
traces, first 1,000 jobs, loads 0.5 and 1, on v100=36,p100=36,k80=36, seed 0) replayed
under each policy with decisions at every event and with batched decisions (``hetsched
replay --batch S``), and the average JCT of each batched replay over its per-event one.
Every replay passes the checker (``hetsched replay`` checks it; with ``--gap``, the
replay runs in memory and is checked here). ``--gap G`` also sets ``progress``'s MILP
gap (``ProgressParams.gap``). Replays are
deterministic, so the figures do not depend on the machine's load; two replays run at
once. Prints a table and writes CSV.

    python benchmarks/batch_quality.py --out benchmarks/results/batch_quality.csv
    python benchmarks/batch_quality.py --policies progress --batches 300 --out /tmp/b.csv
    python benchmarks/batch_quality.py --policies progress --gap 1e-4 --out /tmp/g.csv
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import DATA, write_csv

CLUSTER = "v100=36,p100=36,k80=36"
CELLS = [(trace, load) for trace in ("ee9e8c", "6214e9") for load in (0.5, 1.0)]


def in_memory(trace: str, load: float, batch_s: float | None, gap: float) -> None:
    """``progress`` with MILP gap ``gap`` on a bench cell, in memory and checked; prints
    summary.json's average JCT, decisions and completed jobs as JSON."""
    from hetsched.files.replay_inputs import replay_inputs
    from hetsched.policies.progress import Progress
    from hetsched.policies.progress_params import ProgressParams
    from hetsched.replaying import check_replay, replay_trace

    path = DATA / "gavel" / "traces" / f"{trace}.trace"
    found = replay_trace(path, "gavel", CLUSTER, Progress(ProgressParams(gap=gap)),
                         limit_jobs=1000, load=load, batch_s=batch_s)
    jobs = [record.job for record in found.replay.records.values()]
    # (the truth the replay ran on: its inputs, read again; a ReplayResult keeps no model)
    violations = check_replay(found.replay, jobs, replay_inputs(path, "gavel", CLUSTER).truth)
    if violations:
        sys.exit(f"checker: {violations[:3]}")
    print(json.dumps({"avg_jct_s": found.summary.avg_jct_s,
                      "decisions": found.summary.decisions,
                      "completed": found.summary.completed}))


def replay(trace: str, load: float, policy: str, batch_s: float | None,
           folder: Path, gap: float | None = None) -> dict[str, object]:
    """One replay of a bench cell; its average JCT and decisions."""
    label = f"{trace}-l{load:g}-{policy}-b{batch_s or 0:g}"
    out = folder / label
    batch = [] if batch_s is None else ["--batch", f"{batch_s:g}"]
    if gap is not None:
        done = subprocess.run(
            [sys.executable, __file__, "--one", trace, f"{load:g}", f"{batch_s or 0:g}",
             f"{gap:g}"], check=True, capture_output=True, text=True)
        figures = json.loads(done.stdout)
        return {"cell": f"{trace}-1000", "load": f"{load:g}", "policy": policy,
                "batch_s": batch_s or 0, "gap": gap,
                "avg_jct_s": round(figures["avg_jct_s"], 1),
                "decisions": figures["decisions"], "completed": figures["completed"]}
    subprocess.run(
        [sys.executable, "-m", "hetsched", "replay",
         str(DATA / "gavel" / "traces" / f"{trace}.trace"), "--format", "gavel",
         "--cluster", CLUSTER, "--limit-jobs", "1000", "--load", f"{load:g}",
         "--policy", policy, "--out", str(out), *batch],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    return {"cell": f"{trace}-1000", "load": f"{load:g}", "policy": policy,
            "batch_s": batch_s or 0, "avg_jct_s": round(summary["avg_jct_s"], 1),
            "decisions": summary["decisions"], "completed": summary["completed"]}


def main() -> None:
    """Run every cell, policy and batch; print the ratios; write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default="progress,ftf,allox,deadline,topology")
    parser.add_argument("--batches", default="60,300,600,900",
                        help="batch lengths (s), besides decisions at every event")
    parser.add_argument("--gap", type=float, default=None,
                        help="progress's MILP gap in the batched replays (default: its own)")
    parser.add_argument("--one", nargs=4, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.one:
        trace, load, batch, gap = args.one
        in_memory(trace, float(load), float(batch) or None, float(gap))
        return
    if args.out is None:
        parser.error("--out is required")
    if not (DATA / "gavel" / "traces" / "ee9e8c.trace").is_file():
        sys.exit(f"{DATA} has no Gavel traces: this benchmark needs ../shared/data")
    batches: list[float | None] = [None, *(float(b) for b in args.batches.split(","))]
    runs = [(trace, load, policy, batch) for trace, load in CELLS
            for policy in args.policies.split(",") for batch in batches]
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(2) as pool:
        def one(run: tuple[str, float, str, float | None]) -> dict[str, object]:
            trace, load, policy, batch = run
            return replay(trace, load, policy, batch, Path(folder),
                          args.gap if batch is not None else None)

        rows = list(pool.map(one, runs))
    every = {(r["cell"], r["load"], r["policy"]): str(r["avg_jct_s"]) for r in rows
             if r["batch_s"] == 0}
    for row in rows:
        jct = float(str(row["avg_jct_s"]))
        ratio = jct / float(every[(row["cell"], row["load"], row["policy"])])
        row["x_every_event"] = round(ratio, 4)
        print(f"{row['cell']} load {row['load']:>3} {row['policy']:10s} "
              f"batch {row['batch_s']:>5} s  avg JCT {jct / 3600:7.2f} h  x{ratio:.4f}  "
              f"{row['decisions']} decisions")
    columns = list(dict.fromkeys(key for row in rows for key in row))
    write_csv(args.out, rows, columns)


if __name__ == "__main__":
    main()
