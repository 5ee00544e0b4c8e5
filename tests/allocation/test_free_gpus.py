"""The free-GPU index with node classes (hetsched.allocation.free_gpus) answers every
request as scanning every node in cluster order does: random clusters, random sequences
of takes, releases and victims, on a master and on forks of it, against the scanning
index it replaced (``ScanIndex`` below, kept as the reference)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

import pytest

from hetsched.allocation.free_gpus import FreeGpuIndex, victim_gpus
from hetsched.allocation.layout import Start, layout, throughput_of
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import Placement, ThroughputModel, ThroughputTable


class ScanIndex:
    """The free-GPU index as it was before node classes (hetsched 0.x): every
    request scans the nodes in cluster order. The reference the node classes must match."""

    def __init__(self, cluster: Cluster, free: AbstractSet[str] = frozenset(),
                 victims: Mapping[str, int] | None = None) -> None:
        self._layout = layout(cluster)
        self.free: set[str] = set()
        self._node_free = [0] * len(self._layout.node_ids)
        self._type_free = dict.fromkeys(self._layout.type_names, 0)
        self.victims = dict(victims or {})
        type_of = self._layout.type_of
        self._victim_count = Counter(type_of[g] for g in self.victims)
        self.sync(free)

    def sync(self, free: AbstractSet[str]) -> None:
        """Make the free GPUs exactly ``free`` (ids not of the cluster are ignored)."""
        node_of = self._layout.node_of
        added = [gid for gid in free - self.free if gid in node_of]
        removed = self.free - free
        self._count(added, 1)
        self._count(removed, -1)
        self.free.update(added)
        self.free.difference_update(removed)

    def take(self, gpus: Iterable[str]) -> None:
        """Hand ``gpus`` out: free ones become busy, victims' ones are taken."""
        type_of = self._layout.type_of
        for gid in gpus:
            if gid in self.free:
                self._count((gid,), -1)
                self.free.discard(gid)
            elif self.victims.pop(gid, None) is not None:
                self._victim_count[type_of[gid]] -= 1

    def release(self, gpus: Iterable[str]) -> None:
        """Mark ``gpus`` free (those already free, or not of the cluster, are left)."""
        node_of = self._layout.node_of
        freed = [gid for gid in gpus if gid not in self.free and gid in node_of]
        self._count(freed, 1)
        self.free.update(freed)

    def keep(self, gpus: Iterable[str]) -> None:
        """``gpus`` stay with their running job: no longer victims."""
        type_of = self._layout.type_of
        for gid in gpus:
            if self.victims.pop(gid, None) is not None:
                self._victim_count[type_of[gid]] -= 1

    def available(self, gpu_type: str, with_victims: bool = False) -> int:
        """GPUs of ``gpu_type`` that could be given (free, plus victims' if asked)."""
        return self._type_free.get(gpu_type, 0) + (self._victim_count[gpu_type]
                                                   if with_victims else 0)

    def _count(self, gpus: Iterable[str], step: int) -> None:
        where = self._layout
        for gid in gpus:
            pos = where.node_of[gid]
            self._node_free[pos] += step
            self._type_free[where.node_type[pos]] += step

    def first_fit(self, job: Job, size: int, model: ThroughputModel) -> Start | None:
        """:meth:`FreeGpuIndex.first_fit` by scanning the nodes; no GPU shares, CPUs or
        memory."""
        where = self._layout
        node_free = self._node_free
        allowed = job.allowed_nodes
        best: int | None = None
        for gpu_type in where.type_names:
            if self._type_free[gpu_type] < size or not job.may_use(gpu_type) or \
                    throughput_of(model, job.job_type, gpu_type, size, Placement.PACKED) <= 0:
                continue
            for pos in where.nodes_by_type[gpu_type]:
                if best is not None and pos > best:
                    break
                if node_free[pos] >= size and (allowed is None or
                                               where.node_name[pos] in allowed):
                    best = pos
                    break
        if best is not None:
            packed = [gid for gid in where.node_ids[best] if gid in self.free]
            return Start(job.id, where.node_type[best], tuple(packed[:size]))
        if size < 2:
            return None
        for gpu_type in where.type_names:
            if self._type_free[gpu_type] < size or not job.may_use(gpu_type) or \
                    throughput_of(model, job.job_type, gpu_type, size, Placement.SPREAD) <= 0:
                continue
            ids: list[str] = []
            for pos in where.nodes_by_type[gpu_type]:
                if node_free[pos] and (allowed is None or where.node_name[pos] in allowed):
                    on_node = [gid for gid in where.node_ids[pos] if gid in self.free]
                    # A spread gang spans two nodes at least: size - 1 from the first.
                    ids.extend(on_node if ids else on_node[: size - 1])
                    if len(ids) >= size:
                        return Start(job.id, gpu_type, tuple(ids[:size]))
        return None

    def packed(self, gpu_type: str, size: int, nodes: tuple[str, ...] | None = None
               ) -> tuple[str, ...] | None:
        """:meth:`FreeGpuIndex.packed` by scanning the nodes of ``gpu_type``."""
        where = self._layout
        for pos in where.nodes_by_type.get(gpu_type, ()):
            if self._node_free[pos] >= size and (nodes is None or where.node_name[pos] in nodes):
                return tuple([g for g in where.node_ids[pos] if g in self.free][:size])
        return None

    def spread(self, gpu_type: str, size: int, nodes: tuple[str, ...] | None = None
               ) -> tuple[str, ...] | None:
        """:meth:`FreeGpuIndex.spread` by scanning the GPUs of ``gpu_type``."""
        if self._type_free.get(gpu_type, 0) < size:
            return None
        where = self._layout
        ids = [g for g in where.ids_by_type[gpu_type] if g in self.free and (
            nodes is None or where.node_name[where.node_of[g]] in nodes)]
        return tuple(ids[:size]) if len(ids) >= size else None

    def best_fit(self, job: Job, gpu_type: str, count: int, model: ThroughputModel,
                 with_victims: bool = False) -> tuple[str, ...] | None:
        """:meth:`FreeGpuIndex.best_fit` (its docstring says what it returns) by scoring
        every node of ``gpu_type``; no GPU shares, CPUs or memory."""
        if not job.may_use(gpu_type) or self.available(gpu_type, with_victims) < count:
            return None
        where = self._layout
        free = self.free
        victims = self.victims if with_victims else {}
        allowed = job.allowed_nodes
        packed_ok = throughput_of(model, job.job_type, gpu_type, count, Placement.PACKED) > 0
        best: tuple[tuple[int, int, int], tuple[str, ...]] | None = None
        if packed_ok:
            for index in where.nodes_by_type[gpu_type]:
                ids = where.node_ids[index]
                if len(ids) < count or (allowed is not None and
                                        where.node_name[index] not in allowed):
                    continue
                own = [g for g in ids if g in free]
                if len(own) < count and not victims:
                    continue
                taken = victim_gpus(ids, victims, count - len(own))
                if len(own) + len(taken) < count:
                    continue
                score = (len(taken), len(own) + len(taken), index)
                if best is None or score < best[0]:
                    best = (score, (*own, *taken)[:count])
                    if score[:2] == (0, count):
                        break  # an exact fit on free GPUs: nothing beats it
        if best is not None:
            return best[1]
        if count < 2 or throughput_of(model, job.job_type, gpu_type, count,
                                      Placement.SPREAD) <= 0:
            return None
        all_ids = where.ids_by_type[gpu_type]
        if allowed is not None:
            all_ids = [g for g in all_ids if where.node_name[where.node_of[g]] in allowed]
        own = [g for g in all_ids if g in free]
        chosen = (own + victim_gpus(all_ids, victims, count - len(own)))[:count]
        if len(chosen) < count:
            return None
        nodes = {where.node_of[g] for g in chosen}
        if len(nodes) == 1 and not packed_ok:
            return None
        return tuple(chosen)




