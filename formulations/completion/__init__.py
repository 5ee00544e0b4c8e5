"""A lower bound on total weighted completion time (and so on average JCT) from a
time-indexed LP relaxation over a common grid (:mod:`.problem` the data, :mod:`.highs`
the LP and HiGHS; docs/formulations.md, "Time-indexed LP relaxation (lower bound)").

Why it bounds every schedule the simulator can produce. Read ``u_jbc`` off a schedule
(the share of job ``j``'s work done on configuration ``c`` in its block ``b``) and
``C_j`` (its completion). The job does no work before ``r_j``, runs in one configuration
at a time at most at ``v_jc`` (``T_jc = W_j / v_jc``), and type ``t`` has ``G_t`` GPUs;
restarts, slower placements, gaps and time sharing only lose progress. Then each row of
:mod:`.highs` holds:

- work, ``sum_{b,c} u_jbc = 1``: all work is done, in some block;
- one configuration at a time, ``sum_c T_jc u_jbc <= L_b``: doing ``u_jbc W_j`` on ``c``
  takes at least ``T_jc u_jbc`` seconds of the job's time in ``b`` after ``a_b``;
- capacity, ``sum s_c T_jc u_jbc <= G_t |B|`` over the columns of type ``t`` whose
  block lies in ``B``: those seconds hold ``s_c`` GPUs of ``t`` inside ``B`` (leaving the
  catch-all out only relaxes);
- processing time, ``C_j >= r_j + sum T_jc u_jbc``: the job runs that long after ``r_j``;
- the mean-busy-time inequality and its tangents (Goemans; Schulz and Skutella for
  unrelated machines, here with configurations), ``C_j >= sum a_b u_jbc + Phi_j(u)``.

So the LP optimum is at most the best schedule's ``sum_j w_j C_j``. *Proof of the
mean-busy-time inequality.* Let ``rho_j(tau)`` be the share of ``W_j`` done per second
and ``M_j = int tau rho_j``. Within block ``b`` treat each share as a task of length
``T_jc u_jbc`` and weight ``u_jbc``: ``int_b (tau - a_b) rho_j`` is at least the
weighted sum of the tasks' mid-points, which Smith's rule (fastest first, no gaps;
splitting does not help) minimises at ``q_j(u_jb.) = u' S u / 2``, ``S_cc' = min(T_jc,
T_jc')``. So ``M_j >= sum_b (a_b u_jb + q_j(u_jb.))``; symmetrically ``C_j - M_j``, the
same tasks packed backwards from ``C_j``, is at least ``q_j(U)``, ``U_c = sum_b u_jbc``.
Add the two. ``S`` is positive semidefinite (``min(x, y)`` is Brownian motion's
covariance), so ``Phi_j`` is convex and every tangent is a valid cut; every entry of
``S`` is at least ``p_j``, so ``Phi_j(u) >= p_j / 2``, the plain mean-busy-time row.

The column bound ``C_j <= e_j + max_c T_jc + 1`` (a unit) cuts off no optimum: moving
all of job ``j``'s work to its catch-all on its fastest configuration frees capacity and
satisfies every row of ``j`` with ``C_j = max(e_j, r_j) + p_j`` (its cuts included: they
are tangents of ``Phi_j``, which is ``p_j`` there).
"""

from hetsched.formulations.completion.highs import CompletionBound, completion_bound
from hetsched.formulations.completion.problem import (
    CompletionBoundSettings,
    CompletionProblem,
    completion_problem,
)
from hetsched.formulations.completion.safe import dual_bound

__all__ = ["CompletionBound", "CompletionBoundSettings", "CompletionProblem",
           "completion_bound", "completion_problem", "dual_bound"]
