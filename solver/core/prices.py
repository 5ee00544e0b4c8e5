"""What a GPU costs: a price per GPU-hour (USD) for each GPU type, and the cost of what ran.

:data:`GAVEL_PRICES` are Gavel's, the only fixed prices in its code (Narayanan et
al., OSDI 2020; stanford-futuredata/gavel at c4fa400, ``scheduler/utils.py:269-273``,
``read_per_instance_type_spot_prices_json``): Google Cloud's preemptible prices of one
GPU in 2020. Gavel's cost policy reads them for the ``gcp`` cloud; for AWS and Azure it
reads spot-price logs that change over time, which hetsched does not model.

A GPU type's price is its ``price_per_hour`` (:class:`~hetsched.core.cluster.GpuType`):
from a cluster file, else, for ``--cluster v100=36``, the catalogue of
:mod:`hetsched.files.generate` (Google Cloud's on-demand prices, about 3.35 times
Gavel's, in the same ratios to 2 %), and a replay's ``--prices`` (:func:`parse_prices`,
:func:`with_prices`) overrides both. A policy may be given its own ``prices`` over the
cluster's (:func:`prices_for`). A type with no price is a :class:`ValueError` naming it;
:data:`GAVEL_PRICES` are Gavel's, for reproducing its figures
(``--prices v100=0.74,p100=0.43,k80=0.135``), not a silent default.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_PRICE_PER_HOUR, Range, name_value_items, text_float

if TYPE_CHECKING:  # (not at run time: the settings import this module, and stay light)
    from hetsched.core.cluster import Cluster, GpuType
    from hetsched.core.result import Assignment

#: USD per GPU-hour by GPU type: Gavel's (see the module).
GAVEL_PRICES: Mapping[str, float] = MappingProxyType({"v100": 0.74, "p100": 0.43, "k80": 0.135})

#: The range of a price (USD per GPU-hour).
PRICE_RANGE = Range(0.0, MAX_PRICE_PER_HOUR, low_open=True)

#: Seconds in an hour (prices are per hour, times in seconds).
SECONDS_PER_HOUR = 3600.0


def check_prices(prices: Mapping[str, float]) -> dict[str, float]:
    """``prices`` as a plain dict, every price a finite number > 0 (USD per GPU-hour);
    a :class:`ValueError` naming the first GPU type that has another."""
    checked: dict[str, float] = {}
    for gpu_type, price in prices.items():
        if isinstance(price, bool) or not isinstance(price, int | float) or not (
                math.isfinite(price) and price > 0):
            raise ValueError(f"the price of GPU type {gpu_type!r} must be a number > 0 (USD "
                             f"per GPU-hour), got {price!r}")
        checked[gpu_type] = float(price)
    return checked


def prices_for(gpu_types: Sequence[GpuType], prices: Mapping[str, float] | None = None
               ) -> tuple[float, ...]:
    """The price of each of ``gpu_types`` (USD per GPU-hour), in their order: from
    ``prices``, else the type's own ``price_per_hour``. A type with no price, or a price
    of 0, is a :class:`ValueError` naming it."""
    given = check_prices(prices or {})
    found = []
    for gpu_type in gpu_types:
        price = given.get(gpu_type.name, gpu_type.price_per_hour)
        if price is None:
            raise ValueError(f"GPU type {gpu_type.name!r} has no price: give one with "
                             "--prices (e.g. Gavel's: v100=0.74,p100=0.43,k80=0.135), or "
                             "price_per_hour in the cluster file")
        found.append(check_prices({gpu_type.name: price})[gpu_type.name])
    return tuple(found)


_PRICE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)=([0-9.eE+-]+)$")


def parse_prices(text: str | Mapping[str, float] | None) -> dict[str, float]:
    """``v100=0.74,k80=0.135`` (or a mapping) -> ``{"v100": 0.74, "k80": 0.135}``: USD
    per GPU-hour by GPU type, each in :data:`PRICE_RANGE` (ASCII digits); an
    :class:`InputError` naming the entry otherwise, and for blank text (an empty list is
    not "the cluster's own prices": give none for those). ``None`` or ``{}``: none."""
    expected = (f"GPU_TYPE=USD_PER_GPU_HOUR[,...], each price {PRICE_RANGE.expected}, "
                "e.g. v100=0.74,k80=0.135")
    if isinstance(text, str) and not text.strip():  # (not "the cluster's prices")
        raise InputError("empty price list", path="prices", value=text, expected=expected)
    prices: dict[str, float] = {}
    for item in name_value_items(text, "bad prices", "prices", expected):
        match = _PRICE.match(item)
        try:
            price = text_float(match.group(2)) if match else math.nan
        except ValueError:
            price = math.nan
        if match is None or price not in PRICE_RANGE:
            raise InputError("bad price", path="prices", value=item, expected=expected)
        if match.group(1) in prices:
            raise InputError("GPU type priced twice", path="prices", value=match.group(1),
                             expected="each GPU type once")
        prices[match.group(1)] = price
    return prices


def with_prices(cluster: Cluster, prices: Mapping[str, float]) -> Cluster:
    """``cluster`` with its GPU types' ``price_per_hour`` set from ``prices`` (the rest
    kept); a price for a type the cluster lacks is an :class:`InputError`."""
    if not prices:
        return cluster
    names = set(cluster.type_names)
    for name in prices:
        if name not in names:
            raise InputError("price for a GPU type the cluster lacks", path="prices",
                             value=name, expected="one of " + ", ".join(sorted(names)))
    return dataclasses.replace(cluster, gpu_types=tuple(
        dataclasses.replace(t, price_per_hour=prices[t.name]) if t.name in prices else t
        for t in cluster.gpu_types))


def total_cost(segments: Iterable[Assignment], gpu_types: Sequence[GpuType]) -> float:
    """:func:`cost_of` at the types' own prices; NaN when a type that ran has none."""
    price_of = {t.name: t.price_per_hour for t in gpu_types if t.price_per_hour is not None}
    try:
        return cost_of(segments, price_of)
    except ValueError:
        return math.nan


def cost_of(segments: Iterable[Assignment], price_of: Mapping[str, float]) -> float:
    """The cost (USD) of what ran: every segment's GPUs times its hours times its type's
    price per GPU-hour (``price_of``: GPU type -> USD/h, e.g. ``dict(zip(names,
    prices_for(types)))``); a segment on a type without a price is a :class:`ValueError`
    naming it. A GPU shared by jobs at once (``gpu_share``) is counted for each."""
    total = 0.0
    for segment in segments:
        price = price_of.get(segment.gpu_type)
        if price is None:
            raise ValueError(f"GPU type {segment.gpu_type!r} has no price")
        total += len(segment.gpus) * (segment.finish - segment.start) / SECONDS_PER_HOUR \
            * price
    return total
