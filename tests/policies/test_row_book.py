"""Gavel's table of predicted speeds (:class:`RowBook`): rows read back as added, across
growth, drops and the compaction that reuses dropped rows."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hetsched.policies.baselines.row_book import RowBook


def test_rows_are_read_back_in_the_order_asked() -> None:
    book = RowBook()
    book.set_width(3)
    book.add("a", [1.0, 2.0, 3.0])
    book.add("b", [4.0, 0.0, 6.0])
    np.testing.assert_array_equal(book.of(["b", "a", "b"], 3),
                                  [[4.0, 0.0, 6.0], [1.0, 2.0, 3.0], [4.0, 0.0, 6.0]])
    assert book.of([], 3).shape == (0, 3)
    with pytest.raises(KeyError):
        book.of(["c"], 3)


def test_another_width_drops_every_row() -> None:
    book = RowBook()
    book.set_width(2)
    book.add("a", [1.0, 2.0])
    book.set_width(2)  # the same width: kept
    assert len(book) == 1
    book.set_width(3)
    assert len(book) == 0


def test_growth_drops_and_compaction_against_a_dict() -> None:
    """Thousands of adds and drops (the rows of jobs that left), checked against a plain
    dict after every step: growth past the first 16 rows and compactions happen."""
    rng = random.Random(7)
    book = RowBook()
    book.set_width(2)
    truth: dict[str, list[float]] = {}
    for step in range(3000):
        if truth and rng.random() < 0.45:
            kept = {j for j in truth if rng.random() < 0.7}
            book.keep_only(kept)
            truth = {j: v for j, v in truth.items() if j in kept}
        else:
            job_id = f"j{step}"
            truth[job_id] = [float(step), rng.random()]
            book.add(job_id, truth[job_id])
        assert len(book) == len(truth)
        ids = list(truth)
        rng.shuffle(ids)
        np.testing.assert_array_equal(book.of(ids, 2), np.array([truth[j] for j in ids])
                                      .reshape(-1, 2))
