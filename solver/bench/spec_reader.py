"""Reading a sweep spec's values (:mod:`hetsched.bench.spec`), each error naming the spec
file and the key (``$.traces[1].format``), and the check of each bench's inputs before
anything is written (:func:`check_inputs`): the cluster, the throughput, the trace read as
the bench will read it, so that a bad value the reader finds (a price for a GPU type the
cluster lacks, ``elastic`` with a format without batch sizes, a reference GPU the
throughput model does not know) is told with the spec's key, not a command's option."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsched.core.errors import InputError

if TYPE_CHECKING:
    from hetsched.bench.inputs import Prefetched
    from hetsched.bench.settings import BenchSettings

__all__ = ["SETTING_KEYS", "SpecReader", "check_inputs", "input_file", "reading_setting"]

#: The spec key of each setting an error of the readers names (their parameter names):
#: the key of a trace table (``traces[0].reference_gpu``) when the table has it, else the
#: spec's top-level key.
SETTING_KEYS = {
    "reference_gpu": "reference_gpu", "gpu_aliases": "gpu_aliases",
    "unknown_gpus": "unknown_gpus", "gpu_sharing": "gpu_sharing",
    "spread_speed": "spread_speed", "colocation_factor": "colocation_factor",
    "elastic": "elastic", "knowledge": "knowledge", "learn": "learn", "limit_jobs": "limit_jobs",
    "deadline_fraction": "deadline_fraction",
    "on_bad_row": "on_bad_row", "prices": "prices", "tenants": "tenants", "pairs": "pairs",
    "throughput_path": "throughput", "seed": "seeds", "load": "loads",
    "jct_window": "jct_window", "format": "format", "trace_format": "format"}


class SpecReader:
    """Reads one spec file's values, each error naming the file and the key path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, problem: str, key: str, value: object = None,
              expected: str | None = None) -> InputError:
        """An error about ``key`` (``traces[1].format``), named as the project names
        places in files: ``$.traces[1].format``."""
        return InputError(problem, file=str(self.path), path="$." + key if key else "$",
                          value=value, expected=expected)

    def table(self, value: object, key: str, allowed: Sequence[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error("not a table", key, value, "a table of " + ", ".join(allowed))
        unknown = [name for name in value if name not in allowed]
        if unknown:
            raise self.error("unknown key", f"{key}.{unknown[0]}".lstrip("."),
                             value[unknown[0]], "one of " + ", ".join(allowed))
        return value

    def number(self, value: object, key: str, low: float, high: float,
               integer: bool = False) -> float:
        kind = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or not (
                low <= value <= high):
            what = "an integer" if integer else "a number"
            raise self.error("bad value", key, value, f"{what} from {low:g} to {high:g}")
        return value

    def choice(self, value: object, key: str, choices: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in choices:
            raise self.error("bad value", key, value, "one of " + ", ".join(choices))
        return value

    def flag(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error("bad value", key, value, "true or false")
        return value

    def text(self, value: object, key: str, expected: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error("bad value", key, value, expected)
        return value

    def items(self, value: object, key: str, expected: str) -> list[Any]:
        if not isinstance(value, list) or not value:
            raise self.error("not a list", key, value, f"a non-empty list of {expected}")
        return value

    def within(self, key: str, call: Any, *args: Any) -> Any:
        """``call(*args)``, an :class:`InputError` of it re-told with this file and key."""
        try:
            return call(*args)
        except InputError as exc:
            raise self.error(exc.problem, key, exc.value, exc.expected) from None




def input_file(reader: SpecReader, root: Path, setting: str, value: object,
                where: str) -> Path:
    """The ``tenants`` table or ``pairs`` file ``value`` (from ``root``), read once to
    check it (a problem in it is told with its own file and place)."""
    from hetsched.files.tenants import read_tenants
    from hetsched.speeds.pairs import read_pairs_csv

    what = {"tenants": "tenant table (JSON, docs/fairness.md)",
            "pairs": "co-location pairs file (CSV, docs/traces.md)"}[setting]
    path = (root / reader.text(value, where, f"a {what}")).resolve()
    if not path.is_file():
        raise reader.error(f"no such {setting} file", where, str(path),
                           f"an existing {what}; relative paths: from root")
    (read_tenants if setting == "tenants" else read_pairs_csv)(path)
    return path


def reading_setting(reader: SpecReader, setting: str, value: object, where: str) -> Any:
    """A trace-reading setting of :data:`READING_KEYS`, checked as the command checks it."""
    from hetsched.core.settings import (
        KNOWLEDGE,
        LEARN,
        SPREAD_SPEEDS,
        UNKNOWN_GPUS,
        parse_gpu_aliases,
    )

    if setting == "reference_gpu":
        return reader.text(value, where, "a GPU type, e.g. t4")
    if setting == "gpu_aliases":
        if not isinstance(value, str | dict) or (isinstance(value, dict) and not all(
                isinstance(target, str) for target in value.values())):
            raise reader.error("bad GPU aliases", where, value,
                               "'g3=a100,g2=v100' or a table {g3 = 'a100'}")
        return reader.within(where, parse_gpu_aliases, value)
    if setting == "unknown_gpus":
        return reader.choice(value, where, UNKNOWN_GPUS)
    if setting == "spread_speed":
        return reader.choice(value, where, SPREAD_SPEEDS)
    if setting == "knowledge":
        return reader.choice(value, where, KNOWLEDGE)
    if setting == "learn":
        return reader.choice(value, where, LEARN)
    if setting in ("gpu_sharing", "elastic"):
        return reader.flag(value, where)
    factor = float(reader.number(value, where, 0, 1))
    if factor <= 0:
        raise reader.error("bad co-location factor", where, value, "a number in (0, 1]")
    return factor


def check_inputs(reader: SpecReader, key: str, entry: Mapping[str, Any], cluster_key: str,
                 settings: BenchSettings) -> Prefetched:
    """Read the inputs of the bench ``settings`` (from the trace table ``entry`` at
    ``key``, its cluster at ``cluster_key``) as its runs will: the cluster at the spec's
    prices, the throughput with the GPU aliases, the trace of each seed. An error is told
    with the spec's file and the key of the setting it names (the trace table's own if it
    has one); an error in a row of the trace keeps the trace's file and line. What was
    read is handed to the bench, which then reads nothing again."""
    from hetsched.bench.inputs import prefetch

    try:
        return prefetch(settings.trace, settings.trace_format, settings.cluster,
                        settings.replay, settings.seeds, throughput=settings.throughput,
                        tenants=settings.tenants, pairs=settings.pairs)
    except InputError as error:
        name = error.path or ""
        spec_key = SETTING_KEYS.get(name)
        if name in ("cluster_spec", "cluster"):
            where = cluster_key
        elif spec_key is None:
            if error.file is not None:
                raise  # a row of the trace, the throughput file: named by its own file
            where = key
        elif spec_key in entry or spec_key in ("format", "throughput"):
            where = f"{key}.{spec_key}"
        else:
            where = spec_key
        problem = error.problem + (f" ({error.file})" if error.file is not None else "")
        raise reader.error(problem, where, error.value, error.expected) from None
