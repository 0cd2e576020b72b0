"""The record: a row per measured call, the run that collects rows, GC events, markers and samples,
the shared state of what is open, the manifest, and the JSON Lines storage and loader.

May import: ``gnnmon.timeline``, ``gnnmon.report`` (``Run.report()``), ``gnnmon.devices``, the root
modules; never ``gnnmon.measure``."""
