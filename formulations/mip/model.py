"""A mixed-integer linear model as arrays: what every MILP engine reads.

``minimise cost @ x + offset`` subject to ``row_lower <= matrix @ x <= row_upper`` and
``col_lower <= x <= col_upper``, with ``x[j]`` integer where ``integer[j]``. Models are
built in blocks of rows with :class:`MatrixBuilder` (numpy index arrays, one call per
constraint family, never one Python object per variable), then frozen into a
:class:`MatrixModel` that an engine solves (:func:`hetsched.formulations.mip.solve_mip`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

Vector = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]

#: Infinity in bounds (engines map it to their own).
INF = float("inf")


@dataclass(frozen=True, eq=False)
class MatrixModel:
    """A MILP in arrays (minimisation). ``matrix`` is CSR, rows x columns."""

    cost: Vector
    matrix: sp.csr_matrix
    row_lower: Vector
    row_upper: Vector
    col_lower: Vector
    col_upper: Vector
    integer: npt.NDArray[np.bool_]
    offset: float = 0.0
    #: Optional names (for files written for inspection); ``x{j}`` / ``r{i}`` otherwise.
    col_names: tuple[str, ...] = ()
    row_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        rows, cols = self.matrix.shape
        for name, value, size in (("cost", self.cost, cols), ("col_lower", self.col_lower, cols),
                                  ("col_upper", self.col_upper, cols),
                                  ("integer", self.integer, cols),
                                  ("row_lower", self.row_lower, rows),
                                  ("row_upper", self.row_upper, rows)):
            if np.shape(value) != (size,):
                raise ValueError(f"{name} has shape {np.shape(value)}, expected ({size},)")
        if not np.all(np.isfinite(self.cost)) or not np.all(np.isfinite(self.matrix.data)):
            raise ValueError("costs and coefficients must be finite")

    @property
    def num_cols(self) -> int:
        """Number of variables."""
        return int(self.matrix.shape[1])

    @property
    def num_rows(self) -> int:
        """Number of constraints."""
        return int(self.matrix.shape[0])

    def objective(self, values: Vector) -> float:
        """``cost @ values + offset``."""
        return float(self.cost @ values + self.offset)

    def violation(self, values: Vector) -> float:
        """The largest violation of a row, a bound or integrality by ``values`` (0 if
        feasible)."""
        activity = self.matrix @ values
        worst = max(0.0, float(np.max(self.row_lower - activity, initial=0.0)),
                    float(np.max(activity - self.row_upper, initial=0.0)),
                    float(np.max(self.col_lower - values, initial=0.0)),
                    float(np.max(values - self.col_upper, initial=0.0)))
        if self.integer.any():
            part = values[self.integer]
            worst = max(worst, float(np.max(np.abs(part - np.round(part)), initial=0.0)))
        return worst

    def with_objective(self, cost: Vector, offset: float = 0.0) -> MatrixModel:
        """The same constraints with another objective."""
        return MatrixModel(np.asarray(cost, dtype=np.float64), self.matrix, self.row_lower,
                           self.row_upper, self.col_lower, self.col_upper, self.integer,
                           offset, self.col_names, self.row_names)

    def with_row(self, coefficients: Vector, lower: float, upper: float,
                 name: str = "") -> MatrixModel:
        """The model with one more row ``lower <= coefficients @ x <= upper``."""
        row = sp.csr_matrix(np.asarray(coefficients, dtype=np.float64).reshape(1, -1))
        names = (*self.row_names, name or f"r{self.num_rows}") if self.row_names else ()
        return MatrixModel(self.cost, sp.vstack([self.matrix, row], format="csr"),
                           np.append(self.row_lower, lower), np.append(self.row_upper, upper),
                           self.col_lower, self.col_upper, self.integer, self.offset,
                           self.col_names, names)


@dataclass
class MatrixBuilder:
    """Columns and blocks of rows added family by family; :meth:`build` freezes them."""

    _lower: list[Vector] = field(default_factory=list)
    _upper: list[Vector] = field(default_factory=list)
    _integer: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    _cols: int = 0
    _row_index: list[Index] = field(default_factory=list)
    _col_index: list[Index] = field(default_factory=list)
    _values: list[Vector] = field(default_factory=list)
    _row_lower: list[Vector] = field(default_factory=list)
    _row_upper: list[Vector] = field(default_factory=list)
    _rows: int = 0

    @property
    def num_cols(self) -> int:
        """Columns so far."""
        return self._cols

    @property
    def num_rows(self) -> int:
        """Rows so far."""
        return self._rows

    def add_columns(self, count: int, lower: float | Vector = 0.0, upper: float | Vector = INF,
                    integer: bool = False) -> Index:
        """``count`` new variables; returns their indices."""
        first = self._cols
        self._lower.append(np.broadcast_to(np.asarray(lower, dtype=np.float64), (count,)).copy())
        self._upper.append(np.broadcast_to(np.asarray(upper, dtype=np.float64), (count,)).copy())
        self._integer.append(np.full(count, integer, dtype=np.bool_))
        self._cols += count
        return np.arange(first, first + count, dtype=np.int64)

    def add_binaries(self, count: int) -> Index:
        """``count`` new 0-1 variables."""
        return self.add_columns(count, 0.0, 1.0, integer=True)

    def add_rows(self, rows: Index, cols: Index, values: Vector, lower: float | Vector,
                 upper: float | Vector, count: int | None = None) -> Index:
        """A block of rows from triplets: entry ``k`` puts ``values[k]`` at (block row
        ``rows[k]``, column ``cols[k]``); ``count`` rows in the block (default
        ``max(rows) + 1``), with bounds ``lower``/``upper`` (scalars or per row). Duplicate
        (row, column) entries add up. Returns the indices of the new rows."""
        rows = np.asarray(rows, dtype=np.int64)
        count = int(rows.max() + 1 if len(rows) else 0) if count is None else count
        first = self._rows
        self._row_index.append(rows + first)
        self._col_index.append(np.asarray(cols, dtype=np.int64))
        self._values.append(np.asarray(values, dtype=np.float64))
        self._row_lower.append(np.broadcast_to(np.asarray(lower, dtype=np.float64),
                                               (count,)).copy())
        self._row_upper.append(np.broadcast_to(np.asarray(upper, dtype=np.float64),
                                               (count,)).copy())
        self._rows += count
        return np.arange(first, first + count, dtype=np.int64)

    def build(self, cost: Vector | None = None, offset: float = 0.0) -> MatrixModel:
        """The model, with objective ``cost`` (zeros by default)."""
        def floats(parts: list[Vector]) -> Vector:
            return np.concatenate(parts) if parts else np.zeros(0)

        def indices(parts: list[Index]) -> Index:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

        matrix = sp.csr_matrix(
            (floats(self._values), (indices(self._row_index), indices(self._col_index))),
            shape=(self._rows, self._cols))
        matrix.sum_duplicates()
        integer = np.concatenate(self._integer) if self._integer else np.zeros(0, dtype=np.bool_)
        return MatrixModel(
            np.zeros(self._cols) if cost is None else np.asarray(cost, dtype=np.float64),
            matrix, floats(self._row_lower), floats(self._row_upper), floats(self._lower),
            floats(self._upper), integer, offset)
