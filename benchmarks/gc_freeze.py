"""What a full collection costs once torch and PyG are imported, and after ``gc.freeze()``.

    .venv/bin/python benchmarks/gc_freeze.py

The README's Quick start freezes after set-up on the strength of these figures."""

from __future__ import annotations

import gc
import time

import torch  # noqa: F401 - imported for the objects it leaves alive
import torch_geometric  # noqa: F401
from torch_geometric.datasets import FakeDataset  # noqa: F401
from torch_geometric.nn import GCNConv  # noqa: F401


def full_collection_ms() -> float:
    t0 = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    before = [full_collection_ms() for _ in range(3)]
    tracked = len(gc.get_objects())
    gc.freeze()
    after = [full_collection_ms() for _ in range(3)]
    print(f"objects tracked after import: {tracked:,}; frozen: {gc.get_freeze_count():,}")
    print("full collection, ms: " + " / ".join(f"{v:.1f}" for v in before)
          + "; after gc.freeze(): " + " / ".join(f"{v:.2f}" for v in after))


if __name__ == "__main__":
    main()
