"""The tenants file (``--tenants FILE``; docs/fairness.md): a JSON document of
:class:`~hetsched.core.tenants.TenantTable`'s tenants, each error naming its JSON path::

    {"tenants": [
      {"name": "vision", "weight": 2,
       "quotas": {"v100": {"nominal": 8, "borrowing_limit": 4}, "k80": {"nominal": 4}}},
      {"name": "speech"}]}

and, beside ``"tenants"``, optionally ``"preempt_for_shares": true`` (a table of weights
without quotas; :mod:`hetsched.policies.share_reclaim`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.json_files import read_json
from hetsched.core.tenants import Quota, Tenant, TenantTable


def tenants_from_dict(document: Any) -> TenantTable:
    """The table of a parsed tenants document (module notes); an :class:`InputError` names
    the JSON path of anything wrong."""
    if not isinstance(document, dict) or "tenants" not in document or \
            not set(document) <= {"tenants", "preempt_for_shares"}:
        raise InputError("not a tenants document", path="$", value=document,
                         expected='{"tenants": [...], "preempt_for_shares": false} (the '
                         "second optional)")
    listed = document["tenants"]
    if not isinstance(listed, list):
        raise InputError("not a list", path="$.tenants", value=listed,
                         expected="a list of tenants")
    tenants = []
    for index, item in enumerate(listed):
        path = f"$.tenants[{index}]"
        try:
            tenants.append(_tenant(item))
        except InputError as error:
            raise error.at(path) from None
    try:
        return TenantTable(tuple(tenants), document.get("preempt_for_shares", False))
    except InputError as error:
        raise error.at("$") from None


def _tenant(item: Any) -> Tenant:
    keys = {"name", "weight", "quotas"}
    if not isinstance(item, dict) or "name" not in item or not set(item) <= keys:
        raise InputError("not a tenant", value=item,
                         expected='{"name": ..., "weight": ..., "quotas": {...}} (weight '
                         "and quotas optional)")
    quotas = item.get("quotas", {})
    if not isinstance(quotas, dict):
        raise InputError("not an object", path="quotas", value=quotas,
                         expected="{GPU type: {nominal, borrowing_limit}}")
    made: dict[str, Quota] = {}
    for gpu_type, quota in quotas.items():
        if not isinstance(quota, dict) or not set(quota) <= {"nominal", "borrowing_limit"}:
            raise InputError("not a quota", path=f"quotas.{gpu_type}", value=quota,
                             expected='{"nominal": GPUs, "borrowing_limit": GPUs} (both '
                             "optional)")
        try:
            made[gpu_type] = Quota(quota.get("nominal", 0), quota.get("borrowing_limit"))
        except InputError as error:
            raise error.at(f"quotas.{gpu_type}") from None
    return Tenant(item["name"], item.get("weight", 1.0), made)


def read_tenants(path: str | Path) -> TenantTable:
    """The tenant table of a JSON file (module notes)."""
    file = str(path)
    try:
        return tenants_from_dict(read_json(Path(path)))
    except InputError as error:
        raise error.in_file(file) from None
