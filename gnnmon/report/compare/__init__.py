"""Runs against runs: each side's runs' figures per label and phase (:mod:`.lines`), the tests over
runs that bound each change and decide the gate (:mod:`.gate`); what ``Report.compare`` returns
(:mod:`.comparison`) and says (:mod:`.comparison_markdown`); the ranks of one distributed job
against one another (:mod:`.cross_rank`)."""
