"""Reading the small measured CSV files of this package (Pollux's ``validation-*.csv``,
``placements.csv``, ``scalability.csv``): each data row with its line number, and cells
read as numbers, so that an :class:`~hetsched.core.errors.InputError` names the file, the
line, the column, the value found and what was expected."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.ranges import text_float


def csv_rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, cells)`` for each data row of the CSV file ``path``, whose header must
    name ``columns`` (others are ignored); blank lines are passed over. A missing or
    unreadable file, a column named twice, a missing column or a row of the wrong width is
    an InputError."""
    file = str(path)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such file", file=file) from None
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror})", file=file) from None
    with handle:
        reader = csv.reader(handle, strict=True)
        try:
            header = [name.strip() for name in next(reader, [])]
            check_header(header, file)
            missing = [name for name in columns if name not in header]
            if missing:
                raise InputError(f"missing column '{missing[0]}'", file=file, path="line 1",
                                 value=header, expected="columns " + ", ".join(columns))
            index = {name: header.index(name) for name in columns}
            for cells in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    raise InputError("wrong number of fields", file=file, path=f"line {line}",
                                     value=len(cells),
                                     expected=f"{len(header)} fields as in the header")
                yield line, {name: cells[i].strip() for name, i in index.items()}
        except csv.Error as exc:
            raise InputError(f"not valid CSV ({exc})", file=file,
                             path=f"line {reader.line_num}") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", file=file) from None


def check_header(header: Sequence[str], file: str) -> None:
    """An InputError naming the first column ``header`` names twice (a reader would take
    one of the two and drop the other unseen)."""
    seen: dict[str, int] = {}
    for number, name in enumerate(header, 1):
        if name and name in seen:
            raise InputError(f"column '{name}' named twice", file=file, path="line 1",
                             value=f"columns {seen[name]} and {number}",
                             expected="each column named once")
        seen[name] = number


def cell_number(cells: dict[str, str], column: str, where: tuple[str, int], *,
                low: float = -math.inf, strict: bool = False, integer: bool = False,
                high: float = math.inf, expected: str = "a finite number") -> float:
    """The number in ``cells[column]`` (ASCII digits only), finite, ``>= low`` (``>
    low`` if ``strict``) and ``<= high``, a whole number if ``integer``; else an
    InputError naming the file and line of ``where`` (``(file, line)``), the column and
    the value."""
    text = cells[column]
    try:
        value = text_float(text)
    except ValueError:
        value = math.nan
    ok = (math.isfinite(value) and (value > low if strict else value >= low)
          and value <= high)
    if ok and integer:
        ok = value == int(value)
    if not ok:
        file, line = where
        raise InputError(f"bad {column}", file=file, path=f"line {line}.{column}", value=text,
                         expected=expected)
    return value
