"""A run's plain data, in a room of its own: the run file format (``gnnmon.jsonl``), writing and
reading it, the plain result (:class:`~gnnmon.data.result.RunResult`) and its columnar table, the
energy counters' points, and where a job's files are. The live run (``gnnmon.record``) writes
through it; the report (``gnnmon.report``) reads through it. It imports no torch and no PyG:
reading a run needs neither.

May import: the root modules only (``gnnmon.errors``, ``gnnmon.fields``, ``gnnmon.figures``)."""
