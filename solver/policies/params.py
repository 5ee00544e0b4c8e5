"""What every rolling policy's parameters record shares: the protocol the registry reads
(a frozen dataclass whose fields are the policy's settings, with its registered name and
back-ends) and the checks their ``__post_init__`` run, each an :class:`InputError` naming
the setting, the value and what was expected.

A record is light (no solver is imported) so that the registry holds one per entry."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

from hetsched.core.errors import InputError

__all__ = ["ROUND_S", "PolicyParams", "check_backend", "check_choice", "check_flag",
           "check_non_negative", "check_positive", "settings_of", "with_settings"]

#: The round (s) of the policies that decide in rounds unless told otherwise (Gavel's
#: six minutes; Tiresias' and the Gavel family's default).
ROUND_S = 360.0


class PolicyParams(Protocol):
    """A rolling policy's parameters: a frozen dataclass, validated when made."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def name(self) -> str:
        """The registered name of the policy these parameters make."""
        ...

    @property
    def backends(self) -> tuple[str, ...]:
        """The back-ends of the model it solves, the default first (none: it solves none)."""
        ...


Params = TypeVar("Params", bound=PolicyParams)


def settings_of(params: PolicyParams) -> tuple[str, ...]:
    """The settings of a record: its fields, in order."""
    return tuple(f.name for f in dataclasses.fields(params))


def with_settings(params: Params, changes: Mapping[str, Any]) -> Params:
    """``params`` with ``changes`` (settings by name), checked again."""
    return dataclasses.replace(params, **changes)


def check_positive(value: float, path: str, what: str, *, finite: bool = True) -> None:
    """``value`` is a number > 0 (finite unless ``finite`` is off); ``what`` says what it
    counts, for the message."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            value > 0 and (math.isfinite(value) or not finite)):
        raise InputError(f"bad {path}", path=path, value=value,
                         expected=f"{what} > 0" + ("" if finite else " (inf: none)"))


def check_non_negative(value: float, path: str, what: str, *, finite: bool = True) -> None:
    """``value`` is a number >= 0 (finite unless ``finite`` is off)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            value >= 0 and (math.isfinite(value) or not finite)):
        raise InputError(f"bad {path}", path=path, value=value,
                         expected=f"{what} >= 0" + ("" if finite else " (inf: no limit)"))


def check_flag(value: object, path: str) -> None:
    """``value`` is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise InputError(f"{path} must be true or false", path=path, value=value,
                         expected="true or false")


def check_choice(value: object, path: str, choices: Iterable[object], *,
                 problem: str = "", expected: str = "") -> None:
    """``value`` is one of ``choices`` (``problem``: default ``unknown <path>``;
    ``expected``: default the choices joined by ``or``)."""
    options = tuple(choices)
    if value not in options:
        raise InputError(problem or f"unknown {path}", path=path, value=value,
                         expected=expected or " or ".join(str(o) for o in options))


def check_backend(params: PolicyParams, backend: str) -> None:
    """``backend`` is one of the back-ends of ``params``' model."""
    if backend not in params.backends:
        raise InputError(f"policy {params.name} has no such back-end", path="backend",
                         value=backend, expected="one of " + ", ".join(params.backends))
