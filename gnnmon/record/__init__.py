"""The record: a row per measured call, the live run that collects rows, GC events, markers and
samples and hands them to its sinks (the JSON Lines file is one) from its writer thread, the run's
options, the shared state of what is open, and the manifest. What it writes and the plain result
it gives (``RunResult``) are the run's data (:mod:`gnnmon.data`).

May import: ``gnnmon.timeline``, ``gnnmon.report`` (``Run.report()``), ``gnnmon.data``,
``gnnmon.devices``, the root modules; never ``gnnmon.measure``."""
