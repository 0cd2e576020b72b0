"""Where a run's files are: a distributed job writes one file per rank, named from the path every
rank was given (``runs/job.jsonl`` -> ``runs/job.rank0.jsonl``, ``runs/job.rank1.jsonl``, ...;
``{rank}`` in the path says where the number goes)."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

RANK_FIELD = "{rank}"


def _template(path: str | os.PathLike[str]) -> str:
    """``path`` with ``{rank}`` where each rank's number goes: as given if it has one, else
    ``.rank{rank}`` before the suffix."""
    text = os.fspath(path)
    if RANK_FIELD in text:
        return text
    p = Path(text)
    suffix = "".join(p.suffixes[-2:]) if p.suffix == ".gz" else p.suffix  # job.jsonl.gz -> job.rank0.jsonl.gz
    return os.fspath(p.with_name(f"{p.name[: len(p.name) - len(suffix)]}.rank{RANK_FIELD}{suffix}"))


def rank_path(path: str | os.PathLike[str], rank: int | None) -> Path:
    """Where rank ``rank`` writes: ``{rank}`` in ``path`` is replaced by the rank; otherwise
    ``.rank<N>`` goes before the suffix (``runs/job.jsonl`` -> ``runs/job.rank1.jsonl``), on every
    rank, rank 0 included. Outside a job (``rank`` None) the path is left as it is (``{rank}``
    becomes 0)."""
    text = os.fspath(path)
    if rank is None and RANK_FIELD not in text:
        return Path(text)
    return Path(_template(text).replace(RANK_FIELD, str(rank if rank is not None else 0)))


def job_files(path: str | os.PathLike[str]) -> list[Path]:
    """The per-rank files of the job written to ``path`` (the path given to ``collect``, with or
    without ``{rank}``), in rank order; [] when there are none."""
    p = Path(_template(path))
    pattern = re.compile(re.escape(p.name).replace(re.escape(RANK_FIELD), r"(\d+)") + "$")
    found = [(int(m.group(1)), f) for f in p.parent.glob("*".join(map(glob.escape, p.name.split(RANK_FIELD))))
             if (m := pattern.match(f.name))]
    return [f for _, f in sorted(found)]
