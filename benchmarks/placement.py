"""Topology-aware placement at scale: solve time, gap, and predicted throughput against
first-fit and random placement.

Cases
- ``dgx1``: 64 gangs of 1-8 GPUs (Gavel job types, probabilities 0.50/0.25/0.17/0.08) on
  32 DGX-1 servers (256 V100s, real `nvidia-smi topo -m` links) with 30% of the GPUs
  busy (77 GPUs held by earlier gangs of the same size mix, each on a random node).
  Communication sensitivity of a gang = 1 - spread / packed throughput in Gavel's
  measurements.
- ``pai``: the Alibaba PAI inventory (1,814 GPU machines, 6,742 GPUs; V100/V100M32
  machines get the DGX-1 links, MISC 8-GPU machines the PCIe-only DGX-1 links, 2-GPU
  machines PIX), 30% busy, 200 gangs; speeds from the project's built-in catalogue
  (v100m32 priced as v100, misc as t4: PAI publishes no per-type speeds).

Prints a table and writes benchmarks/results/placement.csv.
Usage: python benchmarks/placement.py [--quick] [--time-limit 5] [--backends cpsat,highs,cbc]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from hetsched.core.records import Cluster, Instance, Job
from hetsched.core.throughput import Placement, ThroughputModel, ThroughputTable
from hetsched.files.generate import catalogue_table
from hetsched.files.interconnect import (
    communication_sensitivity,
    pai_cluster,
    predicted_throughput,
    read_topology,
    server_cluster,
)
from hetsched.formulations.topology import Gang, place
from hetsched.policies.topology import first_fit, random_placement

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
#: Gang sizes and their probabilities (new gangs and the earlier ones holding busy GPUs).
SIZES = {1: 0.50, 2: 0.25, 4: 0.17, 8: 0.08}


def busy_gpus(cluster: Cluster, fraction: float, sizes: dict[int, float],
              rng: np.random.Generator) -> set[str]:
    """GPUs held by earlier gangs: gangs drawn from ``sizes`` put on random free GPUs of a
    random node that holds them, until ``fraction`` of the cluster is busy."""
    target = round(fraction * len(cluster.gpus))
    busy: set[str] = set()
    while len(busy) < target:
        count = min(int(rng.choice(list(sizes), p=list(sizes.values()))), target - len(busy))
        nodes = [n for n in cluster.nodes if sum(g not in busy for g in n.gpu_ids()) >= count]
        if not nodes:
            count = 1
            nodes = [n for n in cluster.nodes if any(g not in busy for g in n.gpu_ids())]
        node = nodes[int(rng.integers(len(nodes)))]
        free = [g for g in node.gpu_ids() if g not in busy]
        busy.update(str(g) for g in rng.choice(free, size=count, replace=False))
    return busy


def gavel_speeds() -> ThroughputModel:
    from hetsched.speeds.fit import throughput_model
    from hetsched.speeds.profiles import read_gavel_throughputs

    profile = read_gavel_throughputs(DATA / "gavel" / "simulation_throughputs.json")
    return throughput_model(profile, mode="measured")


def workload(cluster: Cluster, throughput: ThroughputModel, jobs: int, sizes: dict[int, float],
             types: list[str], rng: np.random.Generator) -> tuple[Instance, list[Gang]]:
    """Random gangs of measured job types, each on one GPU type where it runs packed."""
    names = sorted(_job_types(throughput))
    chosen: list[Job] = []
    gangs: list[Gang] = []
    placed_on: dict[str, str] = {}
    while len(chosen) < jobs:
        count = int(rng.choice(list(sizes), p=list(sizes.values())))
        job_type = names[int(rng.integers(len(names)))]
        # A gang goes to a type whose servers can hold it: 4- and 8-GPU gangs do not
        # land on PAI's 2-GPU machines.
        fits = [t for t in types if max(n.num_gpus for n in cluster.nodes_of_type(t)) >= count]
        gpu_type = fits[int(rng.integers(len(fits)))]
        if throughput.throughput(job_type, gpu_type, count, Placement.PACKED) <= 0:
            continue
        job = Job(f"j{len(chosen)}", 0.0, job_type, count, 1.0)
        chosen.append(job)
        placed_on[job.id] = gpu_type
    instance = Instance(cluster, tuple(chosen), throughput)
    for job in chosen:
        gpu_type = placed_on[job.id]
        gangs.append(Gang(job.id, gpu_type, job.num_gpus,
                          communication_sensitivity(instance, job, gpu_type, job.num_gpus)))
    return instance, gangs


def _job_types(throughput: ThroughputModel) -> set[str]:
    table = throughput if isinstance(throughput, ThroughputTable) else None
    if table is None:
        raise TypeError("expected a measured table")
    return set(table.job_types)


def allow_spread_where_needed(cluster: Cluster, busy: set[str], gangs: list[Gang],
                              instance: Instance) -> list[Gang]:
    """Gangs in order; one that first fit cannot place packed may spread (if its spread
    throughput is positive), one that still does not fit is left out."""
    placed: list[Gang] = []
    for gang in gangs:
        try:
            first_fit(cluster, busy, [*placed, gang])
            placed.append(gang)
            continue
        except ValueError:
            pass
        job = instance.job_by_id[gang.job]
        if instance.throughput.throughput(job.job_type, gang.gpu_type, gang.num_gpus,
                                          Placement.SPREAD) <= 0:
            continue
        spread = Gang(gang.job, gang.gpu_type, gang.num_gpus, gang.sensitivity, True)
        try:
            first_fit(cluster, busy, [*placed, spread])
            placed.append(spread)
        except ValueError:
            continue
    return placed


def total_throughput(instance: Instance, gangs: list[Gang],
                     placement: dict[str, tuple[str, ...]]) -> float:
    """Predicted steps/s summed over the gangs placed (an unplaced gang adds 0)."""
    return sum(predicted_throughput(instance, instance.job_by_id[g.job], g.gpu_type,
                                    placement[g.job]) for g in gangs if g.job in placement)


def run_case(name: str, cluster: Cluster, instance: Instance, busy: set[str], gangs: list[Gang],
             backends: list[str], time_limit: float, rows: list[dict[str, object]]) -> None:
    asked = len(gangs)
    gangs = allow_spread_where_needed(cluster, busy, gangs, instance)
    baseline = first_fit(cluster, busy, gangs)
    ff = total_throughput(instance, gangs, baseline)
    randoms = [total_throughput(instance, gangs, random_placement(cluster, busy, gangs, seed,
                                                                spread_if_needed=True))
               for seed in range(5)]
    print(f"\n[{name}] {len(cluster.gpus)} GPUs, {len(busy)} busy, {len(gangs)} gangs "
          f"({sum(g.num_gpus for g in gangs)} GPUs, {sum(g.allow_spread for g in gangs)} may "
          f"spread; {asked - len(gangs)} left out: no room)", flush=True)
    print(f"  first fit: predicted {ff:,.1f} steps/s; random (5 seeds): "
          f"{np.mean(randoms):,.1f} +- {np.std(randoms):,.1f}")
    for backend in backends:
        started = time.perf_counter()
        outcome = place(cluster, busy, tuple(gangs), backend=backend, time_limit_s=time_limit,
                        threads=2, hint=baseline)
        wall = time.perf_counter() - started
        if not outcome.placement:
            print(f"  {backend}: {outcome.status.value} in {wall:.2f} s ({outcome.message})")
            continue
        predicted = total_throughput(instance, gangs, outcome.placement)
        gap = None if outcome.bound is None else (
            (outcome.cost - outcome.bound) / max(outcome.cost, 1e-12))
        gap_text = "-" if gap is None else f"{100 * gap:.3f}%"
        print(f"  {backend}: {outcome.status.value} cost {outcome.cost:.4f} bound "
              f"{outcome.bound if outcome.bound is not None else '-'} gap {gap_text} "
              f"in {wall:.2f} s (model+solve); predicted {predicted:,.1f} steps/s = "
              f"{predicted / ff:.3f} x first fit, {predicted / np.mean(randoms):.3f} x random",
              flush=True)
        rows.append({"case": name, "backend": backend, "gpus": len(cluster.gpus),
                     "busy": len(busy), "gangs": len(gangs), "status": outcome.status.value,
                     "cost": outcome.cost, "bound": outcome.bound, "gap": gap,
                     "wall_s": round(wall, 3), "fragmentation": outcome.fragmentation,
                     "throughput_topology": predicted, "throughput_first_fit": ff,
                     "throughput_random_mean": float(np.mean(randoms))})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the DGX-1 case only")
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--backends", default="cpsat,highs,cbc")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"needs the real data in {DATA}", file=sys.stderr)
        return 2
    backends = args.backends.split(",")
    rng = np.random.default_rng(args.seed)
    rows: list[dict[str, object]] = []

    dgx1 = read_topology(DATA / "topology" / "dgx1-v100.nvidia-smi-topo.txt")
    cluster = server_cluster(dgx1, 32, "v100")
    busy = busy_gpus(cluster, 0.30, SIZES, rng)
    gavel = gavel_speeds()
    instance, gangs = workload(cluster, gavel, 64, SIZES, ["v100"], rng)
    run_case("dgx1", cluster, instance, busy, gangs, backends, args.time_limit, rows)

    if not args.quick:
        pcie = read_topology(DATA / "topology" / "dgx1-v100-pcie-only.nvidia-smi-topo-mp.txt")
        pai = pai_cluster(DATA / "alibaba" / "pai_machine_spec.csv",
                          servers={"v100": dgx1, "v100m32": dgx1, "misc": pcie})
        like = {"p100": "p100", "t4": "t4", "v100": "v100", "v100m32": "v100", "misc": "t4"}
        speeds = catalogue_table({t: like[t] for t in pai.type_names}, counts=(1, 2, 4, 8))
        busy = busy_gpus(pai, 0.30, SIZES, rng)
        instance, gangs = workload(pai, speeds, 200, SIZES, list(pai.type_names), rng)
        run_case("pai", pai, instance, busy, gangs, backends, args.time_limit * 6, rows)

    if not rows:
        print("no solve returned a placement", file=sys.stderr)
        return 1
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "placement.csv"
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
