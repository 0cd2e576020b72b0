"""Which rank of a distributed job this process is, from whichever launcher started it, and its
clock's offset to rank 0 (where its file goes: :mod:`gnnmon.data.paths`).

Read from an initialised default process group when there is one (rank, world size, backend),
else from what the launcher left (:data:`LAUNCHERS`): torchrun / ``torch.distributed.launch`` and
Ray Train (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), Slurm's ``srun`` (``SLURM_PROCID``,
``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NODEID``), Open MPI (``OMPI_COMM_WORLD_*``) and
MPICH / Intel MPI (``PMI_RANK``, ``PMI_SIZE``); else ``torch.multiprocessing.spawn`` (``mp.spawn``,
PyG's multi-GPU examples), which sets no variable but hands each process its rank as an argument
(read from the spawned function's caller). A process that is none of these is not a rank:
``None``. The job's own id, where the launcher gives one (Slurm's job and step, torchrun's elastic
run id), is kept with the rank (``job_id``).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from gnnmon.devices.registry import collective_device


@dataclass(frozen=True)
class RankInfo:
    """This process's place in a distributed job."""

    rank: int
    world_size: int | None  # None where the launcher does not say (mp.spawn)
    local_rank: int | None
    backend: str | None  # the process group's backend; None before it is initialised
    source: str  # "process group", "environment" (a launcher's variables) or "spawn argument" (mp.spawn)
    host: str
    launcher: str | None = None  # "torchrun", "slurm", "open mpi", "pmi" or "mp.spawn", where one said
    job_id: str | None = None  # the launcher's id of the job (Slurm: job.step; torchrun: its run id)
    node: int | None = None  # the node's index where the launcher gives it (Slurm)

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


LAUNCHERS: tuple[tuple[str, str, str, str], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("open mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
)
"""(launcher, rank variable, world size variable, local rank variable), in the order they are
asked: torchrun's first (Ray Train and Lightning set its variables too, also under Slurm)."""


def current_rank() -> RankInfo | None:
    """This process's rank, or None outside a distributed job (or in a job of one)."""
    dist = sys.modules.get("torch.distributed")  # loaded with torch; never imported here
    if dist is not None and dist.is_available() and dist.is_initialized():
        world = int(dist.get_world_size())
        if world <= 1:
            return None
        launched = _launched()
        return RankInfo(int(dist.get_rank()), world,
                        _env_int("LOCAL_RANK") if launched is None else launched.local_rank,
                        str(dist.get_backend()), "process group", socket.gethostname(),
                        *((launched.launcher, launched.job_id, launched.node) if launched else (None, None, None)))
    return _launched()


def _launched() -> RankInfo | None:
    """The rank a launcher gave this process (see :data:`LAUNCHERS`, then ``mp.spawn``)."""
    for source, rank_var, world_var, local_var in LAUNCHERS:
        rank, world = _env_int(rank_var), _env_int(world_var)
        if source == "slurm":
            world = _env_int("SLURM_STEP_NUM_TASKS") or world  # srun's step, not the whole allocation
        if rank is None or world is None:
            continue
        if world <= 1:
            return None
        return RankInfo(rank, world, _env_int(local_var), None, "environment", socket.gethostname(), source,
                        _job_id(source), _env_int("SLURM_NODEID") if source == "slurm" else None)
    rank = _spawned_rank()
    if rank is None:
        return None
    return RankInfo(rank, None, None, None, "spawn argument", socket.gethostname(), "mp.spawn")


def _job_id(source: str) -> str | None:
    if source == "slurm" and os.environ.get("SLURM_JOB_ID"):
        step = os.environ.get("SLURM_STEP_ID")
        return os.environ["SLURM_JOB_ID"] + (f".{step}" if step else "")
    return os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID") or None


def _spawned_rank() -> int | None:
    """The rank ``torch.multiprocessing.spawn`` gave this process: its ``_wrap(fn, i, args, ...)``
    calls the user's function with ``i`` first; found on the call stack (the main thread's)."""
    if "torch.multiprocessing.spawn" not in sys.modules:
        return None
    main = threading.main_thread().ident
    frame = sys._current_frames().get(main) if main is not None else None
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_wrap" and code.co_filename.endswith(os.path.join("multiprocessing", "spawn.py")):
            rank = frame.f_locals.get("i")
            return rank if isinstance(rank, int) and not isinstance(rank, bool) else None
        frame = frame.f_back
    return None


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
