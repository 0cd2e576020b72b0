"""A run's rows as CSV: one line per row in the order the rows finished, one column per field (in
the order fields first appear), lists and dicts (``notes``, ``gc_gen``) as JSON, None as an empty
cell. Written with the standard library, a row at a time."""

from __future__ import annotations

import csv
import json
import os
from typing import Any, TextIO

from gnnmon.data.result import RunResult
from gnnmon.report.exports import Written, register_export


def _cell(value: Any) -> Any:
    """A CSV cell: lists and dicts as JSON, not a Python repr; None as an empty cell."""
    if value is None:
        return ""
    return json.dumps(value) if isinstance(value, (list, tuple, dict)) else value


def write_csv(result: RunResult, stream: TextIO) -> int:
    """Write ``result``'s rows to ``stream``; returns how many."""
    columns: dict[str, None] = {}
    for row in result.table.rows():
        columns.update(dict.fromkeys(row))
    writer = csv.writer(stream)
    writer.writerow(columns)
    n = 0
    for row in result.table.rows():
        writer.writerow([_cell(row.get(c)) for c in columns])
        n += 1
    return n


class CsvExport:
    """The ``csv`` export: the rows as a CSV file."""

    name = "csv"
    what = "the rows as a CSV file, one line per row, lists and dicts as JSON"

    def write(self, result: RunResult, out: str | os.PathLike[str]) -> str:
        """Write ``result``'s rows to the file ``out``; says what was written."""
        with open(out, "w", encoding="utf-8", errors="backslashreplace", newline="") as f:
            return self.write_stream(result, f)

    def write_stream(self, result: RunResult, stream: TextIO) -> str:
        """Write ``result``'s rows to ``stream`` (``gnnmon export csv RUN -o -``); says how many."""
        return Written(write_csv(result, stream), "rows")


register_export(CsvExport())
