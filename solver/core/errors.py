"""Errors raised for bad input.

Every malformed input (instance file, record, command-line value) raises
:class:`InputError`, whose message names the file, the JSON path of the field,
the value found and what was expected. The CLI turns it into one line on stderr
and exit code 2.
"""

from __future__ import annotations

import math
from typing import Any

_MISSING: Any = object()


def _show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        # repr() of an integer of more than 4,300 digits raises, and 60 digits say enough.
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"an integer of about {digits:,} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class InputError(ValueError):
    """Bad input: where it is (file, JSON path), what was found and what was expected."""

    def __init__(
        self,
        problem: str,
        *,
        path: str = "",
        value: Any = _MISSING,
        expected: str | None = None,
        file: str | None = None,
    ) -> None:
        self.problem = problem
        self.path = path
        self.value = value
        self.expected = expected
        self.file = file
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [part for part in (self.file, self.path) if part]
        text = ": ".join([*where, self.problem])
        details = []
        if self.value is not _MISSING:
            details.append(f"got {_show(self.value)}")
        if self.expected:
            details.append(f"expected {self.expected}")
        if details:
            text += " (" + "; ".join(details) + ")"
        return text

    def at(self, prefix: str) -> InputError:
        """The same error with ``prefix`` put in front of its JSON path."""
        if not self.path:
            path = prefix
        elif self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}"
        return InputError(
            self.problem, path=path, value=self.value, expected=self.expected, file=self.file
        )

    def in_file(self, file: str) -> InputError:
        """The same error, naming the file it came from."""
        return InputError(
            self.problem, path=self.path, value=self.value, expected=self.expected, file=file
        )


class InvalidScheduleError(RuntimeError):
    """A schedule hetsched made fails the independent checker (:func:`hetsched.core.check.check`):
    a defect of hetsched, not of the input. ``violations`` are the checker's findings."""

    def __init__(self, what: str, violations: list[Any]) -> None:
        self.violations = violations
        shown = "; ".join(str(v) for v in violations[:3])
        more = f" (and {len(violations) - 3} more)" if len(violations) > 3 else ""
        super().__init__(f"{what} fails the checker: {len(violations)} violations: "
                         f"{shown}{more}")
        self.what = what

    def __reduce__(self) -> tuple[type[InvalidScheduleError], tuple[str, list[Any]]]:
        """Pickled as what failed and the violations (a worker process's error reaches the
        bench as itself, not as a dead worker)."""
        return type(self), (self.what, self.violations)


#: The exit code of a replay whose policy failed (docs/traces.md, "Exit codes").
EXIT_POLICY_FAILED = 3


class PolicyError(RuntimeError):
    """A rolling policy failed at a decision: it raised, exited, ran over its time per
    decision, or returned a decision that breaks the rules (a job that is not pending, a
    GPU twice, ...). The replay stops there and keeps what finished, as an interrupt
    does; ``replay`` is that partial replay when the caller has it."""

    def __init__(self, policy: str, time_s: float, problem: str,
                 job: str | None = None) -> None:
        self.policy, self.time_s, self.problem, self.job = policy, time_s, problem, job
        self.replay: Any = None
        super().__init__(str(self))

    def __str__(self) -> str:
        job = f", job {self.job}" if self.job is not None else ""
        return f"policy {self.policy} failed at t = {self.time_s:,.1f} s{job}: {self.problem}"

    def __reduce__(self) -> tuple[type[PolicyError], tuple[str, float, str, str | None]]:
        return type(self), (self.policy, self.time_s, self.problem, self.job)
