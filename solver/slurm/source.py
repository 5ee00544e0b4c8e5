"""One throughput source for ``slurm submit`` and ``slurm run`` on a local cluster.

``submit`` reads a trace's jobs with a throughput source (``--throughput``, or by default
Gavel's table beside a Gavel trace, the built-in catalogue otherwise) and its emulator
runs them at those speeds. An agent that reads another source sees other job types, or
none with a positive speed, and can start nothing (docs/slurm.md, "The operator's first
hour"). So ``submit`` records the source it used in the cluster's folder
(``CLUSTER_DIR/throughput-source.json``) and ``run --cluster-dir`` reads the same one by
default, and refuses (exit 2) a ``--throughput`` that names another.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.outputs import write_text
from hetsched.core.settings import LEARN_TABLE

log = logging.getLogger(__name__)

#: The record's file name in the cluster's folder.
SOURCE_FILE = "throughput-source.json"
#: The built-in catalogue, as the record names it.
CATALOGUE = "built-in catalogue"
#: ``slurm run --learn``: what the learned model starts from (hetsched.slurm.learning),
#: the names a replay's ``--learn`` takes for rigid jobs.
LEARN_PRIORS = LEARN_TABLE


def _name(source: Path | None) -> str:
    return CATALOGUE if source is None else str(source.resolve())


def record_source(cluster_dir: Path, source: Path | None, trace: Path) -> None:
    """Record that ``trace``'s jobs were submitted with ``source`` (``None``: the
    built-in catalogue)."""
    write_text(cluster_dir / SOURCE_FILE, json.dumps(
        {"throughput": _name(source), "trace": str(trace.resolve())}, indent=1) + "\n",
        "--cluster-dir")


def source_for_run(cluster_dir: Path | None, given: Path | None) -> Path | None:
    """The throughput source the agent reads: ``given`` (``--throughput``), or, with none
    and a cluster whose jobs ``submit`` recorded, the recorded one (logged). An
    InputError when ``given`` is not the recorded one."""
    path = None if cluster_dir is None else cluster_dir / SOURCE_FILE
    if path is None or not path.is_file():
        return given
    try:
        recorded = str(json.loads(path.read_text(encoding="utf-8"))["throughput"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a record of slurm submit's throughput source "
                         f"({exc})", path="throughput", value=str(path),
                         expected='{"throughput": PATH or "built-in catalogue"}') from None
    if given is None:
        log.info("throughputs from %s, as slurm submit used (%s)", recorded, path)
        return None if recorded == CATALOGUE else Path(recorded)
    if _name(given) != recorded:
        raise InputError(
            f"slurm submit ran this cluster's jobs with throughputs from {recorded} "
            f"({path}): an agent reading another source may see none of their job types "
            "run; omit --throughput to read the same, or submit again with this one",
            path="--throughput", value=str(given), expected=recorded)
    return given
