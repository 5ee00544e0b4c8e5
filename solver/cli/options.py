"""Options of the ``hetsched`` command that apply to every subcommand: ``-v``/``--verbose``
and ``--debug``, accepted before the subcommand (``hetsched -v solve X``) and after it
(``hetsched solve X -v``), as users type them; and the logging they set up."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from hetsched.core.bars import BudgetBar

#: The format of the log lines on stderr.
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

VERBOSE_HELP = "Log progress (-v) or details (-vv) to stderr; before or after the command."
DEBUG_HELP = "Show the traceback of unexpected errors; before or after the command."


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
