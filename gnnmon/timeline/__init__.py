"""Off the step's path: the utilisation sampler, energy and carbon figures, and the join of
sampled signals to rows by time.

May import: ``gnnmon.devices`` (NVML, RAPL, host counters) and the root modules."""
