"""Do two versions of hetsched replay the same traces the same way? One replay per
(trace, policy) cell in fresh processes, the SHA-256 of summary.json, jobs.csv and
decisions.csv of each, written to a CSV; ``--compare OLD.csv`` says, cell by cell,
whether the files are byte-identical to an earlier run's (e.g. before a change that must
not change any replay).

    python benchmarks/same_replays.py --out /tmp/before.csv
    (change the code)
    python benchmarks/same_replays.py --out /tmp/after.csv --compare /tmp/before.csv

Cells: Gavel's ee9e8c trace (first 300 jobs, v100=36,p100=36,k80=36) under every
registered policy; Alibaba's openb pod list (first 400 pods, on its own 1,213 nodes with
the aliases of docs/traces.md) under the baselines and ``progress`` when ``--openb DIR``
holds the clusterdata files; Pollux's workload 6 (load 1.0, 64 T4s, every job elastic)
under ``progress-elastic``. Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GAVEL = ROOT.parent / "shared" / "data" / "gavel" / "traces" / "ee9e8c.trace"
PHILLY = ROOT.parent / "shared" / "data" / "philly" / "philly.csv"
POLLUX_WORKLOAD = ROOT.parent / "shared" / "data" / "pollux" / "workloads" / "workload-6.csv"
FILES = ("summary.json", "jobs.csv", "decisions.csv")
OPENB_ALIASES = "v100m16=v100,v100m32=v100,a10=v100,g2=v100,g3=a100"
OPENB_POLICIES = ("fifo", "sjf", "srtf", "edf", "tiresias", "gandiva", "gavel", "optimus",
                  "progress")


def digest(path: Path, ignore: tuple[str, ...] = ()) -> str:
    """The first 16 hex digits of the file's SHA-256 (of a JSON file without the keys
    ``ignore``, written back the way hetsched writes it, when some are given)."""
    data = path.read_bytes()
    if ignore and path.suffix == ".json":
        document = {k: v for k, v in json.loads(data).items() if k not in ignore}
        data = (json.dumps(document, indent=1) + "\n").encode()
    return hashlib.sha256(data).hexdigest()[:16]


def cells(openb: Path | None, policies: list[str],
          philly_jobs: int = 0) -> list[tuple[str, str, list[str]]]:
    """``(trace label, policy, replay arguments)`` for every cell."""
    found = [("ee9e8c-300", policy, [str(GAVEL), "--format", "gavel", "--cluster",
                                     "v100=36,p100=36,k80=36", "--limit-jobs", "300"])
             for policy in policies]
    if philly_jobs:
        # A long queue (the first jobs of Philly on a sixth of its cluster): the cells
        # where a decision walks hundreds of pending jobs.
        found += [(f"philly-{philly_jobs}", policy, [
            str(PHILLY), "--format", "philly", "--cluster", "v100=32,p100=32,k80=32",
            "--limit-jobs", str(philly_jobs)]) for policy in policies]
    if openb is not None:
        found += [("openb-400", policy, [
            str(openb / "openb_pod_list_gpuspec33.csv"), "--format", "openb", "--cluster",
            f"openb:{openb / 'openb_node_list_gpu_node.csv'}", "--gpu-alias", OPENB_ALIASES,
            "--limit-jobs", "400"]) for policy in OPENB_POLICIES if policy in policies]
    if "progress-elastic" in policies:
        found.append(("pollux-6", "progress-elastic", [
            str(POLLUX_WORKLOAD), "--format", "pollux", "--cluster", "t4=64x4", "--elastic"]))
    return found


def main() -> None:
    """Run every cell, write the CSV, compare with an earlier one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default=None, help="default: every registered one")
    parser.add_argument("--openb", type=Path, default=None,
                        help="a folder with openb_pod_list_gpuspec33.csv and "
                        "openb_node_list_gpu_node.csv")
    parser.add_argument("--philly-jobs", type=int, default=0,
                        help="also replay the first N jobs of Philly on v100=32,p100=32,"
                        "k80=32 (a long queue)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, default=None)
    parser.add_argument("--ignore-summary-keys", default="",
                        help="comma-separated summary.json keys left out of its hash (keys "
                        "a change added on purpose)")
    args = parser.parse_args()
    if not GAVEL.is_file():
        sys.exit(f"{GAVEL} is absent: this benchmark needs ../shared/data")
    import hetsched

    policies = args.policies.split(",") if args.policies else list(hetsched.names())
    ignore = tuple(k for k in args.ignore_summary_keys.split(",") if k)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for label, policy, replay_args in cells(args.openb, policies, args.philly_jobs):
            out = Path(folder) / f"{label}-{policy}"
            began = time.perf_counter()
            subprocess.run([sys.executable, "-m", "hetsched", "replay", *replay_args,
                            "--policy", policy, "--out", str(out)], cwd=ROOT, check=True,
                           capture_output=True)
            wall = time.perf_counter() - began
            row = {"trace": label, "policy": policy, "wall_s": round(wall, 1),
                   **{name: digest(out / name, ignore) for name in FILES}}
            rows.append(row)
            print(f"{label:11} {policy:13} {wall:6.1f} s  "
                  + "  ".join(f"{name} {row[name]}" for name in FILES), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["trace", "policy", "wall_s", *FILES])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out}")
    if args.compare is not None:
        with args.compare.open(newline="", encoding="utf-8") as handle:
            before = {(r["trace"], r["policy"]): r for r in csv.DictReader(handle)}
        differ = 0
        for row in rows:
            old = before.get((str(row["trace"]), str(row["policy"])))
            if old is None:
                continue
            changed = [name for name in FILES if old[name] != row[name]]
            differ += bool(changed)
            print(f"{row['trace']:10} {row['policy']:13} "
                  + ("identical" if not changed else "DIFFERENT: " + ", ".join(changed))
                  + f"  ({old['wall_s']} s -> {row['wall_s']} s)")
        print(f"{differ} cells differ")


if __name__ == "__main__":
    main()
