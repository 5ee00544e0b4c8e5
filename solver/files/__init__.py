"""What hetsched reads: instance files and their schema, cluster specs, traces, the nvidia-smi
interconnect parser and cluster graphs, the synthetic generator, a replay's inputs and
`validate`."""
