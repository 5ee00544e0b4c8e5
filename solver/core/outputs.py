"""Output files and folders: checked before the work, written whole, errors in one line.

A long replay or bench must not end in a traceback because its output cannot be
written, so every command checks its output paths first (:func:`check_output_folder`,
:func:`check_output_file`, :func:`check_plot_file`: the place is writable, by creating
and removing a probe beside the target, and a plot's extension is one matplotlib
writes). Files are then written whole (:func:`write_text`: a temporary file beside the
target, renamed over it), and an ``OSError`` met while writing (a full disk, a folder
made read-only meanwhile) becomes an :class:`~hetsched.core.errors.InputError` naming the path
and the option (:func:`writing`), which the CLI prints as one line with exit code 2.
:func:`locked_folder` keeps two benches out of one output folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TextIO

from hetsched.core.errors import InputError

#: What to fix, by the errno of a failed write.
_REMEDY = {
    errno.ENOSPC: "free space on its disk",
    errno.EDQUOT: "free space in the disk quota",
    errno.EROFS: "a place on a writable file system",
    errno.EACCES: "a folder you may write in",
    errno.EPERM: "a folder you may write in",
    errno.ENOENT: "a parent folder that exists and takes new files",
    errno.ENOTDIR: "a path whose parents are folders",
    errno.EISDIR: "a file path, not a folder",
}


def output_error(exc: OSError, target: Path | str, option: str,
                 what: str = "the output") -> InputError:
    """The one-line error for ``exc``, met while writing ``target`` (``option``)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return InputError(f"cannot write {what}: {reason}", file=str(target), path=option,
                      expected=_REMEDY.get(exc.errno or 0, "a place that takes new files"))


@contextlib.contextmanager
def writing(target: Path | str, option: str, what: str = "the output") -> Iterator[None]:
    """Turn an ``OSError`` raised in the block into :func:`output_error`."""
    try:
        yield
    except OSError as exc:
        raise output_error(exc, target, option, what) from None


def _probe(place: Path, target: Path, option: str, what: str) -> None:
    """Create, fill and remove a probe folder in the existing folder ``place``: what
    writing ``target`` there will do (make an entry, write a block, rename)."""
    with writing(target, option, what):
        probe = Path(tempfile.mkdtemp(prefix=f".{target.name}.probe-", dir=place))
        try:
            (probe / "probe").write_bytes(b"\n")
            os.rename(probe / "probe", probe / "renamed")
        finally:
            shutil.rmtree(probe, ignore_errors=True)


def _existing_parent(target: Path, option: str, what: str) -> Path:
    """The nearest existing folder above ``target`` (a parent that is a file is an error)."""
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"a parent of {what} is not a folder", file=str(target),
                                 path=option, value=str(parent),
                                 expected="a path whose parents are folders")
            return parent
    return Path(target.anchor or ".")


def check_output_folder(folder: Path | str, option: str = "out", *,
                        holds: Collection[str] | None = None) -> None:
    """Before any work: ``folder`` is a folder or can be made one, and files can be made
    beside it (the outputs are written in a temporary folder there and renamed). With
    ``holds``, the names of the files a run writes into it (the folder is then replaced
    as a whole), a folder already there may hold nothing else (but a ``.tmp`` file); one
    that another run moves away meanwhile is no error."""
    target = Path(folder).absolute()
    try:  # one look: another run into it may move the folder away meanwhile
        is_file = not stat.S_ISDIR(os.stat(target).st_mode)
    except (FileNotFoundError, NotADirectoryError):  # absent, or a parent is a file (below)
        is_file = False
    if is_file:
        raise InputError("the output folder is a file", file=str(target), path=option,
                         expected="a new folder, or a folder a previous run wrote")
    if holds is not None:
        _holds_only(target, holds, option)
    _probe(_existing_parent(target, option, "the output folder"), target, option,
           "the output folder")


def _holds_only(folder: Path, names: Collection[str], option: str) -> None:
    """An :class:`InputError` if ``folder`` holds a file not in ``names`` (nor a ``.tmp``
    file); none if it is absent, or gone while it is looked at."""
    try:  # one look at a time: another run into it may move the folder away meanwhile
        present = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return  # absent, moved aside by another run, or a parent is a file (said next)
    foreign = sorted(name for name in present if name not in names and not name.endswith(".tmp"))
    if foreign:
        raise InputError("the output folder holds files that are not a run's",
                         file=str(folder), path=option, value=", ".join(foreign[:5]),
                         expected="a new folder, or one holding only " + ", ".join(names)
                         + " (it is replaced as a whole)")


def check_output_file(path: Path | str, option: str, what: str = "the output file") -> None:
    """Before any work: ``path`` is not a folder and can be written (a probe beside it;
    a device such as /dev/null, written in place, only has to exist)."""
    target = Path(path).absolute()
    if target.is_dir():
        raise InputError(f"{what} is a folder", file=str(target), path=option,
                         expected="a file path")
    if target.exists() and not target.is_file():
        return  # /dev/null, a pipe: written in place, nothing to probe
    target = target.resolve()  # a symbolic link: the file it names is replaced
    _probe(_existing_parent(target, option, what), target, option, what)


def plot_formats() -> tuple[str, ...]:
    """The file extensions matplotlib writes (``png``, ``svg``, ``pdf``, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def check_plot_file(path: Path | str, option: str = "plot") -> None:
    """:func:`check_output_file`, and an extension matplotlib writes."""
    suffix = Path(path).suffix.lower().removeprefix(".")
    formats = plot_formats()
    if suffix not in formats:
        raise InputError("unsupported plot format", file=str(path), path=option,
                         value=Path(path).suffix or "no extension",
                         expected="a file ending in ." + ", .".join(formats))
    check_output_file(path, option, "the plot")


def new_file_mode() -> int:
    """The mode a new file gets from ``open``: 0666 less the process's umask."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_text(path: Path | str, text: str, option: str,
               what: str = "the output file") -> None:
    """Write ``text`` as the whole of ``path``: into a temporary file beside it, flushed
    to disk and renamed over it, so a reader never sees half of it and a failed write
    (a full disk) leaves the previous file; a device (/dev/null) is written in place.
    An ``OSError`` becomes :func:`output_error`."""
    target = Path(path)
    with writing(target, option, what):
        if target.exists() and not target.is_file():
            target.write_text(text, encoding="utf-8")
            return
        target = target.resolve()  # through a symbolic link: replace the file it names
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                             dir=target.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
            # mkstemp makes the file 0600; a file written here gets the mode any other
            # new file of the user would (0644 under the usual umask 022).
            os.chmod(temporary, new_file_mode())
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


@contextlib.contextmanager
def locked_folder(folder: Path, option: str = "out",
                  holder: str = "another bench") -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (the file ``.lock`` in it) for the block; a
    second holder is refused at once with a clear error. The lock goes with the process
    that holds it, however it ends (it is a ``flock``). No locking on Windows."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    lock = folder / ".lock"
    with writing(lock, option, "the lock file"):
        stream: TextIO = lock.open("a+", encoding="utf-8")
    with stream:
        try:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            stream.seek(0)
            pid = stream.read().strip()
            raise InputError(f"{holder} is writing into this folder"
                             + (f" (process {pid})" if pid.isdigit() else ""),
                             file=str(folder), path=option,
                             expected="one at a time: wait for it to end, or use "
                             "another folder") from None
        with writing(lock, option, "the lock file"):
            stream.seek(0)
            stream.truncate()
            stream.write(f"{os.getpid()}\n")
            stream.flush()
        yield
