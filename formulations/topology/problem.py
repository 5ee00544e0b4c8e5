"""The topology-aware placement problem and its column (subset) form.

Given the free GPUs of a cluster and gangs to place (each a GPU type, a size ``k`` and a
communication sensitivity ``w``), choose concrete GPUs for every gang.

Cost of a gang ``S``: ``w * sum over pairs {g, h} of S of c(g, h)``, where ``c`` is the
pair cost of the topology graph (seconds per GB: ``1 / bandwidth`` of the direct link
inside a server, the network path between servers). Objective, lexicographic: first the
total communication cost, then fragmentation, the number of servers left partly free
(some free GPUs, some busy).

Column form (exact). A packed gang on node ``s`` uses a subset ``T`` of its free GPUs
with ``|T| = k``; its cost ``w * intra(T)`` is known in advance, and a server has at
most 2^8 subsets, so every (gang class, node, subset) is a column. A gang that may be
spread takes pieces ``T_1 .. T_m`` on several nodes; with a uniform network pair cost
``n`` its cost is ``sum_i intra(T_i) + n * sum_{i<l} |T_i||T_l|``
``= n k^2 / 2 + sum_i (intra(T_i) - n |T_i|^2 / 2)``, linear in the pieces, so pieces are
columns too. Gangs with equal (GPU type, size, sensitivity) that may not spread are one
class: which of them gets which subset does not change the cost.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster
from hetsched.files.interconnect import pair_cost

#: Integer resolution of costs in CP-SAT: 1e-6 seconds per GB.
COST_SCALE = 10**6


@dataclass(frozen=True)
class Gang:
    """One job to place: ``num_gpus`` GPUs of ``gpu_type``; ``sensitivity`` >= 0 weights its
    communication cost; ``allow_spread`` lets it take GPUs on several nodes; ``nodes``,
    when given, are the only nodes it may use (the job's ``allowed_nodes``)."""

    job: str
    gpu_type: str
    num_gpus: int
    sensitivity: float = 1.0
    allow_spread: bool = False
    nodes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.num_gpus < 1:
            raise InputError("bad gang size", path=self.job, value=self.num_gpus,
                             expected="an integer >= 1")
        if not (math.isfinite(self.sensitivity) and self.sensitivity >= 0):
            raise InputError("bad communication sensitivity", path=self.job,
                             value=self.sensitivity, expected="a finite number >= 0")


@dataclass(frozen=True)
class Column:
    """A candidate: ``owner`` (class index for whole gangs, gang index for pieces) takes
    ``gpus`` on ``node``; ``cost`` is its share of the objective (seconds per GB)."""

    owner: int
    piece: bool
    node: str
    gpus: tuple[str, ...]
    cost: float


@dataclass
class PlacementModel:
    """Everything a back-end needs: classes, columns and the constants of the objective."""

    cluster: Cluster
    gangs: tuple[Gang, ...]
    free: dict[str, tuple[str, ...]]  # node -> its free GPU ids
    classes: list[list[int]]  # class -> indices of its gangs (whole placements)
    columns: list[Column]
    spread_constant: dict[int, float]  # gang -> w n k^2 / 2 for gangs that may spread
    exact: bool = True  # False when the network cost is not uniform for a spreading type
    notes: list[str] = field(default_factory=list)

    def columns_on_gpu(self) -> dict[str, list[int]]:
        """GPU id -> indices of the columns that use it."""
        found: dict[str, list[int]] = defaultdict(list)
        for index, column in enumerate(self.columns):
            for gpu in column.gpus:
                found[gpu].append(index)
        return found

    def whole_columns_by_class(self) -> dict[int, list[int]]:
        """Class -> indices of its whole (packed) columns."""
        found: dict[int, list[int]] = {c: [] for c in range(len(self.classes))}
        for index, column in enumerate(self.columns):
            if not column.piece:
                found[column.owner].append(index)
        return found

    def pieces_by_node(self, gang: int) -> dict[str, list[int]]:
        """Node -> indices of the spread-piece columns of ``gang`` on it."""
        found: dict[str, list[int]] = defaultdict(list)
        for index, column in enumerate(self.columns):
            if column.piece and column.owner == gang:
                found[column.node].append(index)
        return found

    def columns_on_node(self) -> dict[str, list[int]]:
        """Node -> indices of the columns on it."""
        found: dict[str, list[int]] = defaultdict(list)
        for index, column in enumerate(self.columns):
            found[column.node].append(index)
        return found

    def max_cost(self) -> float:
        """An upper bound on the communication cost of any placement."""
        worst = 0.0
        by_owner: dict[tuple[bool, int], float] = defaultdict(float)
        for column in self.columns:
            key = (column.piece, column.owner)
            by_owner[key] = max(by_owner[key], abs(column.cost))
        for (piece, owner), cost in by_owner.items():
            if piece:
                worst += self.gangs[owner].num_gpus * cost + self.spread_constant[owner]
            else:
                worst += len(self.classes[owner]) * cost
        return worst


def intra_cost(cluster: Cluster, gpus: tuple[str, ...]) -> float:
    """Sum of pair costs over a set of GPUs."""
    return sum(pair_cost(cluster, a, b) for a, b in itertools.combinations(gpus, 2))


def build(cluster: Cluster, busy: frozenset[str] | set[str], gangs: tuple[Gang, ...],
          max_subsets: int = 200_000) -> PlacementModel:
    """The column model for placing ``gangs`` on the GPUs of ``cluster`` not in ``busy``."""
    free: dict[str, tuple[str, ...]] = {}
    for node in cluster.nodes:
        ids = tuple(g for g in node.gpu_ids() if g not in busy)
        if ids:
            free[node.name] = ids
    node_type = {node.name: node.gpu_type for node in cluster.nodes}
    classes: list[list[int]] = []
    class_key: dict[tuple[str, int, float, tuple[str, ...] | None], int] = {}
    owner_of: list[int] = []
    for index, gang in enumerate(gangs):
        if gang.allow_spread:
            classes.append([index])
            owner_of.append(len(classes) - 1)
            continue
        key = (gang.gpu_type, gang.num_gpus, gang.sensitivity, gang.nodes)
        if key not in class_key:
            class_key[key] = len(classes)
            classes.append([])
        classes[class_key[key]].append(index)
        owner_of.append(class_key[key])

    cost_cache: dict[tuple[str, ...], float] = {}

    def cost_of(gpus: tuple[str, ...]) -> float:
        if gpus not in cost_cache:
            cost_cache[gpus] = intra_cost(cluster, gpus)
        return cost_cache[gpus]

    columns: list[Column] = []
    for owner, members in enumerate(classes):
        gang = gangs[members[0]]
        for name, ids in free.items():
            if node_type[name] != gang.gpu_type or len(ids) < gang.num_gpus or (
                    gang.nodes is not None and name not in gang.nodes):
                continue
            for subset in itertools.combinations(ids, gang.num_gpus):
                columns.append(Column(owner, False, name, subset,
                                      gang.sensitivity * cost_of(subset)))
                if len(columns) > max_subsets:
                    raise InputError("placement model too large", value=len(columns),
                                     expected=f"at most {max_subsets} candidate GPU subsets")

    spread_constant: dict[int, float] = {}
    exact = True
    notes: list[str] = []
    for index, gang in enumerate(gangs):
        if not gang.allow_spread:
            continue
        nodes = [n for n in free if node_type[n] == gang.gpu_type
                 and (gang.nodes is None or n in gang.nodes)]
        network = _network_costs(cluster, nodes)
        if not network:
            spread_constant[index] = 0.0
            continue
        net = max(network)
        if max(network) - min(network) > 1e-12:
            exact = False
            notes.append(f"{gang.job}: network cost between {gang.gpu_type} nodes is not "
                         "uniform; spread pieces are priced at the largest")
        spread_constant[index] = gang.sensitivity * net * gang.num_gpus**2 / 2
        for name in nodes:
            ids = free[name]
            for size in range(1, min(gang.num_gpus - 1, len(ids)) + 1):
                for subset in itertools.combinations(ids, size):
                    cost = gang.sensitivity * (cost_of(subset) - net * size * size / 2)
                    columns.append(Column(index, True, name, subset, cost))
    return PlacementModel(cluster, gangs, free, classes, columns, spread_constant, exact, notes)


def _network_costs(cluster: Cluster, nodes: list[str]) -> set[float]:
    """Pair costs between the first GPUs of every two of ``nodes``."""
    firsts = [cluster.node_by_name[n].gpu_ids()[0] for n in nodes]
    return {round(pair_cost(cluster, a, b), 12) for a, b in itertools.combinations(firsts, 2)}


def fragmentation(cluster: Cluster, busy: set[str] | frozenset[str]) -> int:
    """How many nodes are partly free: some GPUs busy, some free."""
    count = 0
    for node in cluster.nodes:
        used = sum(1 for g in node.gpu_ids() if g in busy)
        count += 0 < used < node.num_gpus
    return count


def placement_cost(cluster: Cluster, gangs: tuple[Gang, ...],
                   placement: dict[str, tuple[str, ...]]) -> float:
    """The communication cost of a placement, computed from the graph (not a model)."""
    return sum(g.sensitivity * intra_cost(cluster, placement[g.job]) for g in gangs
               if g.job in placement)
