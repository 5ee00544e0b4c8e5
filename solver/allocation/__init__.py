"""Choosing GPUs: the cluster's GPU layout and speed look-ups, the free-GPU index (node classes,
node use) and realising node-level plans on concrete GPUs."""
