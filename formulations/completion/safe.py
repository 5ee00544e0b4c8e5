"""A lower bound on an LP's optimum from any row duals, safe against the solver's
tolerances and valid for a run stopped early (Neumaier and Shcherbina, "Safe bounds in
linear and mixed-integer linear programming", Math. Programming 99, 2004)."""

from __future__ import annotations

import math

import numpy as np

from hetsched.formulations.completion.problem import Vector
from hetsched.formulations.mip.model import MatrixModel

#: The safe dual bound gives up this relative amount for the rounding of its own sums.
SAFETY = 1e-9


def dual_bound(model: MatrixModel, row_dual: Vector) -> float:
    """A lower bound on ``model``'s optimum from any row duals ``y`` (Neumaier and
    Shcherbina's safe bound): ``sum_i y_i b_i + sum_j min(d_j l_j, d_j u_j)`` with ``b_i``
    the row bound the sign of ``y_i`` calls for and ``d = c - A'y``. Duals whose bound is
    infinite are taken as 0; ``-inf`` if a reduced cost needs an infinite column bound."""
    y = np.asarray(row_dual, dtype=np.float64).copy()
    y[(y > 0) & ~np.isfinite(model.row_lower)] = 0.0
    y[(y < 0) & ~np.isfinite(model.row_upper)] = 0.0
    reduced = model.cost - model.matrix.T @ y
    rows = np.where(y > 0, y * np.where(y > 0, model.row_lower, 0.0),
                    y * np.where(y < 0, model.row_upper, 0.0))
    lower, upper = model.col_lower, model.col_upper
    if np.any((reduced < 0) & ~np.isfinite(upper)) or np.any((reduced > 0)
                                                              & ~np.isfinite(lower)):
        return -math.inf
    cols = np.where(reduced > 0, reduced * np.where(reduced > 0, lower, 0.0),
                    reduced * np.where(reduced < 0, upper, 0.0))
    value = math.fsum(rows) + math.fsum(cols) + model.offset
    return value - SAFETY * (abs(value) + math.fsum(np.abs(rows)) + math.fsum(np.abs(cols)))
