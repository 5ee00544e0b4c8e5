"""Reading JSON files with clear errors: every file hetsched reads (instances,
profiles, fitted throughput models, cluster specs) goes through :func:`read_json`, and
errors name places in them with :func:`json_path`."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "json_path", "read_json"]


def json_path(parts: Any) -> str:
    """``$.jobs[3].work`` from a sequence of keys and indices."""
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


#: Lists and objects nested deeper than this are rejected (instance, profile, model and
#: cluster files need 5 levels).
MAX_DEPTH = 64
#: Integers with more digits are rejected while parsing: no field takes more than 13
#: digits, and Python refuses to parse more than 4,300.
MAX_INT_DIGITS = 30


class _LongInteger(str):
    """The text of an integer too long to parse (:data:`MAX_INT_DIGITS`), kept so that
    the error can name its JSON path."""


class _TwiceKeyed(dict[str, Any]):
    """An object that names a key twice (JSON lets the last win silently), kept so that
    the error can name its JSON path."""

    twice: str = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            made = _TwiceKeyed(pairs)
            made.twice = key
            return made
        seen.add(key)
    return dict(pairs)


def _parse_int(text: str) -> int | _LongInteger:
    return _LongInteger(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def read_json(path: Path) -> Any:
    """Parse a JSON file; clear errors for a missing, unreadable or malformed file, NaN or
    infinite numbers, integers of more than :data:`MAX_INT_DIGITS` digits, nesting
    deeper than :data:`MAX_DEPTH` levels and a key given twice in one object. A UTF-8 byte
    order mark is skipped."""
    file = str(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise InputError("not a regular file (a device, pipe or socket)", file=file)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such file", file=file) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=file) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         file=file) from None
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror})", file=file) from None
    if not text.strip():
        raise InputError("the file is empty", file=file, expected="a JSON object")
    try:
        doc = json.loads(text, parse_int=_parse_int, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        hint = " (the file looks truncated)" if exc.pos >= len(text.rstrip()) else ""
        raise InputError(
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}{hint}", file=file
        ) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", file=file,
                         expected=f"at most {MAX_DEPTH} levels of lists and objects") from None
    for where, value in _walk(doc):
        if len(where) > MAX_DEPTH:
            raise InputError("JSON nested too deeply", path=json_path(where[:MAX_DEPTH]),
                             file=file,
                             expected=f"at most {MAX_DEPTH} levels of lists and objects")
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError("not a finite number", path=json_path(where), value=value,
                             expected="a finite number (JSON has no NaN or Infinity)", file=file)
        if isinstance(value, _TwiceKeyed):
            raise InputError("a key given twice in one object", file=file,
                             path=json_path((*where, value.twice)), value=value[value.twice],
                             expected="each key once (JSON would keep the last silently)")
        if isinstance(value, _LongInteger):
            raise InputError("number too long", path=json_path(where),
                             value=f"{value[:12]}... ({len(value.lstrip('-'))} digits)",
                             expected=f"a number of at most {MAX_INT_DIGITS} digits", file=file)
    return doc


def _walk(doc: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """``(JSON path parts, value)`` of every value in ``doc``, depth first, in file order;
    a list or object deeper than :data:`MAX_DEPTH` is not entered."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        where, value = stack.pop()
        yield where, value
        if len(where) > MAX_DEPTH:
            continue
        if isinstance(value, dict):
            stack.extend(((*where, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*where, index), value[index])
                         for index in reversed(range(len(value))))
