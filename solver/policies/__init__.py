"""Planners (an instance in, a Result out) and rolling policies (a cluster state in, a decision
out): the interfaces, each planner and policy, the deadline planner, the heuristic baselines and
replanning."""
