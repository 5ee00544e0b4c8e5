"""Prices per GPU-hour (hetsched.core.prices): where a price comes from, and the cost of
what ran."""

from __future__ import annotations

import pytest

from hetsched.core.cluster import GpuType
from hetsched.core.prices import GAVEL_PRICES, cost_of, prices_for
from hetsched.core.result import Assignment


def test_a_given_price_beats_the_clusters_which_beats_gavels() -> None:
    types = [GpuType("v100", price_per_hour=2.48), GpuType("k80"), GpuType("h100")]
    # v100: the cluster's 2.48 over Gavel's 0.74; k80: Gavel's 0.135; h100: given.
    assert prices_for(types, {"h100": 4.0}) == (2.48, 0.135, 4.0)
    assert prices_for(types, {"v100": 1.0, "h100": 4.0}) == (1.0, 0.135, 4.0)
    assert dict(GAVEL_PRICES) == {"v100": 0.74, "p100": 0.43, "k80": 0.135}


def test_a_type_without_a_price_is_named() -> None:
    with pytest.raises(ValueError, match="'h100' has no price"):
        prices_for([GpuType("v100"), GpuType("h100")])
    with pytest.raises(ValueError, match="'v100' must be a number > 0"):
        prices_for([GpuType("v100", price_per_hour=0.0)])
    with pytest.raises(ValueError, match="'k80' must be a number > 0"):
        prices_for([GpuType("k80")], {"k80": -1.0})


def test_the_cost_of_what_ran() -> None:
    # 2 V100s for 1.5 h at 0.74 and 1 K80 for 1,800 s at 0.135: 2.22 + 0.0675 USD.
    ran = [Assignment("a", "v100", ("n/0", "n/1"), 0.0, 5400.0),
           Assignment("b", "k80", ("k/0",), 100.0, 1900.0)]
    assert cost_of(ran, GAVEL_PRICES) == pytest.approx(2.22 + 0.0675)
    with pytest.raises(ValueError, match="'k80' has no price"):
        cost_of(ran, {"v100": 0.74})
