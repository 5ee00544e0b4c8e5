"""Bring-your-own rolling policies: a class of yours, by reference or by an installed
package's entry point, wherever a policy name is taken (``replay --policy``, ``bench
--policies``, ``solve --model``).

Two ways in (docs/policies.md, "Your own policy"):

* a reference ``module.path:Class`` (an importable module) or ``path/to/file.py:Class``
  (a file, relative paths from the current folder);
* an entry point in the group :data:`ENTRY_POINT_GROUP` of an installed package
  (``[project.entry-points."hetsched.policies"] my-policy = "my_pkg.policy:MyPolicy"``),
  after which ``--policy my-policy`` works like a built-in name.

The registry (:mod:`hetsched.registry`) stays the one table of names: it asks this
module for the installed names and turns a reference into an entry. A class is checked
against the :class:`~hetsched.policies.rolling.RollingPolicy` protocol once made; anything else
is an :class:`~hetsched.core.errors.InputError` naming the option and the reference.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import logging
import re
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

from hetsched.core.errors import InputError
from hetsched.core.interrupts import Overrun, wall_clock_limit

T = TypeVar("T")

log = logging.getLogger(__name__)

#: The entry-point group in which installed packages register rolling policies.
ENTRY_POINT_GROUP = "hetsched.policies"

#: Wall seconds that importing a policy of yours, or making one, may take: past them a
#: module that loops or sleeps at import is a bad ``--policy`` (exit 2), not a hang.
LOAD_TIMEOUT_S = 60.0

#: What a policy needs (the :class:`~hetsched.policies.rolling.RollingPolicy` protocol); the
#: hooks come with :class:`~hetsched.policies.rolling.PolicyHooks`.
REQUIRED_MEMBERS = ("name", "round_s", "decide", "quiet_until", "on_finished", "figures",
                    "on_stall")

_REFERENCE = re.compile(r"^(?P<target>[^:]+(?::[\\/][^:]*)?):(?P<cls>[A-Za-z_][A-Za-z0-9_]*)$")


def is_reference(name: str) -> bool:
    """Whether ``name`` names a class (``module:Class`` or ``file.py:Class``) rather than
    a registered policy."""
    return ":" in name


def _split(reference: str, parameter: str) -> tuple[str, str]:
    """``(module or file, class name)`` of a reference."""
    match = _REFERENCE.match(reference.strip())
    if match is None:
        raise InputError("bad policy reference", path=parameter, value=reference,
                         expected="module.path:Class or path/to/file.py:Class")
    return match.group("target"), match.group("cls")


def _is_file(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


def _module_from_file(path: Path, parameter: str, reference: str) -> Any:
    """The module of a Python file, loaded once per absolute path (registered in
    ``sys.modules`` under a name of its own, so its dataclasses and pickling work)."""
    resolved = path.resolve()
    if not resolved.is_file():
        raise InputError("no such policy file", path=parameter, value=reference,
                         file=str(path), expected="an existing .py file (relative paths are "
                         "taken from the current folder)")
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_name = f"hetsched_plugin_{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise InputError("cannot load the policy file", path=parameter, value=reference,
                         file=str(path), expected="a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        guarded(functools.partial(spec.loader.exec_module, module))
    except InputError as exc:
        del sys.modules[module_name]
        raise InputError(f"the policy file failed to load: {exc.problem}", path=parameter,
                         value=reference, file=str(path),
                         expected="a Python file that imports cleanly") from None
    return module


def guarded(call: Callable[[], T]) -> T:
    """``call()`` (importing or making a policy of yours) within :data:`LOAD_TIMEOUT_S`
    wall seconds; whatever else than a return ends it (an exception, ``sys.exit``, a hang)
    becomes an :class:`InputError` saying which (the caller names what it did: a bad
    ``--policy``, exit 2). Ctrl-C passes."""
    try:
        with wall_clock_limit(LOAD_TIMEOUT_S):
            return call()
    except KeyboardInterrupt:
        raise
    except Overrun:
        raise InputError(f"still running after {LOAD_TIMEOUT_S:g} s") from None
    except SystemExit as exc:
        raise InputError(f"sys.exit({exc.code!r}) was called") from None
    except Exception as exc:
        raise InputError(f"{type(exc).__name__}: {exc}") from exc


def load_class(reference: str, parameter: str = "policy") -> Any:
    """The class ``reference`` names: ``module.path:Class`` imported, or
    ``path/to/file.py:Class`` loaded from the file."""
    target, class_name = _split(reference, parameter)
    if _is_file(target):
        module = _module_from_file(Path(target), parameter, reference)
    else:
        try:
            module = guarded(functools.partial(importlib.import_module, target))
        except InputError as exc:
            raise InputError(f"cannot import the policy's module: {exc.problem}",
                             path=parameter, value=reference, expected="module.path:Class "
                             "with the module importable (installed, or on PYTHONPATH), or "
                             "path/to/file.py:Class") from None
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise InputError("no such class in the policy's module", path=parameter,
                         value=reference, expected=f"a class {class_name} defined in {target}")
    return found


def check_policy(made: object, reference: str, parameter: str = "policy") -> None:
    """Refuse an object that is not a rolling policy: every member of
    :data:`REQUIRED_MEMBERS` present, ``decide`` (and the hooks) callable, ``name`` a
    string, ``round_s`` ``None`` or a number of seconds > 0."""
    missing = [member for member in REQUIRED_MEMBERS if not hasattr(made, member)]
    if missing:
        raise InputError("not a rolling policy", path=parameter, value=reference,
                         expected="a class with " + ", ".join(REQUIRED_MEMBERS) + " (missing: "
                         + ", ".join(missing) + "; inherit hetsched.policy_api.PolicyHooks for the "
                         "hooks; docs/policies.md, 'Your own policy')")
    not_callable = [member for member in ("decide", "quiet_until", "on_finished", "figures")
                    if not callable(getattr(made, member))]
    if not_callable:
        raise InputError("not a rolling policy", path=parameter, value=reference,
                         expected=f"{', '.join(not_callable)} as methods")
    name, round_s = getattr(made, "name"), getattr(made, "round_s")  # noqa: B009
    if not isinstance(name, str) or not name:
        raise InputError("a policy's name must be a non-empty string", path=parameter,
                         value=reference, expected=f"name = 'my-policy' (got {name!r})")
    if round_s is not None and (isinstance(round_s, bool) or not isinstance(
            round_s, int | float) or not round_s > 0):
        raise InputError("a policy's round_s must be None or seconds > 0", path=parameter,
                         value=reference, expected=f"round_s = None or e.g. 360.0 (got "
                         f"{round_s!r})")


@functools.cache
def installed_policies() -> dict[str, str]:
    """The policies installed packages register (:data:`ENTRY_POINT_GROUP`): name ->
    ``module:Class``. Read once per process (``installed_policies.cache_clear()`` reads
    again)."""
    found: dict[str, str] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in found and found[point.name] != point.value:
            log.warning("policy %s is registered twice (%s and %s): the first is used",
                        point.name, found[point.name], point.value)
            continue
        found.setdefault(point.name, point.value)
    return found


def label(name: str) -> str:
    """``name`` as a file or folder name: a reference ``path/to/my_policy.py:MyPolicy``
    becomes ``my_policy.MyPolicy``, ``pkg.mod:Cls`` ``pkg.mod.Cls``; a plain name stays."""
    if not is_reference(name):
        return name
    target, _, class_name = name.rpartition(":")
    stem = Path(target).stem if _is_file(target) else target
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{stem}.{class_name}")
