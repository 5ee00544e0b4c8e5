"""Options of the ``hetsched`` command that apply to every subcommand: ``-v``/``--verbose``
and ``--debug``, accepted before the subcommand (``hetsched -v solve X``) and after it
(``hetsched solve X -v``), as users type them; and the logging they set up. And the
parameter types of numeric options (:class:`FloatIn`, :class:`IntIn`): ASCII digits only,
in a :class:`~hetsched.core.ranges.Range` stated one way."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from hetsched.core.errors import InputError
from hetsched.core.ranges import Range, is_number
from hetsched.files.traces import FORMATS

if TYPE_CHECKING:
    from hetsched.core.bars import BudgetBar

#: A command's function, or the command it becomes (what an option decorates).
Command = TypeVar("Command", bound=Callable[..., Any])

#: The format of the log lines on stderr.
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

VERBOSE_HELP = "Log progress (-v) or details (-vv) to stderr; before or after the command."
DEBUG_HELP = "Show the traceback of unexpected errors; before or after the command."


def format_option(*, required: bool) -> Callable[[Command], Command]:
    """``--format``: a trace format, one of the readers' (:data:`hetsched.files.traces.FORMATS`)."""
    return click.option("--format", "trace_format", required=required,
                        type=click.Choice(tuple(FORMATS)))


def cluster_option(*, required: bool) -> Callable[[Command], Command]:
    """``--cluster``: a cluster spec (:func:`hetsched.files.cluster_spec.parse_cluster`)."""
    return click.option("--cluster", "cluster_spec", required=required,
                        help="v100=36,p100=36,k80=36 (servers of 4 GPUs; TYPE=NxPER for other "
                        "sizes), a cluster JSON, openb:NODE_LIST.csv or pai:MACHINES.csv.")


def tenants_option(use: str) -> Callable[[Command], Command]:
    """``--tenants``: the tenants' weights and quotas (a JSON file); ``use`` says what the
    command does with them."""
    return click.option("--tenants", "tenants_path",
                        type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="Tenants' weights and quotas per GPU type (JSON; "
                        "docs/fairness.md)" + use)


def pairs_option() -> Callable[[Command], Command]:
    """``--pairs``: co-location pairs measured on their own (a CSV file)."""
    return click.option("--pairs", "pairs_path", type=click.Path(dir_okay=False, path_type=Path),
                        default=None, help="Co-location pairs measured on their own (CSV: "
                        "job_type, other_job_type, gpu_type, throughput, other_throughput, "
                        "alone, other_alone; docs/traces.md), over the throughput profile's.")


def log_level(verbosity: int) -> int:
    """The logging level of ``verbosity`` ``-v`` flags: WARNING, INFO (``-v``), DEBUG
    (``-vv``)."""
    return logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 \
        else logging.DEBUG


