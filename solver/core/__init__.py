"""The records every layer shares: errors, number ranges, the frozen records of a cluster, its jobs
and an instance, throughput tables, results and schedules, the independent checker, lower
bounds, JSON files, output files, interrupts, logging levels and progress bars."""
