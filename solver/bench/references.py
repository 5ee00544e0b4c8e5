"""Reference figures beside a bench's own (a sweep spec's ``[[references]]``;
docs/bench.md): a ratio of average JCTs another work reports (a paper's figure, a peer's
simulator), and the same ratio in this bench, so a reproduction shows at a glance
whether it lands where the original did.

A reference names two policies of the bench by label (``policy`` over ``baseline``), the
load it was measured at and the ratio (``policy``'s average JCT over ``baseline``'s), with
its ``source``. The bench's ratio is the mean over seeds of ``policy``'s average JCT over
the mean of ``baseline``'s at that load: over the JCT window's jobs
(``avg_jct_window_s``, ``jct_window``) when every row of both has one, else over all jobs.
The references go into the bench's folder as ``references.json``; ``report.md`` shows them
in a table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hetsched.bench.results import BenchRow
from hetsched.core.errors import InputError
from hetsched.core.outputs import write_text

#: The file a bench's references are kept in.
FILE = "references.json"
#: A reference table's keys.
KEYS = ("name", "policy", "baseline", "load", "ratio", "source", "bench")


@dataclass(frozen=True)
class Reference:
    """One reference figure (module notes)."""

    name: str
    policy: str
    baseline: str
    load: float
    ratio: float
    source: str

    def __post_init__(self) -> None:
        for key in ("name", "policy", "baseline", "source"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise InputError("empty or not text", path=key, value=value,
                                 expected="a non-empty string")
        for key in ("load", "ratio"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not (math.isfinite(value) and value > 0):
                raise InputError("not a positive number", path=key, value=value,
                                 expected="a number > 0")


def parse_references(value: Any, labels: Sequence[str], loads: Sequence[float],
                     bench: str) -> tuple[Reference, ...]:
    """The references of the spec's ``references`` list that apply to the bench named
    ``bench`` (a table's ``bench``, or none: every bench), checked: both policies among
    ``labels``, the load among ``loads``. An :class:`InputError` names the table
    (``references[1].policy``)."""
    if not isinstance(value, list):
        raise InputError("not a list", path="references", value=value,
                         expected="[[references]] tables")
    kept: list[Reference] = []
    for index, table in enumerate(value):
        where = f"references[{index}]"
        if not isinstance(table, dict) or not set(table) <= set(KEYS):
            raise InputError("not a reference table", path=where, value=table,
                             expected="keys " + ", ".join(KEYS) + " (bench optional)")
        missing = [key for key in KEYS[:-1] if key not in table]
        if missing:
            raise InputError("missing key", path=f"{where}.{missing[0]}",
                             expected="name, policy, baseline, load, ratio and source")
        try:
            reference = Reference(*(table[key] for key in KEYS[:-1]))
        except InputError as error:
            raise error.at(where) from None
        for key in ("policy", "baseline"):
            if getattr(reference, key) not in labels:
                raise InputError("not a policy of the spec", path=f"{where}.{key}",
                                 value=getattr(reference, key),
                                 expected="one of " + ", ".join(labels))
        if not any(math.isclose(reference.load, load) for load in loads):
            raise InputError("not a load of the spec", path=f"{where}.load",
                             value=reference.load,
                             expected="one of " + ", ".join(f"{x:g}" for x in loads))
        if table.get("bench", bench) == bench:
            kept.append(reference)
    return tuple(kept)


def write_references(out: Path, references: Sequence[Reference]) -> None:
    """Keep ``references`` in the bench's folder (none: the file is left as it is)."""
    if references:
        write_text(out / FILE, json.dumps([asdict(r) for r in references], indent=1) + "\n",
                   "out", FILE)


def read_references(out: Path) -> list[Reference]:
    """The references kept in a bench's folder (none if there is no readable file)."""
    try:
        listed = json.loads((out / FILE).read_text(encoding="utf-8"))
        return [Reference(**item) for item in listed]
    except (OSError, ValueError, TypeError, InputError):
        return []


def reference_lines(references: Sequence[Reference], rows: Sequence[BenchRow]) -> list[str]:
    """The report's section of the references beside the bench's ratios."""
    if not references:
        return []
    lines = ["", "## Beside reference figures", "",
             "Average JCT of the policy over the baseline's at the load (the bench: means "
             "over seeds; over the JCT window's jobs where the runs have one).", "",
             "| comparison | load | reference | this bench | bench / reference | source |",
             "|---|---:|---:|---:|---:|---|"]
    for ref in references:
        mine, measure = bench_ratio(rows, ref)
        shown = f"{mine:.3f} ({measure})" if math.isfinite(mine) else "-"
        versus = f"{mine / ref.ratio:.2f}" if math.isfinite(mine) else "-"
        lines.append(f"| {ref.name} (`{ref.policy}` / `{ref.baseline}`) | {ref.load:g} | "
                     f"{ref.ratio:.3f} | {shown} | {versus} | {ref.source} |")
    return lines


def bench_ratio(rows: Sequence[BenchRow], ref: Reference) -> tuple[float, str]:
    """The bench's figure for ``ref`` and what it averages (module notes); NaN without
    runs of both policies at the load."""
    chosen: dict[str, list[BenchRow]] = {
        label: [r for r in rows if r.policy == label and math.isclose(r.load, ref.load)]
        for label in (ref.policy, ref.baseline)}
    if not all(chosen.values()):
        return math.nan, ""
    windowed = all(_number(r.cells, "avg_jct_window_s") is not None
                   for group in chosen.values() for r in group)
    key = "avg_jct_window_s" if windowed else "avg_jct_s"
    means = {label: sum(_number(r.cells, key) or math.nan for r in group) / len(group)
             for label, group in chosen.items()}
    window = chosen[ref.policy][0].cells.get("jct_window", "")
    measure = f"jobs {window}" if windowed else "all jobs"
    return means[ref.policy] / means[ref.baseline], measure


def _number(cells: Mapping[str, str], key: str) -> float | None:
    """A finite number of a row's cells, or ``None``."""
    try:
        value = float(cells.get(key, ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None
