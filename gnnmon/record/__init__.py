"""The record: a row per measured call, the live run that collects rows, GC events, markers and
samples and hands them to its sinks (the JSON Lines file is one) from its writer thread, the plain
result that reports read (``RunResult``: from a run, a file or a job's ranks), the run's options,
the shared state of what is open, the manifest, and the JSON Lines storage and loader.

May import: ``gnnmon.timeline``, ``gnnmon.report`` (``Run.report()``), ``gnnmon.devices``, the root
modules; never ``gnnmon.measure``."""
