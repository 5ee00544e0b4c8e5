"""Two runs of ``benchmarks/bench_policies.py`` side by side, cell by cell: each replay's
wall time and figures before and after a change (for a target such as "2x faster
with the same figures").

Run the bench at the older commit (a ``git worktree`` with its own virtual environment)
and at this one, one after the other on the same machine, each with ``--out``, then

    python benchmarks/before_after.py BEFORE_DIR AFTER_DIR \\
        --before-s 1426.7 --after-s 639.1 --label fa1b916 --out results/bench/X.csv

prints the end-to-end speed-up (the ``--before-s`` / ``--after-s`` wall times the
benches printed), the replays' summed wall times, and, per policy, whether every figure
(all results.csv columns both runs have, wall-clock ones aside) is the same; writes one
row per cell (trace, policy, load) with ``figures_identical`` and the columns that
differ.
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

#: Columns that measure the machine, not the schedule.
WALL_CLOCK = frozenset({"wall_time_s", "cpu_time_s", "decision_time_p50_s",
                        "decision_time_p95_s", "decision_time_max_s", "solver_versions"})
#: Columns added by later versions of the bench or naming the code, not the schedule.
NOT_FIGURES = frozenset({"bound_lp_avg_jct_s", "bound_lp_status", "avg_jct_over_lp_bound",
                         "solver_limit", "throughput", "trace", "notes", "warnings"})


def cells(folder: Path) -> dict[tuple[str, str, str, str], dict[str, str]]:
    """Every row of the folder's ``*/results.csv`` by (trace folder, policy, seed, load)."""
    found = {}
    for results in sorted(folder.glob("*/results.csv")):
        with results.open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                found[(results.parent.name, row["policy"], row["seed"], row["load"])] = row
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--before-s", type=float, required=True,
                        help="the before bench's end-to-end wall time (s)")
    parser.add_argument("--after-s", type=float, required=True)
    parser.add_argument("--label", default="before", help="what the before run was")
    parser.add_argument("--out", type=Path, required=True, help="the CSV to write")
    args = parser.parse_args()
    before, after = cells(args.before), cells(args.after)
    if before.keys() != after.keys():
        raise SystemExit(f"error: the two benches ran other cells: "
                         f"{sorted(before.keys() ^ after.keys())[:5]}")
    records = []
    same_by_policy: dict[str, list[bool]] = defaultdict(list)
    for key in sorted(before):
        old, new = before[key], after[key]
        columns = [c for c in old if c in new and c not in WALL_CLOCK | NOT_FIGURES]
        differ = [c for c in columns if old[c] != new[c]]
        same_by_policy[key[1]].append(not differ)
        records.append({
            "trace": key[0], "policy": key[1], "seed": key[2], "load": key[3],
            "wall_s_before": old["wall_time_s"], "wall_s_after": new["wall_time_s"],
            "avg_jct_h_before": f"{float(old['avg_jct_s']) / 3600:.3f}",
            "avg_jct_h_after": f"{float(new['avg_jct_s']) / 3600:.3f}",
            "deadline_met_before": old["deadline_met"], "deadline_met_after": new["deadline_met"],
            "figures_identical": not differ, "columns_differing": " ".join(differ)})
    summed = [sum(float(rows[k]["wall_time_s"]) for k in rows) for rows in (before, after)]
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, list(records[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    print(f"{len(records)} cells; end to end {args.label} {args.before_s / 60:.1f} min, "
          f"after {args.after_s / 60:.1f} min: {args.before_s / args.after_s:.2f}x; replays' "
          f"wall times summed {summed[0]:.0f} s -> {summed[1]:.0f} s "
          f"({summed[0] / summed[1]:.2f}x)")
    for policy, same in sorted(same_by_policy.items()):
        print(f"  {policy}: figures identical in {sum(same)} of {len(same)} cells")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
