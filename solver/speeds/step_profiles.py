"""Reading measured step and sync times as :class:`~hetsched.speeds.steps.StepRow` records.

* :func:`read_pollux_profile`: Pollux's measurements, a folder of one sub-folder per model
  (``<model>/placements.csv``: ``placement, local_bsz, step_time, sync_time``, the
  placement one digit per node; ``<model>/scalability.csv``: ``num_nodes, num_replicas,
  local_bsz, step_time, sync_time``), or one model's folder. The job type is the
  sub-folder's name, the GPU type ``t4`` (Pollux measured on nodes of 4 NVIDIA T4s).
  ``scalability.csv`` does not say how its replicas sat on the nodes: they are spread as
  evenly as possible, the first nodes taking one more (7 on 6 nodes: ``(2, 1, 1, 1, 1,
  1)``); in this model only the GPU count, the node count and the fullest node count.
  The six models Pollux measured state their trainable parameters
  (:data:`POLLUX_MODEL_PARAMETERS`); other sub-folders none.
* :func:`read_sia_profile`: Sia's measurements, the same per GPU type
  (``<model>/placements-<type>.csv``, ``scalability-<type>.csv``), the GPU type the file's.
* :func:`read_step_profile_csv`: the tidy CSV profile (docs/throughput-model.md) with the
  optional columns ``local_batch_size``, ``step_time`` and ``sync_time``; the rows that
  fill them are step rows (others, throughput only, are passed over). The placement is
  ``(num_gpus,)`` for ``packed``; for ``spread`` the optional column ``node_gpus`` gives
  the GPUs on each node (``2+2``), else one GPU per node; the optional column
  ``model_parameters`` the job type's trainable parameters (blank: not stated).

Every bad cell is an :class:`~hetsched.core.errors.InputError` naming the file, the line,
the column, the value found and what was expected.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement
from hetsched.speeds.measured_csv import cell_number, csv_rows
from hetsched.speeds.measured_steps import (
    PLACEMENT_COLUMNS,
    SCALABILITY_COLUMNS,
    placement_cell,
)
from hetsched.speeds.profiles import STEP_COLUMNS
from hetsched.speeds.steps import STEP_TIME_EXPECTED, STEP_TIME_RANGE, StepRow

log = logging.getLogger(__name__)

#: The GPU type of Pollux's measurements.
POLLUX_GPU_TYPE = "t4"
#: The tidy profile's columns a step row needs (``node_gpus`` and ``model_parameters``
#: are optional).
STEP_PROFILE_COLUMNS = ("job_type", "gpu_type", "num_gpus", "placement", *STEP_COLUMNS[:3])
#: The trainable parameters (the gradient each step synchronises) of the six models
#: Pollux measured, as its artifact trained them (adaptdl, branch osdi21-artifact,
#: ``benchmark/models/``), counted from their definitions.
POLLUX_MODEL_PARAMETERS = {
    # bert-base-uncased (pooler included) with SQuAD's span head (run_squad.py)
    "bert": 109_483_778,
    # ResNet-18 for 32x32 images, 10 classes (models/resnet.py)
    "cifar10": 11_173_962,
    # 2 convolutions (41x11, 21x11, 32 channels), 5 bidirectional GRUs of 800 on 1,312
    # inputs, 29 labels (train.py's defaults)
    "deepspeech2": 41_187_968,
    # torchvision's ResNet-50
    "imagenet": 25_557_032,
    # NeuMF-end on ml-1m: 6,040 users, 3,706 items, 32 factors, 3 MLP layers (config.py)
    "ncf": 1_602_657,
    # Darknet-53 YOLOv3 at VOC's 20 classes: the 80-class network's 61,949,149 less its
    # three output layers' 60 classes (3 x 60 channels on 1,024 + 512 + 256 inputs)
    "yolov3": 61_626_049,
}


def even_placement(num_nodes: int, num_replicas: int) -> tuple[int, ...]:
    """``num_replicas`` GPUs spread as evenly as possible over ``num_nodes`` nodes, the
    first nodes taking one more."""
    base, extra = divmod(num_replicas, num_nodes)
    return (base + 1,) * extra + (base,) * (num_nodes - extra)


def _row(where: tuple[str, int], source: str, job_type: str, gpu_type: str,
         placement: tuple[int, ...], local_bsz: float, step_time: float,
         sync_time: float, model_parameters: float | None = None) -> StepRow:
    """A step row, an InputError of the record naming the file and line."""
    try:
        return StepRow(job_type, gpu_type, placement, local_bsz, step_time, sync_time, source,
                       model_parameters)
    except InputError as exc:
        file, line = where
        raise InputError(exc.problem, file=file, path=f"line {line}.{exc.path}",
                         value=exc.value, expected=exc.expected) from None


def _times(cells: dict[str, str], where: tuple[str, int]) -> tuple[float, float]:
    low, high = STEP_TIME_RANGE
    step = cell_number(cells, "step_time", where, low=low, high=high,
                       expected=STEP_TIME_EXPECTED)
    return step, cell_number(cells, "sync_time", where, low=0.0, high=high,
                             expected=f"seconds from 0 to less than the step time {step!r}")


def _count(cells: dict[str, str], column: str, where: tuple[str, int]) -> int:
    return int(cell_number(cells, column, where, low=1.0, integer=True,
                           expected="an integer >= 1"))


def _read_model(folder: Path, job_type: str, gpu_type: str = POLLUX_GPU_TYPE,
                suffix: str = "") -> list[StepRow]:
    """One model's step rows on ``gpu_type``: ``placements<suffix>.csv`` and
    ``scalability<suffix>.csv`` (Sia's ``-<type>`` files, or Pollux's)."""
    rows: list[StepRow] = []
    size = POLLUX_MODEL_PARAMETERS.get(job_type)
    path = folder / f"placements{suffix}.csv"
    name = f"{folder.name}/{path.name}"
    for line, cells in csv_rows(path, PLACEMENT_COLUMNS):
        where = (str(path), line)
        placement = placement_cell(cells, where)
        bsz = cell_number(cells, "local_bsz", where, low=0.0, strict=True,
                          expected="samples per GPU > 0")
        step, sync = _times(cells, where)
        rows.append(_row(where, f"{name} line {line}", job_type, gpu_type, placement,
                         bsz, step, sync, size))
    path = folder / f"scalability{suffix}.csv"
    name = f"{folder.name}/{path.name}"
    if not path.is_file():
        return rows
    for line, cells in csv_rows(path, SCALABILITY_COLUMNS):
        where = (str(path), line)
        nodes = _count(cells, "num_nodes", where)
        replicas = _count(cells, "num_replicas", where)
        if replicas < nodes:
            raise InputError("fewer replicas than nodes", file=str(path),
                             path=f"line {line}.num_replicas", value=cells["num_replicas"],
                             expected=f"an integer >= num_nodes ({nodes})")
        bsz = cell_number(cells, "local_bsz", where, low=0.0, strict=True,
                          expected="samples per GPU > 0")
        step, sync = _times(cells, where)
        placement = even_placement(nodes, replicas)
        rows.append(_row(where, f"{name} line {line}", job_type, gpu_type, placement,
                         bsz, step, sync, size))
    return rows


def read_sia_profile(folder: Path) -> tuple[StepRow, ...]:
    """Sia's measurements (``<model>/placements-<type>.csv`` and
    ``scalability-<type>.csv``, hetsched.speeds.sia) as step rows, the GPU type each
    file's; the models Sia has but hetsched does not read (``gpt_pmp``) are passed over,
    logged with why."""
    from hetsched.speeds.sia import REFUSED

    rows: list[StepRow] = []
    for path in sorted(Path(folder).glob("*/placements-*.csv")):
        model, gpu = path.parent, path.stem.removeprefix("placements-")
        if model.name in REFUSED:
            log.info("%s: not read (%s)", path, REFUSED[model.name])
            continue
        rows.extend(_read_model(model, model.name, gpu, f"-{gpu}"))
    log.info("read %s: %d step rows of Sia's", folder, len(rows))
    return tuple(rows)


def read_pollux_profile(folder: Path) -> tuple[StepRow, ...]:
    """Every ``<model>/placements.csv`` and ``<model>/scalability.csv`` under ``folder``
    (or ``folder``'s own, if it is one model's folder) as step rows (module notes). A
    sub-folder without ``placements.csv`` beside others with one is an error (hidden
    ones, ``.name``, are passed over)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder", file=str(folder),
                         expected="a folder of Pollux's measurements (<model>/placements.csv)")
    if (folder / "placements.csv").is_file():
        models = [folder]
    else:
        subs = sorted(sub for sub in folder.iterdir()
                      if sub.is_dir() and not sub.name.startswith("."))
        models = [sub for sub in subs if (sub / "placements.csv").is_file()]
        lacking = [sub for sub in subs if sub not in models]
        if models and lacking:
            # a model whose measurements would be passed over unseen
            raise InputError("no placements.csv in a model's folder", file=str(lacking[0]),
                             value=sorted(item.name for item in lacking[0].iterdir())[:5],
                             expected="placements.csv in every sub-folder, one per model "
                             f"(as in {models[0].name}/)")
    if not models:
        raise InputError("no placements.csv in the folder or its sub-folders",
                         file=str(folder), expected="one sub-folder per model, each with a "
                         "placements.csv (Pollux's traces/)")
    rows: list[StepRow] = []
    for model in models:
        rows.extend(_read_model(model, model.name))
    log.info("read %s: %d step rows of %d models", folder, len(rows), len(models))
    return tuple(rows)


