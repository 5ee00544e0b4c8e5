"""The agent behind ``hetsched slurm run``: any registered rolling policy driving a live
Slurm cluster through the same ``RollingPolicy.decide(ClusterState) -> Decision`` the
simulator uses (docs/slurm.md, "The agent").

Each cycle reads the cluster (:mod:`hetsched.slurm.state`) and, when something changed
(a job arrived, started, ended) or a round of the policy is due, asks the policy and
applies its decision with Slurm's commands (:class:`LiveCluster`): a preemption
requeues the job held, a start pins a held job to its nodes and releases it; a move
(preempted and started elsewhere in one decision) is started where it was moved once
Slurm has requeued it. The agent keeps no scheduling state of its own but those moves,
in memory: a restarted agent reads everything it decides on from Slurm (pending,
running, where), and the policy decides again where a moved job goes. What it
remembers, for its output files and its predictions of a job's progress, it appends to
``OUT/events.jsonl`` as it goes and reads back on a restart
(:mod:`hetsched.slurm.history`).

Time is the jobs' trace time (:class:`~hetsched.slurm.metadata.JobMeta`): Unix time
minus the origin, times the speedup; a cluster with real jobs runs at speedup 1.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hetsched.allocation.layout import Start
from hetsched.core.errors import InputError, PolicyError
from hetsched.core.interrupts import WallClockLimit
from hetsched.core.log_levels import per_decision_logs
from hetsched.core.records import Cluster, Job
from hetsched.core.settings import DECISION_TIMEOUT_S, check_time_limit
from hetsched.core.throughput import ThroughputModel
from hetsched.knowledge.estimators import HistoryEstimator
from hetsched.knowledge.view import MIN_GUESS, KnowledgeView
from hetsched.policies.rolling import ClusterState, Decision, RollingPolicy, RunningJob
from hetsched.simulate.driver import PolicyDriver, start_problem
from hetsched.slurm.control import SlurmRefusedError
from hetsched.slurm.history import History
from hetsched.slurm.learning import Reports
from hetsched.slurm.live import LiveCluster
from hetsched.slurm.recovery import Recovery
from hetsched.slurm.runnable import NeverRuns
from hetsched.slurm.state import Snapshot, slurm_takes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentSettings:
    """How the agent runs: its poll interval (wall s), when it stops (after
    ``stop_after`` managed jobs ended, once none runs, or after ``idle_exit_s`` wall seconds with
    nothing managed pending or running; ``None``: never, until Ctrl-C), and the wall-clock
    limit of one call of the policy (``decision_timeout_s``, as a replay's: a call over it
    changes nothing that runs, and is logged)."""

    poll_s: float = 0.25
    stop_after: int | None = None
    idle_exit_s: float | None = None
    decision_timeout_s: float | None = DECISION_TIMEOUT_S

    def __post_init__(self) -> None:
        check_time_limit(self.decision_timeout_s, "--decision-timeout", "bad decision timeout")
        if not (math.isfinite(self.poll_s) and 0.01 <= self.poll_s <= 60):
            raise InputError("bad poll interval", path="--poll", value=self.poll_s,
                             expected="seconds from 0.01 to 60")
        if self.stop_after is not None and self.stop_after < 1:
            raise InputError("bad job count", path="--stop-after", value=self.stop_after,
                             expected="an integer >= 1")


def _per_node(start: Start, cluster: Cluster) -> dict[str, int]:
    """A start's GPUs on each of its nodes."""
    gpus = cluster.gpu_by_id
    return Counter(gpus[gpu].node for gpu in start.gpus)


def is_uneven(start: Start, cluster: Cluster) -> bool:
    """Whether a start's GPUs are not the same count on each of its nodes (3 + 1)."""
    return len(set(_per_node(start, cluster).values())) > 1


def gang_layout(start: Start, free: set[str], cluster: Cluster
                ) -> tuple[list[str], list[int], tuple[str, ...]] | None:
    """How Slurm will run a start: its nodes in cluster order (Slurm's), the GPUs on each,
    and the GPUs it will take. The same count on every node is the policy's own GPUs; an
    uneven gang (3 + 1) is a ``TresPerJob`` that Slurm splits over those nodes itself
    (:func:`~hetsched.slurm.state.slurm_split`), taking the first ``free`` GPUs of each:
    the same GPU type, count and nodes, so the same speed. ``None`` if Slurm's split
    does not fit the nodes' ``free`` GPUs."""
    per = _per_node(start, cluster)
    nodes = [n.name for n in cluster.nodes if n.name in per]
    counts = [per[n] for n in nodes]
    if len(set(counts)) == 1:
        return nodes, counts, start.gpus
    taken = slurm_takes([[g for g in cluster.node_by_name[n].gpu_ids() if g in free]
                         for n in nodes], len(start.gpus))
    return None if taken is None else (nodes, *taken)


