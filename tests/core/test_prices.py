"""Prices per GPU-hour (hetsched.core.prices): where a price comes from, ``--prices``,
and the cost of what ran."""

from __future__ import annotations

import math

import pytest

from hetsched.core.cluster import Cluster, GpuType, Node
from hetsched.core.errors import InputError
from hetsched.core.prices import (
    GAVEL_PRICES,
    cost_of,
    parse_prices,
    prices_for,
    total_cost,
    with_prices,
)
from hetsched.core.result import Assignment


def test_a_given_price_beats_the_clusters() -> None:
    types = [GpuType("v100", price_per_hour=2.48), GpuType("k80", price_per_hour=0.45),
             GpuType("h100")]
    assert prices_for(types, {"h100": 4.0}) == (2.48, 0.45, 4.0)
    assert prices_for(types, {"v100": 1.0, "h100": 4.0}) == (1.0, 0.45, 4.0)
    assert dict(GAVEL_PRICES) == {"v100": 0.74, "p100": 0.43, "k80": 0.135}


def test_a_type_without_a_price_is_named() -> None:
    # No silent default: a type without a price of its own is an error naming it.
    with pytest.raises(ValueError, match="'h100' has no price: give one with --prices"):
        prices_for([GpuType("v100", price_per_hour=0.74), GpuType("h100")])
    with pytest.raises(ValueError, match="'v100' must be a number > 0"):
        prices_for([GpuType("v100", price_per_hour=0.0)])
    with pytest.raises(ValueError, match="'k80' must be a number > 0"):
        prices_for([GpuType("k80")], {"k80": -1.0})


def test_prices_are_parsed_and_set_on_the_cluster() -> None:
    assert parse_prices("v100=0.74, k80=0.135") == {"v100": 0.74, "k80": 0.135}
    assert parse_prices({"v100": 1}) == {"v100": 1.0}
    assert parse_prices(None) == parse_prices({}) == {}
    # An empty list is not "the cluster's own prices" (once it was: --prices '' ran on
    # the defaults); Unicode digits and '_' separators are not prices.
    for bad, message in (("v100", "bad price"), ("v100=0", "bad price"),
                         ("v100=nan", "bad price"), ("v100=1e9", "bad price"),
                         ("v100=1,v100=2", "priced twice"), ("", "empty price list"),
                         (" ", "empty price list"), ("v100=\u0663", "bad price"),
                         ("v100=1_0", "bad price")):
        with pytest.raises(InputError, match=message):
            parse_prices(bad)
    cluster = Cluster((GpuType("v100", price_per_hour=2.48), GpuType("k80")),
                      (Node("v", "v100", 2), Node("k", "k80", 1)))
    priced = with_prices(cluster, {"k80": 0.135})
    assert [(t.name, t.price_per_hour) for t in priced.gpu_types] == [
        ("v100", 2.48), ("k80", 0.135)]
    assert priced.nodes == cluster.nodes
    assert with_prices(cluster, {}) is cluster
    with pytest.raises(InputError, match="price for a GPU type the cluster lacks"):
        with_prices(cluster, {"a100": 3.0})


def test_the_cost_of_what_ran() -> None:
    # 2 V100s for 1.5 h at 0.74 and 1 K80 for 1,800 s at 0.135: 2.22 + 0.0675 USD.
    ran = [Assignment("a", "v100", ("n/0", "n/1"), 0.0, 5400.0),
           Assignment("b", "k80", ("k/0",), 100.0, 1900.0)]
    assert cost_of(ran, GAVEL_PRICES) == pytest.approx(2.22 + 0.0675)
    with pytest.raises(ValueError, match="'k80' has no price"):
        cost_of(ran, {"v100": 0.74})
    types = [GpuType("v100", price_per_hour=0.74), GpuType("k80", price_per_hour=0.135)]
    assert total_cost(ran, types) == pytest.approx(2.2875)
    assert math.isnan(total_cost(ran, [GpuType("v100", price_per_hour=0.74), GpuType("k80")]))


def test_an_empty_gpu_alias_list_is_an_error_not_no_aliases() -> None:
    # As an empty price list: blank text is refused; None or {} means no alias.
    from hetsched.core.errors import InputError
    from hetsched.core.settings import ReplaySettings, parse_gpu_aliases

    for blank in ("", "  "):
        with pytest.raises(InputError, match="empty GPU alias list"):
            parse_gpu_aliases(blank)
        with pytest.raises(InputError, match="gpu_aliases"):
            ReplaySettings(gpu_aliases=blank)  # type: ignore[arg-type]
    assert parse_gpu_aliases(None) == {} == parse_gpu_aliases({})
    assert parse_gpu_aliases("g3=a100") == {"g3": "a100"}
