"""Bytes a row takes in the run file, for the full stack with three phases and sampling: as
written (what repeats said once, :mod:`gnnmon.data.same`) and as it would be written whole.

Run: ``.venv/bin/python benchmarks/row_bytes.py`` (seconds; ``--rows N``, default 2,000). A step of
about 1 ms (a sleep in its forward phase), ``collect(path, sample=0.5)``, on the CPU; the figure
counts every line after the manifest (rows, their ``same`` lines, samples, the end line) over the
rows. Counted, not timed: a file's size, the same on a busy machine and an idle one.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import gnnmon
from gnnmon.data.format import ROW, encode, typed_line


@gnnmon.monitor_memory_device(device="cpu")
@gnnmon.cuda_timed(device="cpu")
@gnnmon.gc_controlled
def step() -> None:
    with gnnmon.phase("forward"):
        time.sleep(0.001)
    with gnnmon.phase("backward"):
        pass
    with gnnmon.phase("optimizer"):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000, help="rows to record (default 2,000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        with gnnmon.collect(path, sample=0.5) as run:
            for _ in range(args.rows):
                step()
        lines = path.read_bytes().splitlines(keepends=True)[1:]
        written = sum(map(len, lines)) / args.rows
        rows = [line for line in lines if line.startswith(b'{"type":"row"')]
        whole = sum(len(typed_line(ROW, encode(r))) + 1 for r in run.records) / args.rows
        sets = sum(line.startswith(b'{"type":"same"') for line in lines)
    print(f"Python {platform.python_version()}, gnnmon {gnnmon.__version__}, {len(rows):,} rows of the full stack "
          f"with three phases and sample=0.5 on the CPU")
    print(f"  bytes a row in the file: {written:,.0f} (rows, their {sets} same lines, samples and the end line)")
    print(f"  bytes a row written whole: {whole:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