def _tidy_placement(cells: dict[str, str], where: tuple[str, int]) -> tuple[int, ...]:
    file, line = where
    count = _count(cells, "num_gpus", where)
    try:
        placement = Placement(cells["placement"])
    except ValueError:
        raise InputError("bad placement", file=file, path=f"line {line}.placement",
                         value=cells["placement"], expected="packed or spread") from None
    text = cells.get("node_gpus", "")
    if not text:
        return (count,) if placement is Placement.PACKED else (1,) * count
    parts = text.split("+")
    if not all(p.strip().isascii() and p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise InputError("bad node_gpus", file=file, path=f"line {line}.node_gpus",
                         value=text, expected="GPUs on each node joined by + (\"2+2\")")
    gpus = tuple(int(p) for p in parts)
    if sum(gpus) != count or (len(gpus) == 1) != (placement is Placement.PACKED):
        raise InputError("node_gpus does not match num_gpus and placement", file=file,
                         path=f"line {line}.node_gpus", value=text,
                         expected=f"{count} GPUs in all, on one node if packed, on several "
                         "if spread")
    return gpus


def read_step_profile_csv(path: Path) -> tuple[StepRow, ...]:
    """The step rows of a tidy CSV profile (module notes); the rows without a step time
    are passed over. No step row at all is an error."""
    path = Path(path)
    file = str(path)
    header = _header(path)
    columns = STEP_PROFILE_COLUMNS + tuple(name for name in STEP_COLUMNS[3:]
                                           if name in header)
    rows: list[StepRow] = []
    sizes: dict[str, tuple[float, int]] = {}
    for line, cells in csv_rows(path, columns):
        where = (file, line)
        if not cells["step_time"]:
            continue
        placement = _tidy_placement(cells, where)
        bsz = cell_number(cells, "local_batch_size", where, low=0.0, strict=True,
                          expected="samples per GPU > 0")
        step, sync = _times(cells, where)
        size = _model_parameters(cells, where, sizes)
        rows.append(_row(where, f"{path.name} line {line}", cells["job_type"],
                         cells["gpu_type"], placement, bsz, step, sync, size))
    if not rows:
        raise InputError("no row with a step time", file=file, path="step_time",
                         expected="rows with local_batch_size, step_time and sync_time")
    return tuple(rows)


def _model_parameters(cells: dict[str, str], where: tuple[str, int],
                      seen: dict[str, tuple[float, int]]) -> float | None:
    """The row's ``model_parameters`` (``None`` if the column or the cell is blank); an
    InputError if it differs from the job type's earlier rows'."""
    if not cells.get("model_parameters"):
        return None
    size = cell_number(cells, "model_parameters", where, low=1.0,
                       expected="the job type's trainable parameters, >= 1")
    first = seen.setdefault(cells["job_type"], (size, where[1]))
    if first[0] != size:
        raise InputError("model_parameters differs within a job type", file=where[0],
                         path=f"line {where[1]}.model_parameters", value=size,
                         expected=f"{first[0]:g}, as on line {first[1]} for "
                         f"{cells['job_type']!r}")
    return size


def _header(path: Path) -> list[str]:
    """The column names of a CSV file ([] if it has none or cannot be read: the reader
    then says why)."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            return [name.strip() for name in handle.readline().split(",")]
    except (OSError, UnicodeDecodeError):
        return []


def has_step_columns(path: Path) -> bool:
    """Whether ``path`` is a step profile: a folder (Pollux's measurements) or a CSV file
    whose header names ``step_time``."""
    path = Path(path)
    if path.is_dir():
        return True
    return path.suffix.lower() == ".csv" and "step_time" in _header(path)


def read_step_rows(path: Path) -> tuple[StepRow, ...]:
    """Step rows from a folder of Pollux's or Sia's measurements or a tidy CSV with step
    columns."""
    path = Path(path)
    if path.is_dir():
        from hetsched.speeds.sia import is_sia_folder

        return read_sia_profile(path) if is_sia_folder(path) else read_pollux_profile(path)
    return read_step_profile_csv(path)
