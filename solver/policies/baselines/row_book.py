"""A row of numbers per job, kept in one matrix: read for thousands of waiting jobs at a
decision without building an array per job (:class:`~hetsched.policies.baselines.gavel.
Gavel`'s predicted speeds)."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import numpy as np

from hetsched.formulations.gavel.problem import Array

__all__ = ["RowBook"]


class RowBook:
    """A row of numbers per job id, kept in one matrix (read for many jobs at once by
    :meth:`of`); rows of jobs dropped are reused after a compaction."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self._matrix: Array = np.zeros((0, 0))
        self._used = 0

    def __len__(self) -> int:
        return len(self.rows)

    def set_width(self, width: int) -> None:
        """Rows of ``width`` numbers from now on (another width: every row dropped)."""
        if self._matrix.shape[1] != width or not len(self._matrix):
            self.rows, self._matrix, self._used = {}, np.zeros((16, width)), 0

    def add(self, job_id: str, values: Sequence[float]) -> None:
        """The job's row is ``values`` (as many as :meth:`set_width` said)."""
        if self._used == len(self._matrix):
            if 2 * len(self.rows) < self._used:  # mostly rows of jobs dropped: compact
                order = list(self.rows.values())
                self._matrix[:len(order)] = self._matrix[order]
                self.rows = dict(zip(self.rows, range(len(order)), strict=True))
                self._used = len(order)
            else:
                self._matrix = np.vstack([self._matrix, np.zeros_like(self._matrix)])
        self._matrix[self._used] = values
        self.rows[job_id] = self._used
        self._used += 1

    def keep_only(self, job_ids: AbstractSet[str]) -> None:
        """Drop the rows of jobs not in ``job_ids``."""
        self.rows = {job_id: row for job_id, row in self.rows.items() if job_id in job_ids}

    def of(self, job_ids: Sequence[str], width: int) -> Array:
        """The rows of ``job_ids`` (every one added), as a ``len(job_ids) x width``
        matrix."""
        if not job_ids:
            return np.zeros((0, width))
        return self._matrix[[self.rows[job_id] for job_id in job_ids]]
