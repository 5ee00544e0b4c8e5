"""Tenants sharing a cluster (docs/fairness.md): each with a weight and, per GPU type, a
nominal quota and a borrowing limit, in the spirit of Kueue's ClusterQueue
(``nominalQuota``, ``borrowingLimit``), with quotas per GPU type as operators ask for
them (https://github.com/kai-scheduler/KAI-Scheduler/issues/1087).

A tenant is guaranteed its nominal quota of each type: GPUs of that type other tenants
hold beyond their own quotas are owed back while it waits. It may borrow idle GPUs
beyond its quota, up to its borrowing limit (none: any idle GPU). A tenant the table
does not name has weight 1 and no quota (it only ever borrows).

The file (``--tenants FILE``, :func:`hetsched.files.tenants.read_tenants`) is JSON::

    {"tenants": [
      {"name": "vision", "weight": 2,
       "quotas": {"v100": {"nominal": 8, "borrowing_limit": 4}, "k80": {"nominal": 4}}},
      {"name": "speech"}]}

With ``"preempt_for_shares": true`` beside ``"tenants"`` (a table of weights, no quotas),
a tenant below its weighted share takes GPUs back at its jobs' arrival
(:mod:`hetsched.policies.share_reclaim`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_WEIGHT, MIN_WEIGHT, check_name, check_range, check_unique

#: The most GPUs a quota or a borrowing limit names (a cluster of a million GPUs).
MAX_QUOTA_GPUS = 1_000_000


@dataclass(frozen=True)
class Quota:
    """A tenant's share of one GPU type: ``nominal`` GPUs guaranteed, and at most
    ``borrowing_limit`` more borrowed (``None``: no limit)."""

    nominal: int = 0
    borrowing_limit: int | None = None

    def __post_init__(self) -> None:
        gpus = f"an integer number of GPUs from 0 to {MAX_QUOTA_GPUS:,}"
        check_range(self.nominal, "nominal", gpus, 0, MAX_QUOTA_GPUS, integer=True)
        if self.borrowing_limit is not None:
            check_range(self.borrowing_limit, "borrowing_limit", gpus + ", or none", 0,
                        MAX_QUOTA_GPUS, integer=True)

    @property
    def most(self) -> float:
        """The most GPUs of the type the tenant may hold (nominal plus what it may borrow)."""
        return float("inf") if self.borrowing_limit is None \
            else float(self.nominal + self.borrowing_limit)


#: The quota of a type a tenant names none for: nothing guaranteed, any idle GPU borrowed.
NO_QUOTA = Quota()


@dataclass(frozen=True)
class Tenant:
    """A tenant: its name, weight (shares of fair GPU time) and quotas by GPU type."""

    name: str
    weight: float = 1.0
    quotas: Mapping[str, Quota] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name, "name", "tenant name")
        check_range(self.weight, "weight", f"a weight from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}",
                    MIN_WEIGHT, MAX_WEIGHT)
        for gpu_type, quota in self.quotas.items():
            check_name(gpu_type, f"quotas.{gpu_type}", "GPU type")
            if not isinstance(quota, Quota):
                raise InputError("not a quota", path=f"quotas.{gpu_type}", value=quota,
                                 expected="a Quota")
        object.__setattr__(self, "quotas", dict(self.quotas))

    def quota(self, gpu_type: str) -> Quota:
        """Its quota of ``gpu_type`` (:data:`NO_QUOTA` if it names none)."""
        return self.quotas.get(gpu_type, NO_QUOTA)


@dataclass(frozen=True)
class TenantTable:
    """The tenants of a cluster, by name (each named once)."""

    tenants: tuple[Tenant, ...] = ()
    #: a tenant below its weighted share of the GPUs takes GPUs back at its job's arrival
    #: from tenants above theirs (hetsched.policies.share_reclaim); not with quotas
    preempt_for_shares: bool = False

    def __post_init__(self) -> None:
        check_unique((t.name for t in self.tenants), "tenants[{index}].name",
                     "a tenant named twice", "each tenant once")
        object.__setattr__(self, "tenants", tuple(self.tenants))
        if not isinstance(self.preempt_for_shares, bool):
            raise InputError("not a boolean", path="preempt_for_shares",
                             value=self.preempt_for_shares, expected="true or false")
        if self.preempt_for_shares and self.has_quotas():
            raise InputError("preemption for shares with quotas", path="preempt_for_shares",
                             value=True, expected="false in a table with quotas (the quotas "
                             "reclaim GPUs their own way)")

    def check_cluster(self, cluster_types: Iterable[str], file: str | None = None) -> None:
        """An :class:`InputError` (naming ``file`` and the quota's JSON path) for the first
        quota on a GPU type not among ``cluster_types``: a quota the policy could never
        grant, most likely a typo (``V100`` for ``v100``, which the message names)."""
        types = list(dict.fromkeys(cluster_types))
        for index, tenant in enumerate(self.tenants):
            for gpu_type in tenant.quotas:
                if gpu_type in types:
                    continue
                raise InputError("quota on a GPU type the cluster lacks",
                                 path=f"$.tenants[{index}].quotas.{gpu_type}", value=gpu_type,
                                 expected=_one_of(gpu_type, types), file=file)

    def get(self, name: str) -> Tenant:
        """The tenant called ``name``; one of weight 1 and no quota if the table has none."""
        for tenant in self.tenants:
            if tenant.name == name:
                return tenant
        return Tenant(name)

    def has_quotas(self) -> bool:
        """Whether any tenant has a quota of some GPU type."""
        return any(tenant.quotas for tenant in self.tenants)

    def has_weights(self) -> bool:
        """Whether any tenant weighs other than 1."""
        return any(tenant.weight != 1.0 for tenant in self.tenants)

    def weights(self) -> dict[str, float]:
        """Each named tenant's weight."""
        return {tenant.name: tenant.weight for tenant in self.tenants}


def _one_of(name: str, types: list[str]) -> str:
    """``one of a, b`` (the cluster's GPU types), and the type ``name`` was likely meant
    to be when one differs from it only in case or in ``-``, ``_`` and blanks (``V100``
    for ``v100``): names are compared as written."""
    listed = "one of " + ", ".join(types) if types else "a GPU type of the cluster"
    close = [t for t in types if _loose(t) == _loose(name)]
    return f"{listed} (the cluster's is {close[0]!r}: names are compared as written)" \
        if close else listed


def _loose(name: str) -> str:
    return "".join(c for c in name.lower() if c not in "-_ ")
