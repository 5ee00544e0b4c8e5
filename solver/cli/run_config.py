"""``hetsched replay --config run.toml``: every option of the command as a key of a TOML
file, and the resolved configuration written back into the output folder.

Keys are the long option names without ``--`` (``format``, ``cluster``, ``policy``,
``time-limit``, ``limit-jobs``, ``wall-clock = true``, ...) and ``trace`` for the trace
file. A file's values become the command's defaults (click's ``default_map``), so an
option typed on the command line wins over the file. Each value is checked by the
option's own type before anything runs: an unknown key or a bad value ends with one
line naming the file, the key, the value and what was expected (exit 2).

Every replay writes ``run.toml`` into its output folder: each option's final value,
paths made absolute, so that ``hetsched replay --config DIR/run.toml`` repeats the run
exactly from any folder (replays are deterministic unless ``--wall-clock``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from hetsched.core.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (Python 3.10)
    import tomli as tomllib

#: The file every replay writes into its output folder.
RUN_FILE = "run.toml"

#: Options that are not run settings (never in a config file, never written).
NOT_SETTINGS = frozenset({"config", "help", "verbose", "debug"})


def _keys(command: click.Command) -> dict[str, click.Parameter]:
    """The config keys of ``command``: each option's long name without ``--``, and each
    argument's name (``trace``)."""
    keys: dict[str, click.Parameter] = {}
    for param in command.params:
        if param.name is None or param.name in NOT_SETTINGS:
            continue
        if isinstance(param, click.Argument):
            keys[param.name] = param
            continue
        long = [opt for opt in param.opts if opt.startswith("--")]
        keys[(long[0] if long else param.opts[0]).lstrip("-")] = param
    return keys


def read_config(path: Path, ctx: click.Context) -> dict[str, Any]:
    """The settings of the TOML file ``path`` for ``ctx``'s command, as its
    ``default_map`` (parameter name -> value), each value checked by its option's type."""
    file = str(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such config file", file=file, path="--config") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"unreadable config file: {exc}", file=file,
                         path="--config") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", file=file, path="--config",
                         expected="key = value lines, e.g. policy = \"srtf\"") from None
    keys = _keys(ctx.command)
    settings: dict[str, Any] = {}
    for key, value in document.items():
        param = keys.get(key) or keys.get(key.replace("_", "-"))
        if param is None or param.name is None:
            raise InputError("unknown key", file=file, path=f"key {key}", value=value,
                             expected="one of " + ", ".join(keys) + " (the options of hetsched "
                             f"{ctx.command.name}, without --)")
        if isinstance(value, dict | list) or (isinstance(value, float) and not math.isfinite(
                value)):
            raise InputError("bad value", file=file, path=f"key {key}", value=value,
                             expected="a string, a number or true/false")
        kinds, expected = _toml_type(param)
        if isinstance(value, bool) is not (bool in kinds) or not isinstance(value, kinds):
            raise InputError("bad value", file=file, path=f"key {key}", value=value,
                             expected=f"{expected} (a TOML {type(value).__name__} is not one)")
        try:
            param.type_cast_value(ctx, value)
        except click.BadParameter as exc:
            raise InputError("bad value", file=file, path=f"key {key}", value=value,
                             expected=exc.message) from None
        except InputError as exc:  # (hetsched's own types: hetsched.cli.options.FloatIn)
            raise InputError(exc.problem, file=file, path=f"key {key}", value=value,
                             expected=exc.expected) from None
        settings[param.name] = value
    return settings


def _toml_type(param: click.Parameter) -> tuple[tuple[type, ...], str]:
    """The TOML value types a key may hold, and how to say so: true/false for a flag, an
    integer for an integer option, a number (integer or float) for a float one, a string
    for the rest (names, choices, paths). No other type is coerced: ``seed = 0.9`` is not
    0, ``limit-jobs = true`` is not 1, ``trace = 0`` is not a file descriptor."""
    kind = param.type
    if (isinstance(param, click.Option) and param.is_flag) or isinstance(
            kind, click.types.BoolParamType):
        return (bool,), "true or false"
    if isinstance(kind, click.types.IntParamType):
        return (int,), "an integer"
    if isinstance(kind, click.types.FloatParamType):
        return (int, float), "a number"
    return (str,), "a string"


def use_config(ctx: click.Context, _: click.Parameter, path: Path | None) -> Path | None:
    """Callback of an eager ``--config`` option: the file's settings become the command's
    defaults (so the command line overrides them, and required options may come from
    the file)."""
    if path is not None:
        ctx.default_map = {**(ctx.default_map or {}), **read_config(path, ctx)}
        ctx.meta[CONFIG_META] = path
    return path


#: Where :func:`use_config` records the config file of a command's context.
CONFIG_META = "hetsched.config"


@contextlib.contextmanager
def located_errors(ctx: click.Context, flags: Mapping[str, str]) -> Iterator[None]:
    """Re-raise an :class:`InputError` about a value that came from the ``--config``
    file (not typed on the line) as naming that file and key, as :func:`read_config`
    does for the errors it finds itself (a range the library checks later: ``load =
    5000``). ``flags``: the library's parameter names and the options that set them."""
    try:
        yield
    except InputError as error:
        path = ctx.meta.get(CONFIG_META)
        if path is None or error.file is not None or error.path is None:
            raise
        flag = flags.get(error.path, error.path)
        for key, param in _keys(ctx.command).items():
            if param.name is None or flag not in (f"--{key}", param.name):
                continue
            if ctx.get_parameter_source(param.name) is ParameterSource.DEFAULT_MAP:
                raise InputError(error.problem, file=str(path), path=f"key {key}",
                                 value=error.value, expected=error.expected) from None
        raise


def _absolute(text: str) -> str:
    """``text`` as an absolute path, ``..`` folded (symlinks kept)."""
    return os.path.abspath(text)


def _absolute_cluster(spec: str) -> str:
    """A ``--cluster`` spec with its file made absolute (a JSON file, ``openb:FILE``,
    ``pai:FILE``); GPU counts as they are."""
    for prefix in ("openb:", "pai:"):
        if spec.startswith(prefix):
            return prefix + _absolute(spec.removeprefix(prefix).strip())
    if spec.strip().endswith(".json") or Path(spec.strip()).is_file():
        return _absolute(spec.strip())
    return spec


def _absolute_policy(name: str) -> str:
    """A ``path/to/file.py:Class`` policy with its file made absolute; names as they are."""
    target, colon, rest = name.partition(":")
    if colon and (target.endswith(".py") or "/" in target):
        return _absolute(target) + ":" + rest
    return name


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def resolved_config(ctx: click.Context) -> str:
    """``run.toml``: every setting of the command as run (``ctx.params``, after the
    command line, the config file and the defaults), paths absolute; unset options as
    comments."""
    lines = [f"# hetsched {ctx.command.name}: the settings of this run. Repeat it with",
             f"#   hetsched {ctx.command.name} --config {RUN_FILE}",
             "# (any option typed on the command line overrides its key here)."]
    for key, param in _keys(ctx.command).items():
        name = param.name
        assert name is not None
        value = ctx.params.get(name)
        if value is None:
            lines.append(f"# {key}: not set")
            continue
        if isinstance(param.type, click.Path):
            value = _absolute(str(value))
        elif key == "cluster":
            value = _absolute_cluster(str(value))
        elif key == "policy":
            value = _absolute_policy(str(value))
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def config_files(ctx: click.Context) -> Mapping[str, str]:
    """The files a replay adds to its output folder: :data:`RUN_FILE`."""
    return {RUN_FILE: resolved_config(ctx)}
