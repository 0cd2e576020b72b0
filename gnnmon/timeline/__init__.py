"""Off the step's path: the sampler (a process of its own: ``sampler`` starts it, ``agent`` is its
loop, ``counters`` follows the energy counters' steps), energy and carbon figures, and the join of
samples and counter points to rows by time.

``agent``, ``counters`` and the device readers they use (``gnnmon.devices.nvml``, ``.rapl``,
``.children``) run in the sampler process, which imports no torch: they must not import it.

May import: ``gnnmon.data`` (the counters' points), ``gnnmon.devices`` (NVML, RAPL, host counters)
and the root modules."""
