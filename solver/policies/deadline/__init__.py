"""The deadline planner (Hydra): the planner, its search (greedy start plans, serial schedules,
local search) and CP-SAT windows over a plan."""