def random_cluster(rng: random.Random) -> tuple[Cluster, ThroughputTable]:
    """3-40 nodes of 1-8 GPUs, two or three types interleaved; some configurations run
    only packed or only spread, some not at all."""
    types = ("v100", "p100", "k80")[: rng.choice((2, 3))]
    nodes = tuple(Node(f"n{i}", rng.choice(types), rng.choice((1, 2, 2, 4, 4, 8)))
                  for i in range(rng.randint(3, 40)))
    rows = [(job_type, gpu_type, count, placement, float(rng.randint(1, 20)))
            for job_type in ("cnn", "lm") for gpu_type in types
            for count in (1, 2, 3, 4, 6, 8) for placement in ("packed", "spread")
            if not (placement == "spread" and count == 1) and rng.random() < 0.85]
    return Cluster(tuple(GpuType(t) for t in types), nodes), ThroughputTable.from_rows(rows)


def same_answers(rng: random.Random, fast: FreeGpuIndex, scan: ScanIndex,
                 cluster: Cluster, table: ThroughputTable) -> None:
    """Every request gives the same answer on both indexes."""
    names = [n.name for n in cluster.nodes]
    assert fast.free == scan.free
    for gpu_type in cluster.type_names:
        for with_victims in (False, True):
            assert fast.available(gpu_type, with_victims) == scan.available(gpu_type,
                                                                            with_victims)
    for _ in range(12):
        nodes = tuple(rng.sample(names, rng.randint(1, 3))) if rng.random() < 0.2 else None
        allowed = rng.choice((None, None, ("v100",), ("p100", "k80")))
        size = rng.choice((1, 2, 3, 4, 6, 8))
        job = Job("j", 0.0, rng.choice(("cnn", "lm")), size, 10.0, allowed_gpu_types=allowed,
                  allowed_nodes=nodes)
        assert fast.first_fit(job, size, table) == scan.first_fit(job, size, table)
        gpu_type = rng.choice(cluster.type_names)
        assert fast.packed(gpu_type, size, nodes) == scan.packed(gpu_type, size, nodes)
        assert fast.spread(gpu_type, size, nodes) == scan.spread(gpu_type, size, nodes)
        for with_victims in (False, True):
            assert fast.best_fit(job, gpu_type, size, table, with_victims) == \
                scan.best_fit(job, gpu_type, size, table, with_victims)


