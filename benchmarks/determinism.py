"""Are replays reproducible? The same ``hetsched replay`` command run several times per
policy, each in a fresh process; the SHA-256 of summary.json, jobs.csv and decisions.csv
of every run, and whether all runs of a policy agree byte for byte.

    python benchmarks/determinism.py                     # deadline, allox, gavel, srtf
    python benchmarks/determinism.py --runs 3 --jobs 300 --policies deadline,srtf

Needs ../shared/data (Gavel's ee9e8c trace). Prints one line per run and writes
benchmarks/results/determinism.csv (policy, run, wall_s, the three hashes, identical).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "gavel" / "traces" / "ee9e8c.trace"
FILES = ("summary.json", "jobs.csv", "decisions.csv")
RESULTS = ROOT / "benchmarks" / "results" / "determinism.csv"


def digest(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def main() -> None:
    """Run every policy ``--runs`` times, compare, write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default="deadline,allox,gavel,srtf")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not TRACE.is_file():
        sys.exit(f"{TRACE} is absent: this benchmark needs ../shared/data")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for policy in args.policies.split(","):
            hashes = []
            for run in range(args.runs):
                out = Path(folder) / f"{policy}-{run}"
                began = time.perf_counter()
                subprocess.run([sys.executable, "-m", "hetsched", "replay", str(TRACE), "--format",
                                "gavel", "--cluster", "v100=36,p100=36,k80=36", "--policy",
                                policy, "--limit-jobs", str(args.jobs), "--out", str(out)],
                               cwd=ROOT, check=True, capture_output=True)
                wall = time.perf_counter() - began
                found = tuple(digest(out / name) for name in FILES)
                hashes.append(found)
                rows.append({"policy": policy, "run": run + 1, "jobs": args.jobs,
                             "wall_s": round(wall, 1),
                             **dict(zip(FILES, found, strict=True))})
                print(f"{policy:9} run {run + 1}: {wall:6.1f} s  " + "  ".join(
                    f"{name} {value}" for name, value in zip(FILES, found, strict=True)),
                    flush=True)
            same = len(set(hashes)) == 1
            for row in rows:
                if row["policy"] == policy:
                    row["identical"] = same
            print(f"{policy}: {'identical' if same else 'DIFFERENT'} over {args.runs} runs")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["policy", "run", "jobs", "wall_s", *FILES,
                                                    "identical"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
