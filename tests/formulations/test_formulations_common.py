"""Shared pieces of the formulations: the time grid, integer weights, node placement;
and ``random_instance``, the small random instances the model tests use."""

from __future__ import annotations

import pytest

from hetsched.allocation.realise import NodeBooking, PlacementError, left_shift, place_on_nodes
from hetsched.formulations.common import integer_weights, ticks_down, ticks_up
from tests.helpers import assert_valid, random_instance


def test_ticks_round_the_safe_way() -> None:
    # 45119 / 20 = 2255.95 s is 2,255,950 ms exactly, despite binary floating point
    assert ticks_up(45119 / 20) == 2_255_950
    assert ticks_up(17016 / 8.4) == 2_025_715  # 2025.714285... s rounds up
    assert ticks_down(5879.0) == 5_879_000
    assert ticks_down(1.0005) == 1000


def test_integer_weights() -> None:
    assert integer_weights([1.0, 2.0]) == (1, [1, 2], True)
    assert integer_weights([0.5, 1.25]) == (100, [50, 125], True)
    scale, _, exact = integer_weights([1 / 3])
    assert (scale, exact) == (10**6, False)


def test_place_on_nodes_reuses_gpus_in_start_order() -> None:
    instance = random_instance(0)
    # f0 has 2 GPUs: a and b in parallel, then c (2 GPUs) once both are free
    gpus = place_on_nodes(instance, [
        NodeBooking("a", "f0", 1, 0, 10), NodeBooking("b", "f0", 1, 5, 20),
        NodeBooking("c", "f0", 2, 20, 30), NodeBooking("d", "f0", 1, 10, 20),
    ])
    assert gpus["a"] == ("f0/0",)
    assert gpus["b"] == ("f0/1",)
    assert gpus["d"] == ("f0/0",)  # freed by a at 10
    assert gpus["c"] == ("f0/0", "f0/1")
    with pytest.raises(PlacementError):
        place_on_nodes(instance, [NodeBooking("a", "f0", 2, 0, 10),
                                  NodeBooking("b", "f0", 1, 9, 12)])


def test_left_shift_gives_a_valid_schedule() -> None:
    instance = random_instance(1, jobs=3, gangs=False, elastic=False)
    sequence = [(job.id, "fast", ("f0/0",)) for job in instance.jobs]
    schedule = left_shift(instance, sequence)
    assert_valid(instance, schedule)
    starts = [a.start for a in sorted(schedule, key=lambda a: a.start)]
    assert starts == sorted(starts)