class _OurHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The stderr handler the command installs (so a later ``-v`` can raise its level,
    while a host's own handlers, pytest's or a notebook's, are left alone). Lines go
    through tqdm, above a progress bar (:mod:`hetsched.core.bars`) instead of through it."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def configure_logging(verbosity: int) -> None:
    """Log ``hetsched``'s messages at :func:`log_level` to stderr: installs the handler
    once (unless the process already has handlers of its own) and sets the level."""
    level = log_level(verbosity)
    root = logging.getLogger()
    if not root.handlers:
        handler = _OurHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
    if any(isinstance(handler, _OurHandler) for handler in root.handlers):
        root.setLevel(level)


def _add_verbosity(ctx: click.Context, _: click.Parameter, count: int) -> None:
    """Callback of a subcommand's ``-v``: adds to the ``-v`` given before it."""
    if not count:
        return
    root = ctx.find_root()
    total = int(root.meta.get("hetsched.verbose", 0)) + count
    root.meta["hetsched.verbose"] = total
    configure_logging(total)


def global_parameters() -> list[click.Parameter]:
    """Fresh ``-v`` and ``--debug`` options for one subcommand (not passed to its
    function: ``-v`` sets the logging up, ``--debug`` is read by ``hetsched.cli.main.main``)."""
    return [
        click.Option(["-v", "--verbose"], count=True, expose_value=False,
                     callback=_add_verbosity, help=VERBOSE_HELP, show_default=False),
        click.Option(["--debug"], is_flag=True, expose_value=False, help=DEBUG_HELP,
                     show_default=False),
    ]


def accept_global_options(group: click.Group) -> None:
    """Give every command under ``group`` (nested groups and their commands included) the
    options of :func:`global_parameters`, so they work after the subcommand too."""
    for command in group.commands.values():
        taken = {opt for param in command.params for opt in getattr(param, "opts", ())}
        if not taken & {"-v", "--verbose", "--debug"}:
            command.params.extend(global_parameters())
        if isinstance(command, click.Group):
            accept_global_options(command)


def remember_verbosity(ctx: click.Context, verbosity: int) -> None:
    """Record the group's own ``-v`` count (before the subcommand) and set logging up."""
    ctx.find_root().meta["hetsched.verbose"] = verbosity
    configure_logging(verbosity)


def solve_bar(model: str, time_limit: float | None, started: float) -> BudgetBar:
    """The bar of ``hetsched solve``: seconds spent of ``time_limit`` (the model's default
    when ``None``; elapsed time alone for a model without a limit) since ``started`` (a
    ``time.monotonic()`` reading), on stderr when it is seen (a terminal), so ``--json``
    on stdout stays clean."""
    from hetsched.core.bars import BudgetBar
    from hetsched.registry import planner

    limit = time_limit if time_limit is not None else planner(model).default_time_limit_s
    return BudgetBar(limit, desc=f"solve ({model})", started=started)


def settings(**extra: Any) -> dict[str, Any]:
    """The context settings of the ``hetsched`` group: ``-h`` for help and every default
    shown in ``--help``; ``extra`` added."""
    return {"help_option_names": ["-h", "--help"], "show_default": True, **extra}


def _number(limits: Range, problem: str, value: Any, param: click.Parameter | None) -> Any:
    """``value`` (the text typed, or a number from a config file or a default) read and
    checked against ``limits`` (:class:`FloatIn`, :class:`IntIn`); an :class:`InputError`
    (``problem``) naming the option otherwise."""
    flag = max(param.opts, key=len) if param is not None and param.opts else "value"
    if isinstance(value, str):
        return limits.read(value, flag, problem)
    if not is_number(value):
        raise InputError(problem, path=flag, value=value, expected=limits.expected)
    return limits.check(value, flag, problem)


class _In:
    """What :class:`FloatIn` and :class:`IntIn` share: the value read and checked against
    ``limits`` (:func:`_number`), made a number by ``cast``; the range in ``--help`` and in
    the type's repr in the same words."""

    limits: Range
    problem: str
    cast: Callable[[Any], Any]

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        """The value as a number in the range (an :class:`InputError` otherwise)."""
        return self.cast(_number(self.limits, self.problem, value, param))

    def _describe_range(self) -> str:
        return self.limits.expected

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.limits.expected})"


class FloatIn(_In, click.FloatRange):
    """A float option in ``limits`` (``problem`` names it in errors: ``bad load``): read
    by :meth:`Range.read <hetsched.core.ranges.Range.read>`, so ``'٣'``, ``'1_000'``,
    ``'nan'`` and ``'inf'`` are refused as any other text that is not a number, with one
    line naming the option, the value and the range (exit 2), as a value of the library
    would be. ``--help`` shows the range in the same words."""

    cast = float

    def __init__(self, limits: Range, problem: str) -> None:
        super().__init__(limits.low, limits.high, min_open=limits.low_open)
        self.limits, self.problem = limits, problem


class IntIn(_In, click.IntRange):
    """An integer option in ``limits``, as :class:`FloatIn` (``'4.0'`` is not one)."""

    cast = int

    def __init__(self, limits: Range, problem: str) -> None:
        low, high = limits.low, limits.high
        super().__init__(None if low is None else int(low), None if high is None else int(high),
                         min_open=limits.low_open)
        self.limits, self.problem = limits, problem
