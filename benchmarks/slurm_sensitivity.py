"""How much a second of Slurm's latency can move a replay by itself: which
slice of ee9e8c, at which speedup, lets `benchmarks/slurm_fidelity.py` measure hetsched's
fidelity rather than the chaos of an overloaded queue.

On Slurm every job starts a fraction of a second of wall time late (the agent's poll,
slurmctld's pass, the hand-over), which is that many seconds times the speedup X of trace
time. This replays, with no Slurm at all, each policy on each band of job lengths
(slurm_fidelity.band_trace): as is, with every arrival delayed by a uniform draw in
[0, LATENCY x X] trace seconds (``--seeds`` draws), and once with the restart penalty
raised by what a restart costs on Slurm (``--restart-wall`` wall seconds times X). Where
the average JCT of these replays moves by several per cent, a comparison of Slurm against a replay
cannot be within a few per cent however exact the agent is. X for each band is the one
that makes the replay's makespan ``--wall`` seconds of wall time (the benchmark's runs
must end within 15 minutes).

    python benchmarks/slurm_sensitivity.py --out benchmarks/results/slurm_sensitivity.csv

Prints a line per (band, policy) and writes one row per replay. Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

from common import write_csv
from slurm_fidelity import RESTART_PENALTY_S, TRACE, band_trace, replay

BANDS = ("12:36", "3:9", "2:6", "1:4")


def delayed(trace: Path, out: Path, seed: int, most_s: float) -> Path:
    """``trace`` (a Gavel trace: arrival in the 6th field) with every arrival delayed by a
    uniform draw in [0, most_s] seconds."""
    rng = random.Random(seed)
    lines = []
    for line in trace.read_text().splitlines():
        cells = line.split("\t")
        cells[5] = f"{float(cells[5]) + rng.uniform(0.0, most_s):.6f}"
        lines.append("\t".join(cells))
    out.write_text("\n".join(lines) + "\n")
    return out


def average(jcts: dict[str, float]) -> float:
    """The average JCT (s)."""
    return sum(jcts.values()) / len(jcts)


def main() -> None:
    """Replay each band and policy as is and delayed; print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bands", default=",".join(BANDS), help="LOW:HIGH hours, comma-separated")
    parser.add_argument("--policies", default="fifo,srtf,progress")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.4,
                        help="wall seconds of delay at most (Slurm's start latency)")
    parser.add_argument("--wall", type=float, default=870.0,
                        help="wall seconds the longest replay's makespan is compressed to")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--restart-wall", type=float, default=1.3,
                        help="wall seconds a restart on Slurm costs besides the emulator's "
                        "restart penalty (requeue to RUNNING of a job the policy moves at "
                        "once: mean 1.29 s at 12:36 h, X = 7,000): each band is also "
                        "replayed with the restart penalty plus that times X")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not TRACE.is_file():
        sys.exit(f"{TRACE} is absent: this benchmark needs ../shared/data")
    policies = args.policies.split(",")
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for band in args.bands.split(","):
            low, _, high = band.partition(":")
            trace = band_trace(folder, args.jobs, (float(low), float(high)))
            base: dict[str, float] = {}
            makespan = 0.0
            for policy in policies:
                out = folder / f"{low}-{policy}"
                base[policy] = average(replay(trace, policy, args.jobs, out))
                summary = json.loads((out / "summary.json").read_text())
                makespan = max(makespan, float(summary["makespan_s"]))
            speedup = makespan / args.wall
            for policy in policies:
                moved = []
                for seed in range(args.seeds):
                    shifted = delayed(trace, folder / f"{low}-{seed}.trace", seed,
                                      args.latency * speedup)
                    jct = average(replay(shifted, policy, args.jobs,
                                         folder / f"{low}-{policy}-{seed}"))
                    moved.append(100.0 * (jct / base[policy] - 1.0))
                    rows.append({"band_h": band, "speedup": round(speedup), "policy": policy,
                                 "case": "arrivals", "seed": seed,
                                 "latency_wall_s": args.latency,
                                 "restart_penalty_s": RESTART_PENALTY_S,
                                 "avg_jct_s": round(base[policy], 1),
                                 "delayed_avg_jct_s": round(jct, 1),
                                 "change_pct": round(moved[-1], 2),
                                 "avg_jct_wall_s": round(base[policy] / speedup, 1)})
                penalty = RESTART_PENALTY_S + args.restart_wall * speedup
                slow = average(replay(trace, policy, args.jobs, folder / f"{low}-{policy}-r",
                                      restart_penalty_s=penalty))
                rows.append({"band_h": band, "speedup": round(speedup), "policy": policy,
                             "case": "restarts", "seed": "", "latency_wall_s": 0.0,
                             "restart_penalty_s": round(penalty, 1),
                             "avg_jct_s": round(base[policy], 1),
                             "delayed_avg_jct_s": round(slow, 1),
                             "change_pct": round(100.0 * (slow / base[policy] - 1.0), 2),
                             "avg_jct_wall_s": round(base[policy] / speedup, 1)})
                spread = max(abs(m) for m in moved)
                print(f"band {band:>5} h  X {speedup:6.0f}  {policy:9} avg JCT "
                      f"{base[policy]:11,.0f} s ({base[policy] / speedup:5.1f} wall s)  "
                      f"delayed: mean {statistics.fmean(moved):+5.1f} %, "
                      f"largest {spread:4.1f} %  [{', '.join(f'{m:+.1f}' for m in moved)}]; "
                      f"restarts at {penalty:,.0f} s: {rows[-1]['change_pct']:+.1f} %",
                      flush=True)
    if args.out is not None:
        write_csv(args.out, rows)


if __name__ == "__main__":
    main()
