"""The device kinds gnnmon measures, by torch device type, in one table.

Each :class:`BackendKind` says what the kind is, whether this process uses it, how to make its
backend, which device its collectives use and how its out-of-memory errors read; device parsing
and its errors, inference, the manifest, the backend cache, out-of-memory rows, clock offsets, the
timeline's join and the plots read this table, and forecasts ask the backend for its capacity,
instead of testing device names. A new kind (say Intel XPU) is one module with a backend class
(see :class:`~gnnmon.devices.base.Backend`) and one :func:`register_backend` call. Built in, in the
order inference tries them: ``cuda``, ``mps``,
``cpu`` (the host: always there, chosen when no accelerator is in use).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gnnmon.devices.base import Backend
from gnnmon.devices.cpu import CpuBackend
from gnnmon.devices.cuda import CudaBackend, check_cuda_index
from gnnmon.devices.fork import cuda_lost
from gnnmon.devices.mps import MpsBackend
from gnnmon.fields import HOST_BACKEND


def _none() -> None:
    return None


def _never() -> bool:
    return False


def _nothing() -> dict[str, Any]:
    return {}


def _no_gauge(label: str) -> None:
    return None


def _no_collective(process_group_backend: str) -> None:
    return None


@dataclass(frozen=True)
class BackendKind:
    """One kind of device. Every callable reads torch at call time (a test's fake is seen) and
    none starts the device (no context created, no sync)."""

    type: str
    """The torch device type: ``torch.device(type)``, a row's ``backend`` field."""
    make: Callable[[torch.device], Backend]
    """The backend of one device, given with its index resolved (:attr:`resolve_index`)."""
    in_use: Callable[[], torch.device | None] = _none
    """The device a call with no device among its arguments runs on, when the process already
    uses this kind (CUDA initialised, MPS memory held); None otherwise. Never for the host."""
    accelerator: bool = True
    """Memory apart from the host's: wins over the CPU among a call's arguments, and is inferred
    when in use. False for the host itself."""
    resolve_index: Callable[[torch.device], int | None] | None = None
    """The index a device names, checked (``cuda`` alone: the current device, which can change,
    so it is resolved per call); None: the kind has one device and no index."""
    gauge_index: Callable[[str], int | None] = _no_gauge
    """The index of the GPU whose sampled gauges (NVML utilisation, power, energy) belong to a
    row whose ``device`` field is ``label``; None where the sampler reads none for this kind."""
    manifest: Callable[[], dict[str, Any]] = _nothing
    """This kind's entries in the manifest's ``devices`` (counting devices, never starting one)."""
    collective_device: Callable[[str], torch.device | None] = _no_collective
    """Given a process group's backend as ``torch.distributed.get_backend()`` names it (``nccl``,
    ``cpu:gloo,cuda:nccl``), the device its collectives' tensors must live on if this kind runs
    them (CUDA for NCCL: the current device); None otherwise (the host then runs them). Called
    once per rank, when a run starts (it may start the device)."""
    oom_messages: tuple[str, ...] = ("out of memory",)
    """Phrases (lower case) in the text of the error this kind's allocator raises when it runs out
    of memory, for errors whose type does not say so (a ``RuntimeError``)."""
    lost: Callable[[], bool] = _never
    """True in a process where this kind cannot run though its parent used it (CUDA in a child
    forked after CUDA started: :mod:`gnnmon.devices.fork`); its calls are then measured on the host."""

    @functools.cached_property
    def in_use_source(self) -> str:
        """A row's ``device_source`` when it was inferred from this kind being in use."""
        return f"{self.type} in use"


class Kinds(dict[str, BackendKind]):
    """The table of kinds, which keeps what a row's inference reads of it at hand, remade at
    every change (also a test's ``monkeypatch.setitem``): ``accelerators``, the accelerator kinds
    in order, ``in_use``, each one's ``in_use`` and ``in_use_source`` (read off the kinds once, not
    per row), and ``losable``, the types of kinds that a forked child can lose (their ``lost`` is
    not the default). A call then asks only the kinds that can answer."""

    accelerators: tuple[BackendKind, ...] = ()
    in_use: tuple[tuple[Callable[[], torch.device | None], str], ...] = ()
    losable: tuple[str, ...] = ()

    def _remake(self) -> None:
        kinds = tuple(dict.values(self))
        self.accelerators = tuple(k for k in kinds if k.accelerator)
        self.in_use = tuple((k.in_use, k.in_use_source) for k in self.accelerators)
        self.losable = tuple(k.type for k in kinds if k.lost is not _never)
        _quiet()

    def __setitem__(self, key: str, value: BackendKind) -> None:
        dict.__setitem__(self, key, value)
        self._remake()

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        self._remake()

    def pop(self, key: str, *default: Any) -> Any:
        value = dict.pop(self, key, *default)
        self._remake()
        return value

    def clear(self) -> None:
        dict.clear(self)
        self._remake()

    def update(self, *args: Any, **kwargs: Any) -> None:
        dict.update(self, *args, **kwargs)
        self._remake()


BACKENDS: Kinds = Kinds()
"""Device type -> its kind, in the order inference tries them (accelerators first)."""

_BUILT_IN: tuple[tuple[Callable[[], torch.device | None], str], ...] = ()  # the built-in kinds' in_use, once registered
_QUIET: list[Any] = [None]
"""The table's ``in_use`` while it holds the built-in kinds alone and MPS cannot be in use (none in
this torch, or found unavailable), else None: then no accelerator is in use while CUDA's flag is down."""


def _quiet() -> None:
    """Note whether the kinds can be answered without asking them (:data:`_QUIET`), after the
    table changed or MPS was asked: never where ``torch.cuda.is_initialized`` was not torch's own
    as gnnmon was imported (a fake or a vendor's shim put in its place first: its flag says nothing)."""
    in_use = BACKENDS.in_use
    mps_quiet = _MPS_BACKEND is None or _MPS is None or _mps_asked is not None and not _mps_answer
    _QUIET[0] = in_use if _BUILT_IN and in_use == _BUILT_IN and mps_quiet and _TORCHS_OWN else None

_LOCK = threading.RLock()


def register_backend(kind: BackendKind, *, before: str | None = None) -> BackendKind:
    """Add (or replace) a device kind; ``before``: the type it is tried before in inference
    (default: before the host, after the accelerators already there)."""
    with _LOCK:
        kinds = [k for k in BACKENDS.values() if k.type != kind.type]
        if before is None:
            before = next((k.type for k in kinds if not k.accelerator), None)
        at = next((i for i, k in enumerate(kinds) if k.type == before), len(kinds))
        kinds.insert(at, kind)
        BACKENDS.clear()
        BACKENDS.update((k.type, k) for k in kinds)
    return kind


def unregister_backend(type_: str) -> None:
    """Forget a device kind (a test's own kind, once it is done)."""
    with _LOCK:
        BACKENDS.pop(type_, None)


def collective_device(process_group_backend: str) -> torch.device:
    """The device a collective's tensors live on for a process group of that backend: the first
    kind that runs it (registry order), else the host."""
    for kind in BACKENDS.values():
        device = kind.collective_device(process_group_backend)
        if device is not None:
            return device
    return torch.device(HOST_BACKEND)


def gauge_index(label: Any) -> int | None:
    """The sampled GPU (its index) a row's ``device`` field ran on, else None."""
    if not isinstance(label, str):
        return None
    kind = BACKENDS.get(label.partition(":")[0])
    return None if kind is None else kind.gauge_index(label)


# -- the built-in kinds ----------------------------------------------------------------------------

def _cuda_in_use() -> torch.device | None:
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_initialized() else None


def _cuda_manifest() -> dict[str, Any]:
    available = torch.cuda.is_available()  # counting devices creates no CUDA context
    out: dict[str, Any] = {"cuda_available": available,
                           "cuda_device_count": torch.cuda.device_count() if available else 0,
                           "cuda_version": torch.version.cuda}
    if available and torch.cuda.is_initialized():  # its memory, where reading it starts nothing
        out["cuda_memory_total_bytes"] = [int(torch.cuda.get_device_properties(i).total_memory)
                                          for i in range(out["cuda_device_count"])]
    return out


def _host_manifest() -> dict[str, Any]:
    import psutil

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # cpu_usable: the cores this process may run on (its affinity), what its loader's workers share;
    # torch_threads: torch's intra-op threads (1: a CPU step's thread CPU time is its whole work)
    return {"cpu_count": os.cpu_count(), "cpu_usable": usable, "ram_total_bytes": int(psutil.virtual_memory().total),
            "torch_threads": torch.get_num_threads()}


def _cuda_collective(process_group_backend: str) -> torch.device | None:
    return torch.device("cuda", torch.cuda.current_device()) if "nccl" in process_group_backend else None


def _cuda_gauge_index(label: str) -> int | None:
    return int(label.split(":")[1]) if ":" in label else 0


_MPS_BACKEND = getattr(torch.backends, "mps", None)
_MPS = getattr(torch, "mps", None)
# The modules, looked up once (reading them off torch per row cost ~0.5 µs); their functions are
# read at each call, so a test's fake is seen.


def _mps_available() -> bool:
    return bool(_MPS_BACKEND is not None and _MPS_BACKEND.is_available())


_mps_asked: Any = None
_mps_answer = False
"""``torch.backends.mps.is_available`` as last asked, and its answer: MPS is available or not for
the life of a process, so a row asks again only when the function is another (a test's fake)."""


def _ask_mps() -> None:
    global _mps_asked, _mps_answer
    _QUIET[0] = None  # first: no reader pairs the function about to be kept with an answer of before
    available = _MPS_BACKEND.is_available  # type: ignore[union-attr]
    _mps_answer = bool(available())
    _mps_asked = available  # last: a reader never sees the function without its answer
    _quiet()


def _mps_in_use() -> torch.device | None:
    if _MPS_BACKEND.is_available is not _mps_asked:  # type: ignore[union-attr]
        _ask_mps()
    if not _mps_answer:
        return None
    try:
        return torch.device("mps") if _MPS.current_allocated_memory() > 0 else None  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - an MPS build that cannot say: not in use
        return None


for _kind in (
    BackendKind("cuda", CudaBackend, _cuda_in_use, resolve_index=check_cuda_index,
                gauge_index=_cuda_gauge_index, manifest=_cuda_manifest, collective_device=_cuda_collective,
                lost=cuda_lost),
    BackendKind("mps", MpsBackend, _mps_in_use if _MPS is not None and _MPS_BACKEND is not None else _none,
                manifest=lambda: {"mps_available": _mps_available()}),
    BackendKind(HOST_BACKEND, CpuBackend, accelerator=False, manifest=_host_manifest,
                oom_messages=("can't allocate memory", "cannot allocate memory")),
):
    register_backend(_kind)

_CUDA = torch.cuda
_IS_INITIALIZED = torch.cuda.is_initialized
_TORCHS_OWN = getattr(getattr(_IS_INITIALIZED, "__code__", None), "co_filename", None) == getattr(_CUDA, "__file__", "")
_BUILT_IN = BACKENDS.in_use
_quiet()

if _MPS_BACKEND is None or _MPS is None:  # no MPS in this torch: its kind is never in use
    def none_in_use() -> bool:
        """True when no accelerator kind is in use now, read from CUDA's flag (torch's own
        ``is_initialized`` in place) while the table holds the built-in kinds alone; False where
        this cannot say (the kinds are asked then)."""
        return not _CUDA._initialized and _CUDA.is_initialized is _IS_INITIALIZED and BACKENDS.in_use is _QUIET[0]
else:
    def none_in_use() -> bool:
        """True when no accelerator kind is in use now, read from what the built-in kinds keep (CUDA's
        flag, torch's own ``is_initialized`` in place; MPS unavailable, as last asked) while the table
        holds them alone; False where this cannot say (the kinds are asked then)."""
        return (not _CUDA._initialized and _CUDA.is_initialized is _IS_INITIALIZED and BACKENDS.in_use is _QUIET[0]
                and _MPS_BACKEND.is_available is _mps_asked)  # type: ignore[union-attr]
