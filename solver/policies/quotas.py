"""Tenants' quotas kept around any rolling policy (docs/fairness.md): one mechanism for
every policy, as a wrapper of its decisions, not a rule inside each.

The tenant table (:class:`~hetsched.core.tenants.TenantTable`) gives each tenant, per GPU
type, a nominal quota (guaranteed) and a borrowing limit. At every decision:

1. **Limits.** The wrapped policy is shown each waiting job with only the GPU types its
   tenant may take now, and its starts are kept in its order, but a start that would
   take its tenant beyond nominal plus borrowing limit on its GPU type is dropped, and
   so is one that borrows (goes beyond the tenant's nominal): a type on which another
   tenant is *owed* (it waits with a job of that type whose gang fits in what it holds
   below its nominal), the GPUs of another tenant's job the policy preempts while it
   runs within its quota, or any type while the job fits in its own tenant's quota of a
   type others borrow (it takes that back instead: a tenant uses its quota before it
   borrows). A preemption whose GPUs no kept start takes, of a job within its tenant's
   quota that does not start elsewhere, is dropped too (the job keeps running).
2. **Reclaim.** Each waiting job of an owed tenant (by arrival), on a type where it is
   owed and where some other tenant holds beyond its nominal or was just refused a
   borrowed start, is started on free GPUs if it fits, else on GPUs of the borrowers'
   running jobs there (whole jobs, the latest started first), which are preempted and
   pay the restart penalty; a job so preempted may start again where its own tenant is
   owed. If it is owed a type a borrowed start of the policy's just took, the decision is
   made again with the job preempted from the start (so that start is refused). So a
   tenant gets its quota back in the decision its jobs arrive at, when the borrowed GPUs
   can hold them. Types with GPUs left free count too: a tenant's quota does not wait
   for the policy's order (a FIFO head that may not borrow holds up no other tenant
   within its quota).
3. **Nothing idle that may be taken.** A job whose start was refused starts where its
   tenant may take free GPUs instead, and so may a job preempted to give a quota back;
   when a start was refused or undone or a job shown narrowed, the waiting jobs the
   policy did not start follow in its order, and the jobs it preempted may take the GPUs
   it would have kept busy (a refused start must not leave idle what others may take).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from hetsched.allocation.layout import SpeedView, Start
from hetsched.core.fairness import tenant_of
from hetsched.core.ranges import MAX_WEIGHT, MIN_WEIGHT
from hetsched.core.records import Job
from hetsched.core.tenants import TenantTable
from hetsched.policies.baselines.common import Misses
from hetsched.policies.quota_ledger import Key, QuotaLedger, busy_gpus, protected_from
from hetsched.policies.rolling import (
    ClusterState,
    Decision,
    PendingLog,
    PolicyHooks,
    RollingPolicy,
    RunningJob,
)
from hetsched.policies.rolling import quiet_until as policy_quiet_until


def with_tenants(policy: RollingPolicy, tenants: TenantTable | None) -> RollingPolicy:
    """``policy`` within the quotas and weights of ``tenants`` (:class:`TenantKeeper`), or
    as it is when no tenant has a quota or a weight other than 1."""
    if tenants is None or not (tenants.has_quotas() or tenants.has_weights()
                               or tenants.preempt_for_shares):
        return policy
    return TenantKeeper(policy, tenants)


class TenantKeeper(PolicyHooks):
    """``policy`` within the quotas of ``tenants`` (module notes): it is shown each waiting
    job with only the GPU types its tenant may take now (a job with none is not shown),
    its starts are checked again together, and owed tenants' jobs are then started where
    borrowers hold their GPUs.

    **Weights.** Every job (waiting or running) is shown with its weight times its
    tenant's weight over the sum of the weights of its tenant's active jobs, so a tenant's
    jobs share its weight: a policy that weighs jobs (``gavel``'s max-min, whose shares
    are proportional to the weights; ``progress``) weighs tenants by the table, and
    within a tenant its jobs as before."""

    def __init__(self, policy: RollingPolicy, tenants: TenantTable) -> None:
        self.policy = policy
        self.tenants = tenants
        self.name = policy.name
        self._view: SpeedView | None = None
        #: each job as last shown (the job it was made from, what was changed, the copy):
        #: a job shown as before is not copied (and checked) again
        self._shown: dict[str, tuple[Job, tuple[object, ...], Job]] = {}
        #: starts of the policy dropped, and jobs preempted to give quotas back
        self.dropped = 0
        self.reclaimed = 0
        #: refused starts of the policy made elsewhere, where the job's tenant may borrow
        self.redirected = 0
        self._redirected = 0  # (of the last pass of keep_quotas)
        #: the waiting jobs the last view (:meth:`limited`) showed with fewer GPU types
        #: than they can run on, or hid
        self._restricted: set[str] = set()
        #: jobs started at their arrival for their tenants' shares, and jobs preempted
        #: for them (hetsched.policies.share_reclaim)
        self.share_starts = 0
        self.share_preemptions = 0
        #: the jobs seen waiting at an earlier decision (the others arrived since), and
        #: where the replay's queue log stood then (read from there on, not the queue)
        self._seen: set[str] = set()
        self._log: PendingLog | None = None
        self._mark = 0

    @property
    def round_s(self) -> float | None:
        """The wrapped policy's round (s), or ``None``."""
        return self.policy.round_s

    def quiet_until(self, state: ClusterState) -> float:
        """The wrapped policy's (nobody waits then: there is nothing to reclaim for)."""
        return policy_quiet_until(self.policy, state) if not state.pending else -math.inf

    def on_finished(self, job: Job, now: float) -> None:
        """The wrapped policy's ``on_finished``."""
        self.policy.on_finished(job, now)
        self._seen.discard(job.id)

    def figures(self) -> dict[str, object]:
        """The wrapped policy's figures, and the quota keeper's counts."""
        return {**self.policy.figures(), "quota_dropped_starts": self.dropped,
                "quota_redirected_starts": self.redirected, "quota_reclaims": self.reclaimed,
                **({"share_starts": self.share_starts,
                    "share_preemptions": self.share_preemptions}
                   if self.tenants.preempt_for_shares else {})}

    def decide(self, state: ClusterState) -> Decision:
        """The wrapped policy's decision on what the quotas allow, kept within them."""
        return self.keep(state, self.policy.decide(self.limited(state)))

    def on_stall(self, state: ClusterState) -> Decision:
        """The wrapped policy's ``on_stall``, as :meth:`decide`."""
        return self.keep(state, self.policy.on_stall(self.limited(state)))

    def _types(self, state: ClusterState, job: Job) -> list[str]:
        """The GPU types ``job`` can run on at its gang size, fastest first."""
        view = self._view
        if view is None or view.cluster is not state.cluster or view.model is not state.throughput:
            view = self._view = SpeedView(state.cluster, state.throughput)
        return list(view.by_type(job))

    def _ledger(self, state: ClusterState, running: Iterable[RunningJob],
                waiting: Iterable[Job]) -> QuotaLedger:
        return QuotaLedger(self.tenants, partial(self._types, state), running, waiting)

    def limited(self, state: ClusterState) -> ClusterState:
        """``state`` with each waiting job allowed only the GPU types its tenant may take
        now (:meth:`QuotaLedger.may_take`), jobs with none left out, and every job weighted
        by its tenant (see the class)."""
        ledger = self._ledger(state, state.running, state.pending) \
            if self.tenants.has_quotas() else None  # (weights only: every type allowed)
        self._restricted = set()
        weigh = self._weigher(state)
        shown: list[Job] = []
        changed = False
        for job in state.pending:
            types = self._types(state, job)
            allowed = types if ledger is None else [t for t in types
                                                    if ledger.may_take(job, t)]
            if len(allowed) < len(types):
                self._restricted.add(job.id)
            if not allowed:
                changed = True
                continue
            fields: dict[str, object] = {} if len(allowed) == len(types) else \
                {"allowed_gpu_types": tuple(allowed)}
            if weigh is not None:
                fields["weight"] = weigh(job)
            if fields:
                changed = True
                job = self._show(job, fields)
            shown.append(job)
        running = state.running if weigh is None else tuple(
            dataclasses.replace(r, job=self._show(r.job, {"weight": weigh(r.job)}))
            for r in state.running)
        if len(self._shown) > 2 * (len(state.pending) + len(state.running)) + 64:
            active = {job.id for job in state.pending} | {r.job.id for r in state.running}
            self._shown = {k: v for k, v in self._shown.items() if k in active}
        if not changed and running is state.running:
            return state
        return dataclasses.replace(state, pending=tuple(shown), running=running,
                                   pending_feed=None)

    def _show(self, job: Job, fields: dict[str, object]) -> Job:
        """``job`` with ``fields`` changed; the copy made last time if it is the same."""
        changes = tuple(sorted(fields.items()))
        last = self._shown.get(job.id)
        if last is not None and last[0] is job and last[1] == changes:
            return last[2]
        copy = dataclasses.replace(job, **fields)  # type: ignore[arg-type]
        self._shown[job.id] = (job, changes, copy)
        return copy

    def _weigher(self, state: ClusterState) -> Callable[[Job], float] | None:
        """Each job's weight within its tenant's (see the class); ``None`` when every
        tenant weighs 1 (the jobs' own weights then stand)."""
        if not self.tenants.has_weights():
            return None
        weights = self.tenants.weights()
        active = [*state.pending, *(r.job for r in state.running)]
        total: dict[str, float] = {}
        for job in active:
            total[tenant_of(job)] = total.get(tenant_of(job), 0.0) + job.weight
        # Scaled so the jobs' weights average 1 (the records' range holds them).
        scale = len(active) / sum(weights.get(tenant, 1.0) for tenant in total) if total \
            else 1.0
        return lambda job: min(MAX_WEIGHT, max(MIN_WEIGHT, scale * job.weight * weights.get(
            tenant_of(job), 1.0) / total[tenant_of(job)]))

    def keep(self, state: ClusterState, decision: Decision) -> Decision:
        """``decision`` made to keep the quotas (:meth:`keep_quotas`) and, with the table's
        ``preempt_for_shares``, with the jobs that arrived since the last decision started
        where their tenants are owed their shares (hetsched.policies.share_reclaim)."""
        kept = self.keep_quotas(state, decision)
        if not self.tenants.preempt_for_shares:
            return kept
        from hetsched.policies.share_reclaim import reclaim_shares

        arrived = self._arrived(state)
        before = len(kept.start)
        kept, victims = reclaim_shares(state, kept, self.tenants, arrived,
                                       partial(self._types, state))
        self.share_starts += len(kept.start) - before
        self.share_preemptions += len(victims)
        return kept

    def _arrived(self, state: ClusterState) -> list[str]:
        """The jobs waiting in ``state`` that no earlier decision saw waiting: from the
        replay's queue log where the state has one (what joined since the last decision),
        else from the whole queue."""
        feed = state.pending_feed
        if feed is not None and feed.log is self._log and self._mark <= feed.mark:
            joined = (job.id for job, _ in feed.since(self._mark) if job is not None)
        else:
            joined = (job.id for job in state.pending)
        if feed is not None:
            self._log, self._mark = feed.log, feed.mark
        arrived = list(dict.fromkeys(j for j in joined if j not in self._seen))
        self._seen.update(arrived)
        return arrived

    def keep_quotas(self, state: ClusterState, decision: Decision) -> Decision:
        """``decision`` made to keep the quotas (module notes). A job preempted to give a
        quota back may leave its own tenant owed a type a borrowed start of the policy's
        took; the decision is then made again with that job preempted from the start, so
        that start is refused and the job placed (a few rounds at most: each adds jobs).
        Without quotas (weights only) nobody is owed anything: ``decision`` as it is."""
        if not self.tenants.has_quotas():
            return decision
        forced: list[str] = []
        for _ in range(len(state.running) + 1):
            kept, preempt, reclaimed, borrowed = self._attempt(state, decision, forced)
            new = [job for job in reclaimed if job not in forced]
            if not new or not borrowed:
                break
            forced += new
        dropped = len([s for s in decision.start if s not in kept])
        self.dropped += dropped
        self.redirected += self._redirected
        self.reclaimed += len(reclaimed) + len(forced)
        if not dropped and len(kept) == len(decision.start) and not reclaimed and \
                not forced and len(preempt) == len(decision.preempt):
            return decision
        return Decision(tuple(kept), (*dict.fromkeys([*preempt, *reclaimed]),),
                        decision.fallback, decision.note)

    def _attempt(self, state: ClusterState, decision: Decision, forced: Sequence[str]
                 ) -> tuple[list[Start], list[str], list[str], bool]:
        """One pass of :meth:`keep` with the jobs ``forced`` preempted besides the
        policy's: the starts kept, the preemptions kept, the jobs preempted to give quotas
        back, and whether a borrowing start was kept."""
        preempt = list(dict.fromkeys([*decision.preempt, *forced]))
        running = {r.job.id: r for r in state.running if r.job.id not in preempt}
        waiting = {job.id: job for job in state.pending}
        for run in state.running:
            if run.job.id in preempt:
                waiting.setdefault(run.job.id, run.job)
        ledger = self._ledger(state, running.values(), ())
        # GPUs of jobs the policy preempts while they run within their tenant's quota: no
        # other tenant's job borrows them.
        before: Counter[Key] = Counter()
        for run in state.running:
            before[(tenant_of(run.job), run.gpu_type)] += len(run.gpus)
        protected = {g: run.job.id for run in state.running if run.job.id in preempt
                     and before[(tenant_of(run.job), run.gpu_type)]
                     <= ledger.nominal((tenant_of(run.job), run.gpu_type)) for g in run.gpus}
        jobs = {**{r.job.id: r.job for r in state.running}, **waiting}
        kept: list[Start] = []
        borrowing: list[Start] = []
        for start in decision.start:  # first the starts within their tenants' quotas
            job = jobs[start.job]
            key = (tenant_of(job), start.gpu_type)
            if ledger.held[key] + len(start.gpus) <= ledger.nominal(key):
                kept.append(start)
                ledger.take(job, start.gpu_type, len(start.gpus))
            else:
                borrowing.append(start)
        # Then those that borrow, against who is owed once those are placed: every job that
        # waits and has not started yet (a start of the policy's may have been dropped).
        placed = {s.job for s in kept}
        ledger.wait_for([j for j in waiting.values() if j.id not in placed])
        refused: set[str] = set()  # types a start was refused on
        dropped: list[Start] = []
        for start in borrowing:
            job = jobs[start.job]
            if ledger.may_take(job, start.gpu_type) and not protected_from(
                    start.gpus, tenant_of(job), protected, jobs, kept):
                kept.append(start)
                ledger.take(job, start.gpu_type, len(start.gpus))
            else:
                refused.add(start.gpu_type)
                dropped.append(start)
        borrowed = len(kept) > len(decision.start) - len(borrowing)
        preempt = self._needed(state, ledger, preempt, kept, running, waiting, dropped, forced)
        reclaimed = self._reclaim(state, ledger, waiting, kept, preempt, running, refused)
        self._redirected = 0
        stopped = [*preempt, *reclaimed]
        chosen = {s.job for s in decision.start} | set(decision.preempt)
        # (the waiting jobs the policy left: only read when the quotas changed something)
        others: list[tuple[Job, str | None]] = [
            (job, None) for job in state.pending if job.id not in chosen] \
            if self._restricted or dropped else []
        self._redirect(state, ledger, [*((jobs[s.job], s.gpu_type) for s in dropped
                                         if s.job not in running),
                                       *((jobs[j], None) for j in reclaimed),
                                       *(others if self._restricted else [])],
                       kept, stopped, protected, waiting)
        if dropped:  # GPUs the policy would have kept busy and the quotas left idle
            short = busy_gpus(state, decision.preempt, decision.start)
            short.subtract(busy_gpus(state, stopped, kept))
            halted = [(jobs[job_id], None) for job_id in decision.preempt
                      if job_id not in running]
            self._redirect(state, ledger, [*others, *halted], kept, stopped, protected,
                           waiting, +short)
        return kept, preempt, reclaimed, borrowed

    def _redirect(self, state: ClusterState, ledger: QuotaLedger,
                  candidates: Sequence[tuple[Job, str | None]], kept: list[Start],
                  preempt: Sequence[str], protected: dict[str, str],
                  waiting: dict[str, Job], budget: Counter[str] | None = None) -> None:
        """Start each of ``candidates`` (in order) on free GPUs where its tenant may take
        them, the type given first, then its fastest (appending to ``kept``): the jobs
        whose start the quotas refused (the policy wanted them to run), the jobs preempted
        to give a quota back (they may borrow elsewhere), then, when the quotas refused
        or undid a start or narrowed the policy's view, the other waiting jobs it did not
        start or preempt (a FIFO head that may not borrow, or a round planned on types a
        job may not take, must not leave GPUs idle that others may take). With a
        ``budget``, at most that many GPUs of each type (those the policy would have kept
        busy)."""
        if not candidates or (budget is not None and not budget):
            return
        pool = state.pool()
        for run in state.running:
            if run.job.id in preempt:
                pool.release(run.gpus, run.job)
        for start in kept:
            pool.take(start.gpus, waiting.get(start.job))
        moved = {s.job for s in kept}
        held = [g for g, owner in protected.items() if owner not in moved and pool.is_free(g)]
        if held:  # (protected GPUs stay with their owners' tenants: not lent here)
            pool.take(held)
        misses = Misses()  # (the pool only shrinks here: a gang that found nothing
        # finds nothing later either)
        for job, first in candidates:
            if job.id in moved:
                continue
            if not pool.has_free():
                break
            for gpu_type in dict.fromkeys([*([first] if first else []),
                                           *self._types(state, job)]):
                if (budget is not None and budget[gpu_type] < job.num_gpus) or \
                        pool.available(gpu_type) < job.num_gpus or \
                        misses.failed(job, gpu_type, job.num_gpus, False) or \
                        not ledger.may_take(job, gpu_type):
                    continue
                gpus = pool.best_fit(job, gpu_type, job.num_gpus, state.throughput)
                if gpus is None:
                    if misses.recordable(job):
                        misses.add(job, gpu_type, job.num_gpus, False)
                    continue
                pool.take(gpus, job)
                kept.append(Start(job.id, gpu_type, gpus))
                moved.add(job.id)
                ledger.take(job, gpu_type, job.num_gpus)
                self._redirected += 1
                if budget is not None:
                    budget[gpu_type] -= job.num_gpus
                break

    def _needed(self, state: ClusterState, ledger: QuotaLedger, preempt: list[str],
                kept: Sequence[Start], running: dict[str, RunningJob],
                waiting: dict[str, Job], dropped: Sequence[Start],
                forced: Sequence[str]) -> list[str]:
        """The preemptions of ``preempt`` still needed once starts were dropped: a job
        whose GPUs no kept start takes and which does not start again elsewhere keeps
        running (it goes back to ``running`` and the ledger) if it runs within its
        tenant's nominal quota, if the policy preempted it for a start that was dropped
        (its GPUs would stand idle; a borrower kept so may still give them back to an
        owed tenant: :meth:`_reclaim`), or if its own move elsewhere was dropped (it
        stays where it runs). Jobs preempted to give a quota back
        (``forced``) stay preempted."""
        taken = {g for s in kept for g in s.gpus}
        moving = {s.job for s in kept}
        wanted = {g for s in dropped for g in s.gpus}
        refused = {s.job for s in dropped}
        needed: list[str] = []
        for job_id in preempt:
            run = next((r for r in state.running if r.job.id == job_id), None)
            key = (tenant_of(run.job), run.gpu_type) if run is not None else ("", "")
            after = ledger.held[key] + len(run.gpus) if run is not None else 0
            if run is None or job_id in moving or job_id in forced or \
                    not taken.isdisjoint(run.gpus) or \
                    after > self.tenants.get(key[0]).quota(key[1]).most or (
                    wanted.isdisjoint(run.gpus) and job_id not in refused and
                    after > ledger.nominal(key)):
                needed.append(job_id)
                continue
            running[job_id] = run
            waiting.pop(job_id, None)
            ledger.take(run.job, run.gpu_type, len(run.gpus))
        return needed

    def _reclaim(self, state: ClusterState, ledger: QuotaLedger, waiting: dict[str, Job],
                 kept: list[Start], preempt: Sequence[str], running: dict[str, RunningJob],
                 refused: set[str]) -> list[str]:
        """Start owed tenants' waiting jobs where borrowers hold their GPUs or GPUs are
        left free (appending to ``kept``): a tenant's nominal quota is guaranteed whatever
        the policy's order (a FIFO head that may not borrow holds up no other tenant's
        jobs within their quotas, as Kueue's queues admit each on its own); the running
        jobs preempted for them, which may start again in the same decision where their
        own tenant is owed (a migration)."""
        started = {s.job for s in kept}
        candidates = [job for job in sorted(waiting.values(), key=lambda j: (j.arrival, j.id))
                      if job.id not in started]
        if not candidates:
            return []
        # Victims: running jobs of tenants beyond their nominal, the latest started first.
        borrowers = sorted((r for r in running.values()
                            if ledger.held[(tenant_of(r.job), r.gpu_type)]
                            > ledger.nominal((tenant_of(r.job), r.gpu_type))),
                           key=lambda r: (r.started, r.job.id))
        rank = {r.job.id: i for i, r in enumerate(borrowers)}
        owner = {g: r.job.id for r in borrowers for g in r.gpus}
        pool = state.pool({g: rank[job_id] for g, job_id in owner.items()})
        for run in state.running:
            if run.job.id in preempt:
                pool.release(run.gpus, run.job)
        for start in kept:
            pool.take(start.gpus, waiting.get(start.job))
        contested = {t for t in state.cluster.type_names
                     if ledger.borrowed(t) or pool.available(t) > 0} | refused
        if not contested:
            return []
        reclaimed: list[str] = []
        for job in candidates:  # (a job preempted below joins the list: it waits now too)
            tenant = tenant_of(job)
            for gpu_type in self._types(state, job):
                key = (tenant, gpu_type)
                if gpu_type not in contested or \
                        ledger.held[key] + job.num_gpus > ledger.nominal(key):
                    continue
                gpus = pool.best_fit(job, gpu_type, job.num_gpus, state.throughput) or \
                    pool.best_fit(job, gpu_type, job.num_gpus, state.throughput,
                                  with_victims=True)
                if gpus is None:
                    continue
                for victim in dict.fromkeys(owner[g] for g in gpus if g in owner):
                    if victim in reclaimed:
                        continue
                    run = running[victim]
                    reclaimed.append(victim)
                    candidates.append(run.job)
                    ledger.take(run.job, run.gpu_type, len(run.gpus), -1)
                    pool.keep(run.gpus)  # no longer a victim: its GPUs are freed, then taken
                    pool.release(run.gpus, run.job)
                pool.take(gpus, job)
                kept.append(Start(job.id, gpu_type, gpus))
                ledger.take(job, gpu_type, job.num_gpus)
                break
        return reclaimed
