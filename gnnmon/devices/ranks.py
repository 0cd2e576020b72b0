"""Which rank of a distributed job this process is (``torch.distributed`` or torchrun's
environment), and its clock's offset to rank 0 (where its file goes: :mod:`gnnmon.data.paths`).

Read from an initialised default process group when there is one (rank, world size, backend),
else from the variables ``torchrun`` / ``torch.distributed.launch`` set (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``); ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` from the environment in both cases (the
process group does not know them). A process that is neither is not a rank: ``None``.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from gnnmon.devices.registry import collective_device


@dataclass(frozen=True)
class RankInfo:
    """This process's place in a distributed job."""

    rank: int
    world_size: int
    local_rank: int | None
    backend: str | None  # the process group's backend; None before it is initialised
    source: str  # "process group" or "environment"
    host: str

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def current_rank() -> RankInfo | None:
    """This process's rank, or None outside a distributed job (or in a job of one)."""
    local = _env_int("LOCAL_RANK")
    dist = sys.modules.get("torch.distributed")  # loaded with torch; never imported here
    if dist is not None and dist.is_available() and dist.is_initialized():
        world = int(dist.get_world_size())
        if world <= 1:
            return None
        return RankInfo(int(dist.get_rank()), world, local, str(dist.get_backend()), "process group",
                        socket.gethostname())
    env_rank, env_world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if env_rank is None or env_world is None or env_world <= 1:
        return None
    return RankInfo(env_rank, env_world, local, None, "environment", socket.gethostname())


def clock_offset(rounds: int = 9) -> dict[str, Any]:
    """This rank's wall clock (``time.time_ns``) minus rank 0's, measured through the default
    process group: ``rounds`` all-gathers, each rank reading its clock as soon as one completes
    and sending that reading in the next; the offset is the median of the ``rounds - 1``
    differences to rank 0, and ``clock_offset_spread_ns`` their range — the collective's release
    skew bounds the error (tens of µs between processes of one host). A collective: every rank
    must call it. Tensors live where the process group's backend wants them: the device kind that
    runs its collectives says which (:func:`~gnnmon.devices.registry.collective_device`; the
    current CUDA device for NCCL), else the host."""
    dist = sys.modules["torch.distributed"]
    device = collective_device(str(dist.get_backend()))
    world, rank = int(dist.get_world_size()), int(dist.get_rank())
    mine = torch.zeros(1, dtype=torch.int64, device=device)
    gathered = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    differences = []
    for k in range(rounds):
        dist.all_gather(gathered, mine)
        values = [int(t.item()) for t in gathered]  # .item() waits for the collective (NCCL: async)
        now = time.time_ns()
        if k:
            differences.append(values[rank] - values[0])
        mine.fill_(now)
    differences.sort()
    return {"clock_offset_ns": differences[len(differences) // 2],
            "clock_offset_spread_ns": differences[-1] - differences[0], "clock_offset_rounds": len(differences)}
