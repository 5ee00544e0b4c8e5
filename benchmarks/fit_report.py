"""``hetsched fit --report`` on a realistic profile of about 5,000 rows: how long the
leave-one-out takes (it once refit the whole model per held-out point: about 80
minutes on 5,586 rows; target: 2 minutes).

The profile is synthetic, written here with the shape of a measured one (Sia's: model
families at several batch sizes on several GPU types, 1-32 GPUs packed and spread):
18 families x 4 batch sizes x 8 GPU types x (1 GPU + 3 packed + 5 spread counts), step
times from the model's own form (a compute term per job and GPU type plus a
communication term in log2 n and (n-1)/n per placement) with 3% log-normal noise and
3% of the rows dropped, seeded. It is written as a tidy CSV and run through the command
(``hetsched fit PROFILE -o MODEL --report``), then timed in the library:

- the local leave-one-out (the default: each held-out point refits its family on its
  GPU type only; exact, see hetsched.speeds.leave_one_out);
- a sample of whole refits (the old way), timed and checked to give the same
  predictions, float for float; their mean time per point times the number of held-out
  points is the old way's estimate.

Prints the figures and writes ``benchmarks/results/fit_report.csv``.

Usage: python benchmarks/fit_report.py [--sample N] [--csv OUT.csv]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hetsched.core.throughput import Placement
from hetsched.speeds.fit import fit_throughput_model
from hetsched.speeds.leave_one_out import held_out_keys, leave_one_out
from hetsched.speeds.profiles import Profile, ProfilePoint, read_profile, write_profile_csv

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = 18
BATCH_SIZES = (16, 32, 64, 128)
GPU_TYPES = ("a100", "a10", "v100", "t4", "p100", "k80", "rtx6000", "h100")
PACKED_COUNTS = (2, 4, 8)
SPREAD_COUNTS = (2, 4, 8, 16, 32)


def realistic_profile(seed: int = 0) -> Profile:
    """The benchmark's profile (module docstring)."""
    rng = np.random.default_rng(seed)
    speed = dict(zip(GPU_TYPES, (3.0, 1.4, 1.0, 0.45, 0.6, 0.2, 1.2, 5.5), strict=True))
    points = []
    for family in range(FAMILIES):
        compute = rng.uniform(0.05, 0.6)  # s per step on a v100 at batch 32
        comm = {Placement.PACKED: rng.uniform(0.002, 0.03),
                Placement.SPREAD: rng.uniform(0.02, 0.2)}
        for batch in BATCH_SIZES:
            job = f"net{family:02d} (batch size {batch})"
            for gpu in GPU_TYPES:
                base = compute * batch / 32 / speed[gpu]
                rows = [(1, Placement.PACKED)] + [(n, Placement.PACKED) for n in PACKED_COUNTS] \
                    + [(n, Placement.SPREAD) for n in SPREAD_COUNTS]
                for n, placement in rows:
                    step = base + comm[placement] * (np.log2(n) + (n - 1) / n)
                    noisy = step * float(np.exp(rng.normal(0.0, 0.03)))
                    if rng.random() < 0.03 and n > 1:
                        continue
                    points.append(ProfilePoint(job, gpu, n, placement, n / noisy))
    return Profile(tuple(points))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=12,
                        help="whole refits to time and compare (default 12)")
    parser.add_argument("--csv", type=Path, default=ROOT / "benchmarks" / "results" /
                        "fit_report.csv")
    args = parser.parse_args()
    profile = realistic_profile()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "profile.csv"
        write_profile_csv(profile, path)
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "hetsched", "fit", str(path), "-o",
                               str(Path(folder) / "model.json"), "--report"],
                              capture_output=True, text=True, check=True)
        command_s = time.perf_counter() - began
        read = read_profile(path)
    median = next(line for line in done.stdout.splitlines() if line.startswith("median"))
    keys = held_out_keys(read)
    print(f"profile: {len(read):,} rows, {len(read.job_types)} job types, "
          f"{len(read.gpu_types)} GPU types; {len(keys):,} points held out")
    print(f"hetsched fit --report (fit, leave-one-out, report): {command_s:.1f} s end to "
          f"end; {median}")
    rows.append({"what": "fit --report end to end", "rows": len(read),
                 "held_out": len(keys), "seconds": round(command_s, 2), "note": median})

    local = leave_one_out(read)
    print(f"local leave-one-out in the library: {local.runtime_s:.1f} s "
          f"({1000 * local.runtime_s / len(keys):.1f} ms per point)")
    rows.append({"what": "leave-one-out, local refits", "rows": len(read),
                 "held_out": len(keys), "seconds": round(local.runtime_s, 2),
                 "note": f"median APE {local.median_ape:.2f}%, p90 {local.p90_ape:.2f}%"})

    sample = keys[:: max(1, len(keys) // args.sample)][: args.sample]
    by_key = {(p.job_type, p.gpu_type, p.num_gpus, p.placement): p for p in local.points}
    began = time.perf_counter()
    same = 0
    for key in sample:
        model = fit_throughput_model(read.without(key))
        same += model.predict(*key).throughput == by_key[key].predicted
    per_point = (time.perf_counter() - began) / len(sample)
    estimate = per_point * len(keys)
    print(f"whole refits (the old way): {per_point:.2f} s per point on {len(sample)} "
          f"sampled points, {same} of {len(sample)} predictions identical to the local "
          f"ones; estimated {estimate / 60:.1f} min for all {len(keys):,}")
    rows.append({"what": "leave-one-out, whole refits (estimated)", "rows": len(read),
                 "held_out": len(keys), "seconds": round(estimate, 1),
                 "note": f"{per_point:.3f} s per point on {len(sample)} sampled; "
                 f"{same}/{len(sample)} predictions identical"})
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=("what", "rows", "held_out", "seconds",
                                                    "note"))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