class Agent:
    """One policy on one live cluster (module docstring). ``clock`` is Unix time (s).

    ``model`` is what the policy sees (the fitted throughput, as in a replay); ``truth``
    (default ``model``) is what the jobs are taken to run at when the agent works out the
    steps they have left, as a replay advances them at the measured throughput. With the
    fitted model there, a job the model thinks faster than it runs looks finished while
    it still runs (its steps left floored at a millionth of its work), and a policy that
    values a job by its remaining work (``progress``: its speed over its steps left)
    weighs it a million times more."""

    def __init__(self, live: LiveCluster, policy: RollingPolicy, model: ThroughputModel,
                 history: History, settings: AgentSettings | None = None, *,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 truth: ThroughputModel | None = None,
                 reports: Reports | None = None,
                 knowledge: KnowledgeView | None = None) -> None:
        self.live = live
        self.policy = policy
        self.driver = PolicyDriver(policy)
        self.model = model
        self.never = NeverRuns(model)
        self.truth = truth or model
        self.history = history
        self.settings = settings or AgentSettings()
        self.clock = clock
        self.sleep = sleep
        self._last_seen: tuple[object, ...] = ()
        self._next_round = -math.inf
        # job id -> where a decision moved it: started again there once Slurm has
        # requeued it (in memory only: a restarted agent lets the policy decide again)
        self._moves: dict[str, Start] = {}
        self._idle_since: float | None = None
        self.stopped_because = ""
        self.recovery = Recovery(live, history)
        #: the jobs' reports: their progress, and what is learned from them
        self.reports = reports
        if reports is not None:
            self.recovery.last_run = reports.last_run
        #: what the policy may know of the jobs' work, as in a replay (``--knowledge``;
        #: None: the metadata's work): each job shown with its work guessed when the
        #: agent first sees it, from the jobs it saw complete (hetsched.knowledge)
        self.knowledge = knowledge
        #: without ``knowledge``, the guesses shown of the jobs whose metadata leaves
        #: their work out (``JobMeta.work_hidden``), by the same rule (made at the first
        #: end or decision: told of every job that completes)
        self.guesses: KnowledgeView | None = None

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> None:
        """Cycle until a stop condition holds (:class:`AgentSettings`) or Ctrl-C; every
        call of the policy within the settings' ``decision_timeout_s``, its solves logging
        their stages at DEBUG, as a replay's decisions do (``-v`` shows the agent)."""
        with per_decision_logs(), WallClockLimit(self.settings.decision_timeout_s) as limit:
            self.driver.limit = limit
            while not self.cycle():
                self.sleep(self.settings.poll_s)

    def cycle(self) -> bool:
        """One reading, and a decision if one is due; whether to stop."""
        snapshot = self.live.read()
        unix = self.clock()
        if self.recovery.mend(snapshot, unix):  # a fault answered: what Slurm shows now
            snapshot = self.live.read()
            unix = self.clock()
        self._tell_ended(self.history.observe(snapshot, unix), unix)
        if self.reports is not None:
            self.reports.read(self.history, snapshot.cluster)
        managed = snapshot.jobs
        if not managed:
            return self._idle(unix)
        now = self.history.trace_time(unix)
        seen = self._fingerprint(snapshot)
        due = seen != self._last_seen or now >= self._next_round
        active = any(j.waiting for j in managed.values())
        if self._restart_moves(snapshot, unix):
            due = False  # decide on the next reading, which shows them released
        preempted = self._decide(snapshot, now, unix) if due and active else []
        # Decided: the GPUs of jobs completing or just preempted may pass on (their
        # epilogs end), and the jobs released onto them start.
        self.live.handed_over([*(job_id for job_id, job in managed.items()
                                 if job.handing_over), *preempted])
        self._last_seen = seen
        round_s = getattr(self.policy, "round_s", None)
        if round_s and now >= self._next_round:
            self._next_round = now + float(round_s)
        return self._done(snapshot, unix)

    def _tell_ended(self, ended: list[str], unix: float) -> None:
        """Tell the policy of the managed jobs that ended in this reading (``ended``: their
        ids), each at its end's trace time (``on_finished``, as a replay does at every
        completion; here for every end, completed or not: the job leaves the cluster).
        A policy that fails on it is logged; nothing that runs changes."""
        now = self.history.trace_time(unix)
        for job_id in ended:
            job = self.history.job(job_id)
            if job is None:
                continue
            runs = self.history.jobs[job_id].runs
            end = runs[-1].end if runs and runs[-1].end is not None else unix
            view = self.knowledge or self._guesses()
            done, cluster = job.work, self.history.cluster
            if self._hidden(job_id) and cluster is not None:  # its steps, as it
                # reported them, or as it ran them at the model's speed
                done = job.work - self._remaining(job, self.history.trace_time(end), cluster)
            told = self._shown(job, job.work - done)[0]
            if view is not None and self.history.jobs[job_id].ended == "COMPLETED":
                # (its work was done: learned)
                view.finished(dataclasses.replace(job, work=max(done, MIN_GUESS)))
            try:
                self.driver.finished(told, self.history.trace_time(end), now)
            except PolicyError as exc:
                log.error("%s; nothing changed", exc)

    def _idle(self, unix: float) -> bool:
        idle = self.settings.idle_exit_s
        if idle is None:
            return False
        self._idle_since = self._idle_since or unix
        if unix - self._idle_since >= idle:
            self.stopped_because = f"nothing to manage for {idle:g} s"
            return True
        return False

    def _done(self, snapshot: Snapshot, unix: float) -> bool:
        ended = self.history.ended_count()
        holding = any(job.holding for job in snapshot.jobs.values())
        if self.settings.stop_after is not None and ended >= self.settings.stop_after \
                and not holding:  # never while a managed job runs
            self.stopped_because = f"{ended} jobs ended"
            return True
        if any(not job.ended for job in snapshot.jobs.values()):
            self._idle_since = None
            return False
        return self._idle(unix)

    @staticmethod
    def _fingerprint(snapshot: Snapshot) -> tuple[object, ...]:
        return tuple(sorted((job_id, job.state, job.held, job.gpus)
                            for job_id, job in snapshot.jobs.items()))

    # -- deciding ------------------------------------------------------------------------
    def state(self, snapshot: Snapshot, now: float) -> ClusterState:
        """What the policy sees: the waiting jobs (pending, with their steps left as
        the history predicts them), the running ones, the free GPUs (a job COMPLETING
        neither runs nor waits: its GPUs are free, see :mod:`hetsched.slurm.state`).
        Learning, the policy sees what was learned so far
        (:meth:`~hetsched.slurm.learning.Reports.policy_model`)."""
        if self.reports is not None and self.reports.learned is not None:
            self.model = self.never.model = self.reports.policy_model(
                [seen.meta.job for seen in self.history.jobs.values()], snapshot.cluster)
        moving = self._placed_moves(snapshot)
        pending = sorted(self.never.runnable((j.meta.job for j in snapshot.jobs.values()
                                              if j.waiting and j.job_id not in moving),
                                             snapshot.cluster, self._checked_as),
                         key=lambda job: (job.arrival, job.id))
        # A job a decision moved runs where it was moved to, as in a replay, while Slurm
        # requeues it: its new GPUs are not free, and it is not waiting.
        running: list[RunningJob] = []
        for job_id, move in moving.items():
            shown, left = self._shown(snapshot.jobs[job_id].meta.job, self._remaining(
                snapshot.jobs[job_id].meta.job, now, snapshot.cluster))
            running.append(RunningJob(shown, move.gpu_type, move.gpus, now, left))
        free = snapshot.free.difference(g for move in moving.values() for g in move.gpus)
        for job in snapshot.jobs.values():
            if job.holding and job.gpus and not job.handing_over:
                gpu_type = snapshot.cluster.node_by_name[job.nodes[0]].gpu_type if job.nodes else ""
                shown, left = self._shown(job.meta.job, self._remaining(
                    job.meta.job, now, snapshot.cluster))
                running.append(RunningJob(shown, gpu_type, job.gpus,
                                          self.history.started(job.job_id, now), left))
        remaining = {job.id: self._remaining(job, now, snapshot.cluster) for job in pending}
        seen = [self._shown(job, remaining[job.id]) for job in pending]
        pending = [job for job, _ in seen]
        remaining = {job.id: left for job, left in seen}
        return ClusterState(now, snapshot.cluster, self.model, tuple(pending), remaining,
                            tuple(running), free,
                            attained=self.history.attained(now),
                            preemptions=self.history.preemptions())

    def _shown(self, job: Job, left: float) -> tuple[Job, float]:
        """``job`` with ``left`` steps left as the policy sees it: the truth, or with
        :attr:`knowledge` (or, for a job whose metadata leaves its work out, with
        :attr:`guesses`) the job with its guessed work and the work left by the guess
        (guessed when first seen)."""
        hidden = self._hidden(job.id)
        knowledge = self.knowledge or (self._guesses() if hidden else None)
        if knowledge is None:
            return job, left
        if job.id not in knowledge.guessed:
            knowledge.arrived(job, work_known=not hidden)
        return knowledge.seen(job, max(0.0, job.work - left))

    def _hidden(self, job_id: str) -> bool:
        """Whether the job's metadata leaves its work out (its record holds
        :data:`~hetsched.slurm.metadata.HIDDEN_WORK`, never shown)."""
        seen = self.history.jobs.get(job_id)
        return seen is not None and seen.meta.work_hidden

    def _checked_as(self, job: Job) -> Job:
        """``job`` as :class:`NeverRuns` checks it: whether it can run at all, not how
        long it would (a job that leaves its work out: one step)."""
        return dataclasses.replace(job, work=1.0) if self._hidden(job.id) else job

    def hidden_accuracy(self) -> dict[str, object]:
        """How good the guesses of the jobs whose metadata leaves their work out were,
        against the steps they did (:meth:`KnowledgeView.accuracy` over the finished
        ones; {} without such a job or with ``knowledge``, whose ``estimates`` count
        them)."""
        hidden = sum(1 for seen in self.history.jobs.values() if seen.meta.work_hidden)
        if not hidden or self.guesses is None:
            return {}
        return {**self.guesses.accuracy(), "jobs_without_work": hidden}

    def _guesses(self) -> KnowledgeView | None:
        """:attr:`guesses`, made at the first call once the cluster was read."""
        if self.guesses is None and self.knowledge is None and self.history.cluster is not None:
            self.guesses = KnowledgeView(self.history.cluster, self.model, HistoryEstimator())
        return self.guesses

    def _remaining(self, job: Job, now: float, cluster: Cluster) -> float:
        """Steps left of ``job``: from its report when it has one, else as the history
        predicts them (with ``truth``; learning, with what was learned)."""
        if self.reports is None:
            return self.history.remaining(job, now, self.truth, cluster)
        model = self.model if self.reports.learned is not None else self.truth
        return self.reports.remaining(job, now, self.history, model, cluster)

    def _decide(self, snapshot: Snapshot, now: float, unix: float) -> list[str]:
        """Ask the policy and apply its decision; the jobs preempted."""
        state = self.state(snapshot, now)
        began = time.perf_counter()
        try:
            decision = self.driver.decide(state)
        except PolicyError as exc:  # a policy's failure stops nothing that runs
            log.error("%s; nothing changed", exc)
            return []
        spent = time.perf_counter() - began
        started, preempted = self.apply(decision, snapshot, state, unix)
        self.history.decided(now, unix, pending=len(state.pending) - len(started),
                             running=len(state.running) - len(preempted) + len(started),
                             started=started, preempted=preempted, spent_s=spent,
                             fallback=decision.fallback, note=decision.note)
        return preempted

    def apply(self, decision: Decision, snapshot: Snapshot, state: ClusterState,
              unix: float) -> tuple[list[str], list[str]]:
        """Apply ``decision``: preemptions first, then the starts that are valid (a held
        job, GPUs free after the preemptions and not given twice, of a type the job may
        run on with positive throughput), each pinned with its GPUs on each node; the ids
        started and preempted. A gang uneven over its nodes (3 + 1) is asked of Slurm as
        that many GPUs over those nodes, once the other starts have their GPUs; Slurm
        splits it itself (:func:`gang_layout`). An invalid start is logged and skipped."""
        running = {r.job.id: r for r in state.running}
        free = set(snapshot.free)
        preempted: list[str] = []
        unmoved: set[str] = set()
        for job_id in dict.fromkeys(decision.preempt):
            run = running.get(job_id)
            if run is None:
                log.warning("preemption of %s skipped: it does not run", job_id)
                continue
            if self._moves.pop(job_id, None) is not None:  # not started again yet
                unmoved.add(job_id)
                free.update(run.gpus)
                continue
            try:
                self.live.preempt(job_id)
            except SlurmRefusedError as exc:
                log.warning("preemption of %s refused by Slurm: %s", job_id, exc)
                continue
            preempted.append(job_id)
            free.update(run.gpus)
            self.history.preempting(job_id, unix)
        waiting = {job.id: job for job in state.pending}
        started: list[str] = []
        uneven: list[Start] = []
        for start in decision.start:
            if start.job in preempted or start.job in unmoved:
                # A move: it starts there once Slurm has requeued it (_restart_moves).
                problem = self._invalid(start, {start.job: running[start.job].job}, free,
                                        snapshot.cluster)
                if problem:
                    log.warning("move of %s skipped: %s", start.job, problem)
                else:
                    self._moves[start.job] = start
                    self.history.moving(start.job, unix)
                    free.difference_update(start.gpus)
                    started.append(start.job)
                continue
            problem = self._invalid(start, waiting, free, snapshot.cluster)
            if problem:
                log.warning("start of %s skipped: %s", start.job, problem)
            elif is_uneven(start, snapshot.cluster):
                uneven.append(start)
            else:
                self._start(start, snapshot.cluster, free, waiting, started, unix)
        for start in uneven:  # Slurm splits these itself: once the others have their GPUs
            self._start(start, snapshot.cluster, free, waiting, started, unix)
        return started, preempted

    def _restart_moves(self, snapshot: Snapshot, unix: float) -> bool:
        """Start the moved jobs Slurm has requeued (held and pending again) where their
        decision moved them; forget moves of jobs that ended or left. Whether any
        started."""
        if not self._moves:
            return False
        free = set(snapshot.free)
        waiting = {job.job_id: job.meta.job for job in snapshot.jobs.values() if job.waiting}
        placed = self._placed_moves(snapshot)
        started: list[str] = []
        for job_id, move in list(self._moves.items()):
            job = snapshot.jobs.get(job_id)
            seen = self.history.jobs.get(job_id)
            asked = seen.asked_move if seen is not None else None
            stale = self.recovery.stale_move(job, snapshot, asked, unix)
            if job is None or job.ended or stale:
                del self._moves[job_id]
                if stale:
                    log.warning("move of %s dropped: %s", job_id, stale)
            elif job.waiting:
                del self._moves[job_id]
                move = placed.get(job_id, move)
                problem = self._invalid(move, waiting, free, snapshot.cluster)
                if problem:  # the policy decides again where it goes
                    log.warning("move of %s dropped: %s", job_id, problem)
                else:
                    self._start(move, snapshot.cluster, free, waiting, started, unix)
        return bool(started)

    def _placed_moves(self, snapshot: Snapshot) -> dict[str, Start]:
        """The moves of jobs still in Slurm, each on free GPUs of its nodes, as many on
        each as its decision chose: Slurm picks a node's GPU indices itself (the lowest
        free), so the ids a decision chose may since be another job's while the count
        left free on the node is the same. A move whose nodes lack the GPUs keeps its
        ids (its start will be refused and the policy decides again)."""
        gpus = snapshot.cluster.gpu_by_id
        free = sorted(snapshot.free, key=lambda g: (gpus[g].node, gpus[g].index))
        left = set(free)
        placed: dict[str, Start] = {}
        for job_id, move in self._moves.items():
            if job_id not in snapshot.jobs:
                continue
            per_node = Counter(gpus[g].node for g in move.gpus if g in gpus)
            chosen = [g for node, count in per_node.items()
                      for g in [g for g in free if g in left and gpus[g].node == node][:count]]
            if len(chosen) == len(move.gpus):
                left.difference_update(chosen)
                placed[job_id] = Start(move.job, move.gpu_type, tuple(chosen))
            else:
                placed[job_id] = move
        return placed

    def _start(self, start: Start, cluster: Cluster, free: set[str],
               waiting: dict[str, Job], started: list[str], unix: float) -> None:
        """Pin and release one valid start (:func:`gang_layout`); the GPUs Slurm will
        take leave ``free``."""
        layout = gang_layout(start, free, cluster)
        if layout is None:
            log.warning("start of %s skipped: Slurm's split of %d GPUs does not fit the "
                        "free GPUs of its nodes", start.job, len(start.gpus))
            return
        nodes, counts, taken = layout
        try:
            self.live.start(start.job, nodes, counts)
        except SlurmRefusedError as exc:
            log.warning("start of %s refused by Slurm: %s", start.job, exc)
            return
        free.difference_update(taken)
        del waiting[start.job]
        started.append(start.job)
        self.history.starting(start.job, unix)

    def _invalid(self, start: Start, waiting: Mapping[str, Job], free: set[str],
                 cluster: Cluster) -> str:
        """Why ``start`` may not be applied ("" if it may): the simulator's checks
        (:func:`~hetsched.simulate.driver.start_problem`) on a held job, ``free`` the GPUs
        free now."""
        job = waiting.get(start.job)
        if job is None:
            return "not a held job"
        return start_problem(start, job, cluster, self.model,
                             lambda gpus, _holder: free.issuperset(gpus))

