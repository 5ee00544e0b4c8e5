"""The sane range of every number hetsched reads (docs/instance-format.md, "Ranges"), and
the checks of one value against them that every record runs (:mod:`hetsched.core.records`
re-exports the constants). Units: seconds for times, steps for work, steps/s for
throughput, GB for memory, cores for CPUs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
    return int(SEED_RANGE.check(seed, path, "bad seed"))


#: A number as hetsched's formats and options write it: ASCII digits, an optional sign,
#: point and exponent; no Unicode digits (``float`` reads U+0663, an Arabic-Indic 3, and
#: U+FF18, a full-width 8), no ``_`` separators (``float`` reads ``1_000``), no words
#: (``nan``, ``inf``, ``infinity``).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def text_float(text: str) -> float:
    """The finite number written in ``text`` (surrounding blanks ignored) in ASCII digits
    (:data:`_DECIMAL`): a :class:`ValueError` for Unicode digits, ``_`` separators,
    ``nan``, ``inf`` or a number too large for a float (``1e999``), as for any text that is
    not a number."""
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        raise ValueError(f"not a number in ASCII digits: {text!r}")
    value = float(stripped)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def text_int(text: str) -> int:
    """The integer written in ``text`` (``"4"``, ``"-2"``) in ASCII digits only (see
    :func:`text_float`; no point, no exponent, no ``_``)."""
    stripped = text.strip()
    if not _INTEGER.fullmatch(stripped):
        raise ValueError(f"not an integer in ASCII digits: {text!r}")
    return int(stripped)


def _figure(value: float, integer: bool) -> str:
    """A bound as the messages write it: ``86,400``, ``0.001``, ``1e+10``, ``2,147,483,647``."""
    if integer or (value == int(value) and abs(value) < 1e7):
        return f"{int(value):,}"
    return f"{value:g}"


@dataclass(frozen=True)
class Range:
    """A range of numbers and the one way every message writes it (:attr:`expected`):
    ``low`` to ``high`` (``None``: unbounded on that side), ``low`` itself out if
    ``low_open``; integers only if ``integer``; ``noun`` names the numbers (default ``a
    number``, ``an integer``; ``seconds``, ``a weight``). Every value it admits is finite.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    integer: bool = False
    noun: str = ""

    @property
    def expected(self) -> str:
        """The range in words: ``a number > 0 and <= 1``, ``seconds from 0 to 86,400``,
        ``an integer >= 1``, ``a number <= 5``, ``a finite number``."""
        noun = self.noun or ("an integer" if self.integer else "a number")
        low = None if self.low is None else _figure(self.low, self.integer)
        high = None if self.high is None else _figure(self.high, self.integer)
        if low is not None and high is not None:
            return f"{noun} > {low} and <= {high}" if self.low_open \
                else f"{noun} from {low} to {high}"
        if low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {low}"
        if high is not None:
            return f"{noun} <= {high}"
        return noun if self.integer or self.noun else "a finite number"

    def __contains__(self, value: object) -> bool:
        """Whether ``value`` is a finite number (an int if :attr:`integer`; never a bool)
        in the range."""
        return in_range(value, -math.inf if self.low is None else self.low,
                        math.inf if self.high is None else self.high,
                        strict_low=self.low_open, integer=self.integer)

    def check(self, value: Any, path: str, problem: str) -> Any:
        """``value`` if it is in the range, else an :class:`InputError` (``problem`` at
        ``path``, expecting :attr:`expected`)."""
        if value not in self:
            raise InputError(problem, path=path, value=value, expected=self.expected)
        return value

    def read(self, text: str, path: str, problem: str) -> Any:
        """The number written in ``text`` (:func:`text_int` or :func:`text_float`), in the
        range; an :class:`InputError` (``problem`` at ``path``, the text as found, expecting
        :attr:`expected`) for anything else."""
        try:
            value: float = text_int(text) if self.integer else text_float(text)
        except ValueError:
            raise InputError(problem, path=path, value=text, expected=self.expected) from None
        if value not in self:
            raise InputError(problem, path=path, value=text, expected=self.expected)
        return value


#: The range of a seed (:data:`MAX_SEED`).
SEED_RANGE = Range(0, MAX_SEED, integer=True)
#: The range of a node's GPU count (:data:`MAX_GPUS_PER_NODE`).
GPUS_PER_NODE_RANGE = Range(1, MAX_GPUS_PER_NODE, integer=True)
#: The range of a job's duration (:data:`MAX_DURATION_S`).
DURATION_RANGE = Range(0.0, MAX_DURATION_S, low_open=True, noun="seconds")


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