def apply(rng: random.Random, indexes: Iterable[FreeGpuIndex | ScanIndex],
          ids: list[str]) -> None:
    """The same random takes, releases and keeps on every index."""
    gpus = rng.sample(ids, rng.randint(1, max(1, len(ids) // 4)))
    move = rng.random()
    for index in indexes:
        if move < 0.45:
            index.take(gpus)
        elif move < 0.9:
            index.release([*gpus, "not-a-gpu"])
        else:
            index.keep(gpus)


@pytest.mark.parametrize("seed", range(8))
def test_node_classes_answer_as_the_scan_on_masters_and_forks(seed: int) -> None:
    rng = random.Random(seed)
    cluster, table = random_cluster(rng)
    ids = [g.id for g in cluster.gpus]
    free = {g for g in ids if rng.random() < 0.6}
    master, scan = FreeGpuIndex(cluster, free), ScanIndex(cluster, free)
    for _ in range(15):
        apply(rng, (master, scan), ids)
        same_answers(rng, master, scan, cluster, table)
        # A policy's fork, with victims: changes stay in the fork.
        victims = {g: rng.randint(0, 5) for g in rng.sample(ids, len(ids) // 3)
                   if not master.is_free(g)}
        fork, scan_fork = master.fork(victims), ScanIndex(cluster, scan.free, victims)
        before = master.free
        for _ in range(4):
            apply(rng, (fork, scan_fork), ids)
            same_answers(rng, fork, scan_fork, cluster, table)
            again, scan_again = fork.fork(dict(fork.victims)), ScanIndex(
                cluster, scan_fork.free, dict(scan_fork.victims))
            same_answers(rng, again, scan_again, cluster, table)
        assert master.free == before
        assert master.free == scan.free


def test_a_fork_costs_nothing_and_reads_the_master_as_it_is() -> None:
    cluster = Cluster((GpuType("v100"),), tuple(Node(f"n{i}", "v100", 8) for i in range(500)))
    master = FreeGpuIndex(cluster, frozenset(cluster.gpu_by_id))
    fork = master.fork()
    assert (fork._taken, fork._freed, fork._node) == (set(), set(), {})  # no copy made
    fork.take(["n0/0", "n7/1"])
    assert (master.available("v100"), fork.available("v100")) == (4000, 3998)
    # The node classes put n0 and n7 (7 free) before the 498 full nodes in a best fit
    # of 7; first fit of 8 takes n1, the first node with 8 free.
    table = ThroughputTable.from_rows([("cnn", "v100", n, Placement.PACKED, 1.0)
                                       for n in (7, 8)])
    job = Job("j", 0.0, "cnn", 7, 10.0)
    assert fork.best_fit(job, "v100", 7, table) == tuple(f"n0/{k}" for k in range(1, 8))
    assert fork.first_fit(job, 8, table) == Start("j", "v100", tuple(f"n1/{k}"
                                                                      for k in range(8)))
    master.take(["n3/0"])  # a fork reads the master as it is now
    assert fork.first_fit(job, 8, table) == Start("j", "v100", tuple(f"n1/{k}"
                                                                      for k in range(8)))
    assert fork.available("v100") == 3997


@pytest.mark.parametrize("seed", range(4))
def test_requests_give_only_nodes_with_the_cpus_and_memory_a_job_needs(seed: int) -> None:
    # Nodes with 2-16 cores and 8-64 GB, half of them already partly used: whatever a
    # request returns, the job can hold it (GPUs free, CPUs and memory left on each node);
    # a job that needs none gets the scan's answer.
    rng = random.Random(seed)
    _, table = random_cluster(rng)
    types = sorted({key[1] for key in table.entries})
    nodes = tuple(Node(f"n{i}", rng.choice(types), rng.choice((1, 2, 4, 8)),
                       cpus=rng.choice((2, 4, 8, 16)), memory_gb=float(rng.choice((8, 64))))
                  for i in range(rng.randint(3, 30)))
    cluster = Cluster(tuple(GpuType(t) for t in types), nodes)
    master = FreeGpuIndex(cluster, frozenset(cluster.gpu_by_id))
    hog = Job("hog", 0.0, "cnn", 1, 1.0, cpus=1.5, memory_gb=6.0)
    for node in nodes[::2]:
        master.take([f"{node.name}/0"], hog)
    scan = ScanIndex(cluster, master.free)
    for _ in range(40):
        size = rng.choice((1, 2, 4, 8))
        job = Job("j", 0.0, rng.choice(("cnn", "lm")), size, 1.0,
                  cpus=rng.choice((None, 0.5, 3.0, 12.0)),
                  memory_gb=rng.choice((None, 1.0, 40.0)))
        fork = master.fork()
        start = fork.first_fit(job, size, table)
        if start is not None:
            assert fork.can_hold(start.gpus, job)
        gpu_type = rng.choice(types)
        gpus = fork.best_fit(job, gpu_type, size, table)
        if gpus is not None:
            assert fork.can_hold(gpus, job)
        if not job.needs_node_resources:
            assert start == scan.first_fit(job, size, table)
            assert gpus == scan.best_fit(job, gpu_type, size, table)


@pytest.mark.parametrize("seed", range(6))
def test_max_trees_find_the_node_a_scan_with_cpus_and_memory_finds(seed: int) -> None:
    # Packed requests of jobs that need CPUs and memory, on a master and on forks that
    # took GPUs, shares and CPUs: the node first fit and best fit choose is the one a
    # scan of every node in cluster order (free GPUs, then CPUs and memory left) finds.
    rng = random.Random(100 + seed)
    cluster = Cluster((GpuType("t"),), tuple(
        Node(f"n{i}", "t", rng.choice((1, 2, 4, 8)), cpus=rng.choice((4, 8, 32)),
             memory_gb=float(rng.choice((16, 64)))) for i in range(rng.randint(5, 60))))
    table = ThroughputTable.from_rows([("cnn", "t", n, Placement.PACKED, 1.0)
                                       for n in (1, 2, 4, 8)])
    where = layout(cluster)
    master = FreeGpuIndex(cluster, frozenset(cluster.gpu_by_id))
    ids = [g.id for g in cluster.gpus]

    def random_job(name: str) -> Job:
        size = rng.choice((1, 1, 2, 4))
        share = rng.choice((None, 0.5)) if size == 1 else None
        return Job(name, 0.0, "cnn", size, 1.0, cpus=rng.choice((0.5, 2.0, 6.0)),
                   memory_gb=rng.choice((1.0, 12.0)), gpu_share=share)

    def scan(index: FreeGpuIndex, job: Job, size: int) -> tuple[int | None, int | None]:
        fitting = [pos for pos in range(len(where.node_ids))
                   if index.node_free(pos) >= size and index._use.fits(pos, job, size)]
        tight = min(fitting, key=lambda pos: (index.node_free(pos), pos), default=None)
        return (min(fitting, default=None), tight)

    for round_ in range(12):
        for _ in range(rng.randint(1, 6)):  # the master moves: starts with CPUs, shares
            job = random_job(f"m{round_}")
            start = master.first_fit(job, job.num_gpus, table)
            if start is not None:
                master.take(start.gpus, job)
        fork = master.fork()
        for _ in range(rng.randint(0, 4)):
            job = random_job("f")
            start = fork.first_fit(job, job.num_gpus, table)
            if start is not None:
                fork.take(start.gpus, job)
        for index in (master, fork):
            for _ in range(8):
                job = random_job("q")
                if job.gpu_share is not None:
                    continue  # shares go to shared GPUs first: not a node request
                first, tight = scan(index, job, job.num_gpus)
                start = index.first_fit(job, job.num_gpus, table)
                assert (None if start is None else where.node_of[start.gpus[0]]) == first
                gpus = index.best_fit(job, "t", job.num_gpus, table)
                assert (None if gpus is None else where.node_of[gpus[0]]) == tight
        assert len(ids) == cluster.num_gpus()
