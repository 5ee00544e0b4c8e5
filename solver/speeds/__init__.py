"""Throughput: measured profiles and the fitted speed model (settings, fit, its file, leave-one-out
accuracy)."""
