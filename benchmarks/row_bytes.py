"""Bytes a row takes in the run file, plain and compressed, and what each costs: for the full stack
with three phases and ``sample=0.5`` (a step of about 1 ms on the CPU).

Run: ``.venv/bin/python benchmarks/row_bytes.py`` (tens of seconds; ``--rows N``, default 2,000).
One run is recorded plain; its lines are then compressed as the writer would (in batches of
``--batch`` lines, each flushed to a byte boundary, so a kill loses at most the batch being
written) with gzip at levels 1 and 6 (the standard library's zlib) and zstd at level 3 (the
``zstandard`` package, where installed). Bytes a row are counted (the same on any machine); the
writer's µs a row (compressing, on the writer thread) and the read (``gnnmon.load`` of the file
written) are timed, the best of ``--repeat`` runs. Bytes a row count the whole file (the manifest
and end line shared out); the plain row lines alone, and the manifest's share that says once what
holds for every row (``host_memory``, ``sampled``: format version 3), are printed too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import gnnmon
from gnnmon.data.gz import Compressor


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
@gnnmon.gc_controlled
def step() -> None:
    with gnnmon.phase("forward"):
        time.sleep(0.001)
    with gnnmon.phase("backward"):
        pass
    with gnnmon.phase("optimizer"):
        pass


def gzip_batches(level: int) -> Callable[[list[bytes]], bytes]:
    def run(batches: list[bytes]) -> bytes:
        c = Compressor(level)
        return b"".join(c.batch(b) for b in batches) + c.finish()
    return run


def zstd_batches(batches: list[bytes]) -> bytes:
    import zstandard

    z = zstandard.ZstdCompressor(level=3).compressobj()
    return b"".join(z.compress(b) + z.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for b in batches) + z.flush()


def best(fn: Callable[[], object], repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000, help="rows to record (default 2,000)")
    parser.add_argument("--batch", type=int, default=64, help="lines a batch (default 64)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs, the best kept (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "run.jsonl"
        with gnnmon.collect(plain, sample=0.5):
            for _ in range(args.rows):
                step()
        data = plain.read_bytes()
        lines = data.splitlines(keepends=True)
        batches = [b"".join(lines[k:k + args.batch]) for k in range(0, len(lines), args.batch)]
        codecs: list[tuple[str, Callable[[list[bytes]], bytes] | None, str]] = [
            ("plain", None, "run.jsonl"), ("gzip 1 (gnnmon's)", gzip_batches(1), "run1.jsonl.gz"),
            ("gzip 6", gzip_batches(6), "run6.jsonl.gz")]
        try:
            import zstandard  # noqa: F401

            codecs.append(("zstd 3", zstd_batches, ""))
        except ImportError:
            pass
        print(f"Python {platform.python_version()}, gnnmon {gnnmon.__version__}, {args.rows:,} rows of the full "
              f"stack with three phases and sample=0.5 on the CPU, {len(lines):,} lines, batches of {args.batch}")
        rows = [line for line in lines if line.startswith(b'{"type":"row"')]
        manifest = json.loads(lines[0])
        once = {k: len(json.dumps(manifest[k], separators=(",", ":")))
                for k in ("host_memory", "sampled") if k in manifest}
        print(f"row lines alone: {sum(map(len, rows)) / len(rows):,.0f} bytes a row; said once in the manifest "
              f"({len(lines[0]):,} bytes): " + ", ".join(f"{k} {v:,} bytes" for k, v in once.items()))
        print("| file | bytes a row | writer µs a row | a kill loses | gnnmon.load µs a row |")
        print("| --- | ---: | ---: | --- | ---: |")
        for name, codec, file in codecs:
            out = data if codec is None else codec(batches)
            spent = 0.0 if codec is None else best(lambda c=codec: c(batches), args.repeat)  # type: ignore[misc]
            read = ""
            if file:
                path = Path(tmp) / file
                path.write_bytes(out)
                if codec is not None:
                    assert gzip.decompress(out) == data or zlib.decompressobj(31).decompress(out) == data
                read = f"{1e6 * best(lambda p=path: gnnmon.load(p), args.repeat) / args.rows:,.1f}"
            loses = "its last line, cut" if codec is None else f"the batch being written (≤ {args.batch} lines)"
            print(f"| {name} | {len(out) / args.rows:,.0f} | {1e6 * spent / args.rows:,.1f} | {loses} | "
                  f"{read or 'n/a'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
