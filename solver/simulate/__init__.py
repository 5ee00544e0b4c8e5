"""The one event loop: the simulator, its run segments, the record of a replay, and rolling
policies run as static planners."""
