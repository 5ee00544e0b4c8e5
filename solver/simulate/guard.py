"""A policy asked under guard: what it raises (``SystemExit`` too), a decision over its
wall-clock limit, and a decision that is not one (``None``, a string, a start of a job
that is not pending, a GPU twice, ...) become a :class:`~hetsched.core.errors.PolicyError`
naming the policy, the decision time and the job, which the simulator ends the replay on
(keeping what finished, as an interrupt does). A policy of yours is code the simulator
does not trust (docs/policies.md, "Checked, not trusted")."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hetsched.allocation.layout import Start
from hetsched.core.errors import PolicyError
from hetsched.core.interrupts import Overrun, WallClockLimit
from hetsched.policies.rolling import Decision

__all__ = ["ask", "checked_decision"]

T = TypeVar("T")


def ask(name: str, now: float, what: str, call: Callable[[], T],
        limit: WallClockLimit) -> T:
    """``call()`` (the policy's ``what``, e.g. ``decide``) within ``limit``; a
    :class:`PolicyError` for whatever else than a return ends it. Ctrl-C and SIGTERM pass
    through."""
    try:
        with limit.call():
            return call()
    except KeyboardInterrupt:
        raise
    except Overrun:
        raise PolicyError(name, now, f"{what} ran over its limit of {limit.seconds:g} s wall "
                          "time per decision (--decision-timeout)") from None
    except SystemExit as exc:
        raise PolicyError(name, now, f"{what} called sys.exit({exc.code!r})") from None
    except Exception as exc:
        raise PolicyError(name, now, f"{what} raised {type(exc).__name__}: {exc}") from exc


def checked_decision(name: str, now: float, decision: object) -> Decision:
    """``decision`` if it is a :class:`Decision` of :class:`Start` records and job ids;
    a :class:`PolicyError` naming what it is otherwise (each start's GPUs, job and gang
    are checked by the simulator as it applies them)."""
    if not isinstance(decision, Decision):
        raise PolicyError(name, now, f"decide returned {_shown(decision)}, not a Decision")
    for start in _items(name, now, decision.start, "start"):
        if not isinstance(start, Start) or not isinstance(start.gpus, tuple) or not all(
                isinstance(gpu, str) for gpu in start.gpus):
            raise PolicyError(name, now, f"a start that is not a Start of GPU ids: "
                              f"{_shown(start)}")
    for job in _items(name, now, decision.preempt, "preempt"):
        if not isinstance(job, str):
            raise PolicyError(name, now, f"a preemption that is not a job id: {_shown(job)}")
    return decision


def _items(name: str, now: float, items: object, field: str) -> tuple[object, ...]:
    if not isinstance(items, tuple | list):
        raise PolicyError(name, now, f"Decision.{field} is {_shown(items)}, not a tuple")
    return tuple(items)


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
