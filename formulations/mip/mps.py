"""A :class:`~hetsched.formulations.mip.model.MatrixModel` as a free-format MPS file, and MIP starts
as solution files: what the engines that read files (CBC, SCIP) are given.

Columns are named ``C<j>`` and rows ``R<i>`` (``j``, ``i``: indices into the model), so a
solution file maps back to the arrays by name alone; the continuous columns are written
first, then every integer column in one ``INTORG`` block (an MPS file may list columns in
any order: the names carry the indices). Every number is written with ``repr`` (17
significant digits: the file holds the same doubles as the arrays), each distinct value
formatted once, and the lines are assembled from numpy index arrays, about 1 µs per
nonzero. The objective's constant ``offset`` is *not* written (MPS readers disagree on
the sign of an objective RHS); callers add it to what the engine reports. Rows with no
finite bound are left out (they constrain nothing).

Integer columns always get explicit bounds: several readers give an integer column
without a BOUNDS entry the bounds [0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from hetsched.formulations.mip.model import MatrixModel, Vector

#: Values whose magnitude reaches this are infinite for the MPS readers (CBC: 1e30).
MPS_INFINITY = 1e30

Strings = npt.NDArray[np.object_]


def column_name(index: int) -> str:
    """The name of column ``index`` in the files written here."""
    return f"C{index}"


def column_index(name: str) -> int | None:
    """The column index of a name written by :func:`column_name` (``None`` otherwise)."""
    if len(name) > 1 and name[0] == "C" and name[1:].isdigit():
        return int(name[1:])
    return None


def _names(prefix: str, count: int) -> Strings:
    return np.array([f"{prefix}{k}" for k in range(count)] or [""], dtype=object)[:count]


def _numbers(values: Vector) -> Strings:
    """``repr`` of each value, each distinct value formatted once."""
    if len(values) == 0:
        return np.zeros(0, dtype=object)
    unique, inverse = np.unique(values, return_inverse=True)
    text = np.array([repr(float(v)) for v in unique.tolist()], dtype=object)
    return np.asarray(text[inverse.reshape(-1)], dtype=object)


def _lines(*fields: Iterable[str]) -> str:
    """One line per position: the fields joined by spaces, each line starting with one."""
    return "".join(map(" {}\n".format, map(" ".join, zip(*fields, strict=True))))


def _finite(values: Vector) -> npt.NDArray[np.bool_]:
    return np.asarray(np.isfinite(values) & (np.abs(values) < MPS_INFINITY))


def mps_chunks(model: MatrixModel, name: str = "HETSCHED") -> Iterator[str]:
    """The free-format MPS file of ``model`` (minimisation, offset left out), in pieces."""
    lower, upper = model.row_lower, model.row_upper
    has_low, has_up = _finite(lower), _finite(upper)
    kept = np.flatnonzero(has_low | has_up)
    rows = _names("R", model.num_rows)
    equal = has_low & has_up & (lower == upper)
    sense = np.where(equal, "E", np.where(has_up, "L", "G")).astype(object)
    yield f"NAME {name}\nROWS\n N OBJ\n"
    yield _lines(sense[kept].tolist(), rows[kept].tolist())

    yield "COLUMNS\n"
    cols = _names("C", model.num_cols)
    csc = model.matrix.tocsc()
    csc.sum_duplicates()
    entry_col = np.repeat(np.arange(model.num_cols), np.diff(csc.indptr))
    entry_row = csc.indices.astype(np.int64)
    keep = (csc.data != 0.0) & (has_low | has_up)[entry_row]
    objective_cols = np.flatnonzero(model.cost != 0.0)
    mentioned = np.zeros(model.num_cols, dtype=bool)
    mentioned[objective_cols] = True
    mentioned[entry_col[keep]] = True
    silent = np.flatnonzero(~mentioned)  # declared with a zero objective coefficient
    all_rows = np.append(rows, "OBJ").astype(object)
    obj = model.num_rows
    col = np.concatenate([objective_cols, silent, entry_col[keep]])
    row = np.concatenate([np.full(len(objective_cols) + len(silent), obj), entry_row[keep]])
    value = np.concatenate([model.cost[objective_cols], np.zeros(len(silent)),
                            csc.data[keep]])
    integer = model.integer[col]
    for block_is_integer in (False, True):
        chosen = np.flatnonzero(integer == block_is_integer)
        if len(chosen) == 0:
            continue
        chosen = chosen[np.argsort(col[chosen], kind="stable")]
        if block_is_integer:
            yield " MARKER 'MARKER' 'INTORG'\n"
        yield _lines(cols[col[chosen]].tolist(), all_rows[row[chosen]].tolist(),
                     _numbers(value[chosen]).tolist())
        if block_is_integer:
            yield " MARKER 'MARKER' 'INTEND'\n"

    yield "RHS\n"
    rhs = np.where(has_up, upper, lower)
    with_rhs = kept[rhs[kept] != 0.0]
    yield _lines(["RHS"] * len(with_rhs), rows[with_rhs].tolist(),
                 _numbers(rhs[with_rhs]).tolist())
    ranged = np.flatnonzero(has_low & has_up & ~equal)
    if len(ranged):
        yield "RANGES\n"
        yield _lines(["RNG"] * len(ranged), rows[ranged].tolist(),
                     _numbers(upper[ranged] - lower[ranged]).tolist())
    yield "BOUNDS\n"
    yield from _bounds(model, cols)
    yield "ENDATA\n"


def _bounds(model: MatrixModel, cols: Strings) -> Iterator[str]:
    """FX for fixed columns, FR for free ones; otherwise LO (or MI) then UP (or PL), left
    out for a continuous column with the default bounds [0, inf)."""
    low, up = model.col_lower, model.col_upper
    has_low, has_up = _finite(low), _finite(up)
    fixed = has_low & has_up & (low == up)
    free = ~has_low & ~has_up
    default = ~model.integer & has_low & (low == 0.0) & ~has_up
    rest = ~fixed & ~free & ~default

    def section(kind: str, mask: npt.NDArray[np.bool_], values: Vector | None) -> str:
        chosen = np.flatnonzero(mask)
        fields = [[kind] * len(chosen), ["BND"] * len(chosen), cols[chosen].tolist()]
        if values is not None:
            fields.append(_numbers(values[chosen]).tolist())
        return _lines(*fields)

    yield section("FX", fixed, low)
    yield section("FR", free, None)
    yield section("LO", rest & has_low, low)
    yield section("MI", rest & ~has_low, None)
    yield section("UP", rest & has_up, up)
    yield section("PL", rest & ~has_up, None)


def write_mps(model: MatrixModel, path: str | Path, name: str = "HETSCHED") -> None:
    """Write ``model`` to ``path`` as free-format MPS (see the module's notes)."""
    with Path(path).open("w", encoding="ascii") as handle:
        handle.writelines(mps_chunks(model, name))


def write_cbc_start(values: Vector, path: str | Path) -> None:
    """A MIP start in the format of CBC's solution files (``-mipStart``): a header line,
    then ``index name value`` for every column, zeros included (a complete start)."""
    with Path(path).open("w", encoding="ascii") as handle:
        handle.write("Stopped on iterations - objective value 0\n")
        count = len(values)
        handle.write(_lines([str(j) for j in range(count)], _names("C", count).tolist(),
                            _numbers(np.asarray(values, dtype=np.float64)).tolist()))
