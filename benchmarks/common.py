"""What the benchmark scripts share: the project's folders, and their output (a line of
``key=value`` per row on the terminal, the rows as a CSV file).

The scripts import it by name (``from common import ...``): Python puts a script's own
folder first on ``sys.path``."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The project's folder (benchmarks/ is in it).
ROOT = Path(__file__).resolve().parent.parent
#: Where the measurements are committed.
RESULTS = ROOT / "benchmarks" / "results"
#: The shared data set beside the project (../shared/data: traces, throughput tables).
DATA = ROOT.parent / "shared" / "data"


def row_line(row: Mapping[str, object]) -> str:
    """``key=value`` pairs of ``row`` on one line, floats to 4 significant digits."""
    return "  ".join(f"{k}={v:.4g}" if isinstance(v, float) and math.isfinite(v)
                     else f"{k}={v}" for k, v in row.items())


def sorted_columns(rows: Sequence[Mapping[str, object]], first: Sequence[str]) -> list[str]:
    """Every key of ``rows``: those of ``first`` first, each group in alphabetical order."""
    return sorted({key for row in rows for key in row}, key=lambda k: (k not in first, k))


def write_csv(path: Path, rows: Sequence[Mapping[str, object]],
              columns: Sequence[str] | None = None, *, lineterminator: str = "\r\n",
              restval: object = "") -> None:
    """Write ``rows`` to ``path`` as CSV with a header of ``columns`` (default: the first
    row's keys), making its folder if need be, and print ``wrote PATH``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, list(rows[0]) if columns is None else columns,
                                restval=restval, lineterminator=lineterminator)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
