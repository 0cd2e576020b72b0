"""The exports: each module writes a run for another tool or reader and registers itself in
:mod:`gnnmon.report.exports` as it is imported (``trace``, ``tensorboard``, ``html``, ``csv``);
the timeline figure (:mod:`.timeline_plot`). The page's script and style lie beside ``html``."""
