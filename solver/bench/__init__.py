"""Policies x seeds x loads on an engine (local processes or Ray): sweep specs, results.csv, LP
bounds, the report and replays side by side."""
