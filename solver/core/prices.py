"""What a GPU costs: a price per GPU-hour (USD) for each GPU type, and the cost of what ran.

:data:`GAVEL_PRICES` are the defaults, the only fixed prices in Gavel's code (Narayanan et
al., OSDI 2020; stanford-futuredata/gavel at c4fa400, ``scheduler/utils.py:269-273``,
``read_per_instance_type_spot_prices_json``): Google Cloud's preemptible prices of one
GPU in 2020. Gavel's cost policy reads them for the ``gcp`` cloud; for AWS and Azure it
reads spot-price logs that change over time, which hetsched does not model.

A price is found, for each GPU type, in this order (:func:`prices_for`): the ``prices``
the caller gives (a policy's ``prices``), the GPU type's own ``price_per_hour`` (a
cluster file; ``--cluster v100=36`` takes it from the catalogue of
:mod:`hetsched.files.generate`: Google Cloud's on-demand prices, about 3.35 times
these, in the same ratios to 2 %), then :data:`GAVEL_PRICES`. A type with none of
them is a :class:`ValueError` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from hetsched.core.cluster import GpuType
from hetsched.core.result import Assignment

#: USD per GPU-hour by GPU type: Gavel's (see the module).
GAVEL_PRICES: Mapping[str, float] = MappingProxyType({"v100": 0.74, "p100": 0.43, "k80": 0.135})

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
    ``prices``, else the type's own ``price_per_hour``, else :data:`GAVEL_PRICES`. A type
    with no price, or a price of 0, is a :class:`ValueError` naming it."""
    given = check_prices(prices or {})
    found = []
    for gpu_type in gpu_types:
        price = given.get(gpu_type.name, gpu_type.price_per_hour)
        if price is None:
            price = GAVEL_PRICES.get(gpu_type.name)
        if price is None:
            raise ValueError(f"GPU type {gpu_type.name!r} has no price: give one (the "
                             "policy's prices, or price_per_hour in the cluster file); "
                             f"defaults exist for {', '.join(sorted(GAVEL_PRICES))} only")
        found.append(check_prices({gpu_type.name: price})[gpu_type.name])
    return tuple(found)


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
