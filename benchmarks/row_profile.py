"""Where a row's host time goes: the tiny step (``x + 1``) under each decorator alone and the full
stack, timed interleaved (median µs a call above bare), then each profiled with cProfile (the
functions that take the most time of their own).

    python benchmarks/row_profile.py --device cuda        # on a GPU
    python benchmarks/row_profile.py --fake               # the tests' fake CUDA (H200 prices)

A host-bound step pays every microsecond of this; a GPU-bound one hides it behind the GPU's work
(``benchmarks/run.py --device cuda`` has both). cProfile adds its own cost to every Python call:
read its table for where the time goes, the timed table for how much.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import gnnmon  # noqa: E402
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device  # noqa: E402


def variants(dev: torch.device) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    def add_one(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    return {
        "bare": add_one,
        "@cuda_timed": cuda_timed(device=dev)(add_one),
        "@monitor_memory_device": monitor_memory_device(device=dev)(add_one),
        "@gc_controlled": gc_controlled(add_one),
        "full stack": monitor_memory_device(device=dev)(cuda_timed(device=dev)(gc_controlled(add_one))),
    }


def per_call_us(f: Callable[[torch.Tensor], Any], x: torch.Tensor, calls: int, sync: Callable[[], None]) -> float:
    sync()
    t = time.perf_counter()
    for _ in range(calls):
        f(x)
    sync()
    return (time.perf_counter() - t) / calls * 1e6


def measure(dev: torch.device, calls: int, rounds: int, top: int) -> str:
    x = torch.ones(1024, device=dev if dev.type == "cuda" and torch.cuda.is_available() and not FAKE else "cpu")

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    found = variants(dev)
    times: dict[str, list[float]] = {name: [] for name in found}
    out = []
    with gnnmon.collect(max_records=200):
        for f in found.values():  # warm: the event pool filled, first-use imports done
            per_call_us(f, x, calls // 4, sync)
        for _ in range(rounds):
            bare = per_call_us(found["bare"], x, calls, sync)
            for name, f in found.items():
                times[name].append((per_call_us(f, x, calls, sync) if name != "bare" else bare) - bare)
        out += ["| variant | µs a call above bare (median of rounds) |", "| --- | ---: |"]
        out += [f"| {name} | {statistics.median(v):.1f} |" for name, v in times.items()]
        for name, f in found.items():
            if name == "bare":
                continue
            prof = cProfile.Profile()
            prof.enable()
            per_call_us(f, x, calls, sync)
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
            lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
            out += ["", f"### {name}: {calls} calls under cProfile, by time of their own", "", "```"]
            out += [ln.replace(str(ROOT) + "/", "") for ln in lines[lines.index(next(
                ln for ln in lines if "ncalls" in ln)):]] + ["```"]
    return "\n".join(out) + "\n"


FAKE = False


def main(argv: list[str] | None = None) -> int:
    global FAKE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda[:N] (with --fake: the fake's)")
    parser.add_argument("--fake", action="store_true", help="the tests' fake CUDA, charging H200 prices")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=20, help="functions listed per profile")
    parser.add_argument("--out", help="write the markdown here too")
    args = parser.parse_args(argv)
    dev = torch.device(args.device)
    patch = None
    if args.fake:
        import pytest

        from gnnmon.devices import clear_backends
        from tests.fakes import FakeCuda

        FAKE = True
        patch = pytest.MonkeyPatch()
        FakeCuda(n=1).install(patch)
        clear_backends()
    elif dev.type == "cuda" and not torch.cuda.is_available():
        print("row_profile: no CUDA device here; --fake profiles against the tests' fake", file=sys.stderr)
        return 2
    try:
        name = "fake CUDA (tests/fakes.py, H200 prices)" if args.fake else (
            torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu")
        head = (f"Row profile on {name}, torch {torch.__version__}, "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}:"
                f" `python benchmarks/row_profile.py --device {args.device}{' --fake' if args.fake else ''}`\n\n")
        text = head + measure(dev, args.calls, args.rounds, args.top)
    finally:
        if patch is not None:
            patch.undo()
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
