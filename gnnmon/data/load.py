"""Reading a run back: :func:`load` (the whole run) and :func:`iter_rows` (rows one at a time).

Reads every file gnnmon has written (format ``gnnmon.jsonl`` versions 1 to 3, plain or gzip, whatever the layout of the
package that wrote it); a cut-off last line is skipped with a warning.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gnnmon.data.format import ROW
from gnnmon.data.paths import RANK_FIELD, job_files
from gnnmon.data.read import read_lines
from gnnmon.data.result import RunResult
from gnnmon.errors import ReportFileError


def load(path: str | os.PathLike[str], *, strict: bool = True, job: bool = True,
         progress: Callable[[int], Any] | None = None) -> RunResult:
    """Read a run back from its JSON Lines file as a :class:`~gnnmon.data.result.RunResult` (a
    cut-off last line is skipped with a warning).

    A distributed job (one file per rank, see :func:`gnnmon.collect`) loads as one result whose rows,
    GC events and samples carry ``rank``: give the path its ranks were given (``runs/job.jsonl``
    or ``runs/job.{rank}.jsonl``), any rank's file (``runs/job.rank0.jsonl``), a glob
    (``runs/job.rank*.jsonl``) or a folder holding one job's files. Its manifest is rank 0's, with
    ``ranks``: each rank's ``distributed`` entry, file and whether it ended cleanly. ``job=False``
    reads a rank's file alone. ``progress(n)`` is called with the bytes read, every few MB (the
    CLI's progress bar). The rows go straight into a columnar table: a file of millions of rows
    loads in bounded memory (``result.records`` makes the dicts, when asked for)."""
    text = os.fspath(path)
    p = Path(text)
    if p.is_dir():
        files = sorted([*p.glob("*.jsonl"), *p.glob("*.jsonl.gz")])
        if not files:
            raise ReportFileError(f"{p} is a folder with no .jsonl or .jsonl.gz file in it: give a run's file")
        runs = [_load_one(f, strict, progress) for f in files]
        alone = [str(r.path) for r in runs if not (r.manifest or {}).get("distributed")]
        if alone or len({(r.manifest or {})["distributed"]["rank"] for r in runs}) != len(runs):
            raise ReportFileError(f"{p} is a folder, not one distributed job's files "
                                  f"({', '.join(alone[:3]) or 'two files of one rank'}): give a run's file")
        return RunResult.merge(runs)
    if p.exists():  # a file's own name wins, even one with glob characters in it
        run = _load_one(p, strict, progress)
        dist = (run.manifest or {}).get("distributed") or {}
        if job and dist.get("job_path"):
            files = job_files(p.parent / dist["job_path"])
            if len(files) > 1 and p.resolve() in {f.resolve() for f in files}:
                return RunResult.merge([run if f.resolve() == p.resolve() else _load_one(f, strict, progress)
                                        for f in files])
        return run
    files = [Path(f) for f in sorted(glob.glob(text))] if glob.has_magic(text.replace(RANK_FIELD, "")) else []
    files = files or job_files(text)
    if files:
        return RunResult.merge([_load_one(f, strict, progress) for f in files])
    return _load_one(path, strict, progress)


def _load_one(path: str | os.PathLike[str], strict: bool,
              progress: Callable[[int], Any] | None = None) -> RunResult:
    return RunResult.read(path, strict=strict, progress=progress)


def iter_rows(path: str | os.PathLike[str], *, strict: bool = True) -> Iterator[dict[str, Any]]:
    """The rows of a run file, one at a time, without keeping them (for files too big for
    :func:`load`). Same tolerance as :func:`load`: a cut-off last line is skipped with a warning."""
    for obj in read_lines(path, strict=strict):
        if obj.get("type") == ROW:
            obj.pop("type")
            yield obj
