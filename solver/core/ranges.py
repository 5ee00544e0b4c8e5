"""The sane range of every number hetsched reads (docs/instance-format.md, "Ranges"), and
the checks of one value against them that every record runs (:mod:`hetsched.core.records`
re-exports the constants). Units: seconds for times, steps for work, steps/s for
throughput, GB for memory, cores for CPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from hetsched.core.errors import InputError

#: The sane range of every number of an instance (docs/instance-format.md, "Ranges").
#: Times (arrival, deadline, now) in s: 1e10 s is 317 years, so Unix-epoch seconds fit
#: and epoch milliseconds or nanoseconds (a unit mistake) do not.
MAX_TIME_S = 1e10
#: Work of one job, in training steps.
MAX_WORK = 1e12
#: A positive throughput, steps/s (0 means "cannot run"): from one step in 31 years
#: to one step per nanosecond.
MIN_THROUGHPUT = 1e-9
MAX_THROUGHPUT = 1e9
#: work / throughput of every configuration a job can use, in s (as MAX_TIME_S).
MAX_DURATION_S = 1e10
#: Job weights: a ratio of 1e6 between the heaviest and lightest job at most, beyond
#: which the lightest jobs vanish below the solvers' tolerances.
MIN_WEIGHT = 1e-3
MAX_WEIGHT = 1e3
#: GPUs of one node, of one job's gang, and of a whole cluster.
MAX_GPUS_PER_NODE = 1024
MAX_GPUS_PER_JOB = 100_000
MAX_CLUSTER_GPUS = 100_000
#: GPU pairs inside nodes that the default topology links (it links every pair).
MAX_NODE_LOCAL_LINKS = 1_000_000
#: The smallest GPU share a job may ask for (and the resolution of shares).
MIN_GPU_SHARE = 0.001
#: CPUs of a node; memory (GB) of a GPU type or a node; price per GPU-hour.
MAX_CPUS = 1_000_000
MAX_MEMORY_GB = 1e7
MAX_PRICE_PER_HOUR = 1e6
#: Seeds (the trace reader's, the policies', the solvers'): 32-bit signed integers in
#: CP-SAT, HiGHS and SCIP.
MAX_SEED = 2**31 - 1


def is_int(value: Any) -> bool:
    """Whether ``value`` is an int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """Whether ``value`` is an int or a float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def in_range(value: Any, low: float, high: float, *, strict_low: bool = False,
             integer: bool = False) -> bool:
    """Whether ``value`` is a finite number (an int if ``integer``) in ``[low, high]``
    (``(low, high]`` if ``strict_low``). Integers of any size compare exactly."""
    if not (is_int(value) if integer else is_number(value)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return bool((value > low if strict_low else value >= low) and value <= high)


def check_name(value: Any, field_name: str, what: str) -> None:
    """Raise an InputError unless ``value`` is a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{what} must be a non-empty string", path=field_name, value=value)


def check_unique(names: Iterable[str], field_path: str, problem: str, expected: str
                 ) -> set[str]:
    """The set of ``names``; an InputError at ``field_path`` (``{index}`` filled in, e.g.
    ``gpu_types[{index}].name``) for the first name given twice."""
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            raise InputError(problem, path=field_path.format(index=index), value=name,
                             expected=expected)
        seen.add(name)
    return seen


def check_range(value: Any, field_name: str, expected: str, low: float, high: float, *,
                strict_low: bool = False, integer: bool = False) -> None:
    """Raise an InputError naming ``field_name`` unless :func:`in_range`."""
    if not in_range(value, low, high, strict_low=strict_low, integer=integer):
        raise InputError(f"bad {field_name}", path=field_name, value=value, expected=expected)


def check_optional(value: Any, field_name: str, expected: str, high: float) -> None:
    """:func:`check_range` from 0 to ``high``, unless ``value`` is ``None``."""
    if value is not None:
        check_range(value, field_name, expected, 0.0, high)


def check_seed(seed: int, path: str = "seed") -> int:
    """A seed: an integer from 0 to :data:`MAX_SEED` (``path`` names it in the error)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError("bad seed", path=path, value=seed,
                         expected=f"an integer from 0 to {MAX_SEED:,}")
    return seed


def text_float(text: str) -> float:
    """The number written in ``text``, in ASCII only: Python's ``float`` also reads
    full-width and other Unicode digits (U+FF18, a full-width 8), which no format hetsched
    reads writes; a :class:`ValueError` for those, as for any text that is not a number."""
    if not text.isascii():
        raise ValueError(f"not ASCII: {text!r}")
    return float(text)


def text_int(text: str) -> int:
    """The integer written in ``text`` (``"4"``), in ASCII only (see :func:`text_float`)."""
    if not text.isascii():
        raise ValueError(f"not ASCII: {text!r}")
    return int(text)


def name_value_items(text: str | Mapping[str, Any] | None, problem: str, path: str,
                     expected: str) -> list[str]:
    """``"a=1, b=2"`` (or ``{"a": 1, "b": 2}``) as its ``NAME=VALUE`` items, stripped
    (``[]`` for ``None`` or blank text); an :class:`InputError` (``problem`` at ``path``)
    for anything else. The callers parse and check each item."""
    if text is None:
        return []
    if isinstance(text, Mapping):
        return [f"{key}={value}" for key, value in text.items()]
    if isinstance(text, str):
        return [item.strip() for item in text.split(",")] if text.strip() else []
    raise InputError(problem, path=path, value=text, expected=expected)
