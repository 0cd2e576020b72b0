"""The ordinal the epoch-start words name the workers' longest-waiting turn by (``every 2nd batch``):
English ordinals, written out here for 1-24 and across the hundreds, the teens' ``th`` included."""

from __future__ import annotations

from gnnmon.report.diagnosis.input_finding import _ordinal

SAID = {1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 5: "5th", 9: "9th", 10: "10th", 11: "11th", 12: "12th", 13: "13th",
        14: "14th", 20: "20th", 21: "21st", 22: "22nd", 23: "23rd", 24: "24th", 100: "100th", 101: "101st",
        102: "102nd", 103: "103rd", 111: "111th", 112: "112th", 113: "113th", 121: "121st", 1011: "1011th"}
"""Numbers and their ordinals, planted."""


def test_ordinals_are_englishs() -> None:
    assert {n: _ordinal(n) for n in SAID} == SAID
