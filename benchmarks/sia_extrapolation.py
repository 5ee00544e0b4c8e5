"""How far the step model extrapolates from a few GPUs on Sia's measurements (issue 63):
every (application, GPU type) of Sia's ``traces/`` fitted on its measurements of at most
4 GPUs (:func:`hetsched.speeds.step_few.extrapolate_from_few`), every larger measurement
(placements and scalability rows, 5 to 64 GPUs) predicted; the median and p90 error per
GPU type and band of GPU count (5-8, 9-16, 17-32, 33-64), and how many rows no fit could
answer. Two fits side by side: ``one-node`` (the job type's few rows on one node, the
network across nodes calibrated on the other job types' few rows: the default) and
``own-cross`` (its own few rows across nodes fitted too).

    python benchmarks/sia_extrapolation.py                 # Sia's files in the scratch checkout
    python benchmarks/sia_extrapolation.py --sia SIA       # SIA: Sia's sia-simulator folder
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import RESULTS, write_csv

from hetsched.speeds.step_few import extrapolate_from_few
from hetsched.speeds.step_profiles import read_sia_profile

SIA = Path("/work/scratch/sia/artifacts/sia-simulator")
OUT = RESULTS / "sia" / "extrapolation.csv"


def main() -> None:
    """Fit, predict, print the bands and write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sia", type=Path, default=SIA,
                        help="Sia's sia-simulator folder (its traces/ are read)")
    parser.add_argument("--max-gpus", type=int, default=4)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not (args.sia / "traces").is_dir():
        sys.exit(f"{args.sia}/traces is absent: give --sia SIA (Sia's sia-simulator folder; "
                 "benchmarks/sia_side.py fetches it)")
    rows = read_sia_profile(args.sia / "traces")
    table: list[dict[str, object]] = []
    for fit, own_cross in (("one-node", False), ("own-cross", True)):
        found = extrapolate_from_few(rows, args.max_gpus, own_cross=own_cross)
        types = sorted({row.gpu_type for row in found.rows} |
                       {row.gpu_type for row in found.unanswered})
        for gpu_type in (None, *types):
            for band in found.bands(gpu_type):
                if band["rows"] or band["unanswered"]:
                    table.append({"fit": fit, "max_gpus": args.max_gpus, **band})
    for row in table:
        median, p90 = row["median_ape"], row["p90_ape"]
        print(f"{row['fit']:<9} {row['gpu_type']:<8} {row['gpus']:>6} GPUs: "
              f"{row['rows']:>5} rows, {row['unanswered']} unanswered, median "
              + (f"{median:.1f} %, p90 {p90:.1f} %" if isinstance(median, float)
                 and isinstance(p90, float) else "-"))
    write_csv(args.out, table)


if __name__ == "__main__":
    main()
