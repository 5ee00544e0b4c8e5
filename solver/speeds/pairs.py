"""Co-location pairs measured on their own (``--pairs FILE``): two jobs sharing one GPU,
each one's throughput beside the other and alone, as ``h100/h100_pairs.csv`` holds them
(docs/traces.md, "GPU shares"). Columns::

    job_type, other_job_type, gpu_type, throughput, other_throughput, alone, other_alone

in steps per second: ``throughput`` is ``job_type``'s rate while ``other_job_type`` runs
on the same GPU, ``alone`` its rate measured the same way with the other idle, and the
``other_`` columns the same for the other job. A row gives both directions of the pair:
``job_type`` beside ``other_job_type`` runs at ``throughput / alone`` of its speed alone,
and ``other_job_type`` beside ``job_type`` at ``other_throughput / other_alone`` (each at
most 1: sharing never speeds a job up). These pairs join those of the throughput profile
(Gavel's), and win where both measure a pair; jobs without a measured pair run at the
default factor (:mod:`hetsched.core.sharing`).
"""

from __future__ import annotations

import csv
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.ranges import text_float
from hetsched.core.records import MAX_THROUGHPUT
from hetsched.core.sharing import PairKey

COLUMNS = ("job_type", "other_job_type", "gpu_type", "throughput", "other_throughput",
           "alone", "other_alone")


def read_pairs_csv(path: str | Path) -> dict[PairKey, float]:
    """The speed factors of the pairs file ``path`` (module notes), by (GPU type, job
    type, co-runner's job type); an :class:`InputError` names the file, the line, the
    column and the value of anything wrong."""
    file = str(path)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [name for name in COLUMNS if name not in header]
            if missing:
                raise InputError("missing columns", file=file, path="line 1",
                                 value=", ".join(header),
                                 expected="the columns " + ", ".join(COLUMNS))
            pairs: dict[PairKey, float] = {}
            for line, row in enumerate(reader, start=2):
                names = {name: (row.get(name) or "").strip() for name in COLUMNS[:3]}
                for name, text in names.items():
                    if not text:
                        raise InputError("empty cell", file=file, path=f"line {line}, {name}",
                                         value=text, expected="a name")
                rates = {name: _rate(row.get(name), file, line, name) for name in COLUMNS[3:]}
                gpu_type = names["gpu_type"]
                pairs[(gpu_type, names["job_type"], names["other_job_type"])] = \
                    min(1.0, rates["throughput"] / rates["alone"])
                pairs[(gpu_type, names["other_job_type"], names["job_type"])] = \
                    min(1.0, rates["other_throughput"] / rates["other_alone"])
    except OSError as exc:
        raise InputError(f"cannot read the pairs file ({exc.strerror})", file=file,
                         path="--pairs", expected="a readable CSV file") from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", file=file, path="--pairs",
                         expected="a UTF-8 CSV file") from None
    if not pairs:
        raise InputError("no pairs", file=file, path="line 2",
                         expected="one row per measured pair after the header")
    return pairs


def _rate(cell: str | None, file: str, line: int, name: str) -> float:
    """A throughput cell: steps/s, > 0 (a pair is measured running)."""
    text = (cell or "").strip()
    try:
        value = text_float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_THROUGHPUT:
        raise InputError("bad throughput", file=file, path=f"line {line}, {name}",
                         value=text, expected=f"steps/s above 0 and at most "
                         f"{MAX_THROUGHPUT:g}")
    return value
