"""The diagnosis: a run's findings, ranked by the share of its time (or memory) at stake, each with
its evidence and the next thing to try (:mod:`.findings`), one module per kind of finding (time,
input, GC, the machine, memory, creep), and the findings in words (:mod:`.findings_markdown`)."""
