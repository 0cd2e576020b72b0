"""Which device a call runs on: explicit argument, else its arguments
(:mod:`gnnmon.devices.arguments`), else :func:`infer_device`.

Resolution happens per call (never at import). Reading a device never syncs or copies.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from gnnmon.devices import Backend, backend_for
from gnnmon.devices.arguments import check_supported
from gnnmon.devices.fork import cuda_lost
from gnnmon.devices.registry import BACKENDS, BackendKind, none_in_use
from gnnmon.errors import DeviceError
from gnnmon.fields import HOST_BACKEND


def _device_forms() -> str:
    """The device strings gnnmon accepts, from the registered kinds: ``'cuda', 'cuda:N', 'mps', 'cpu'``."""
    forms = []
    for kind in BACKENDS.values():
        forms.append(repr(kind.type))
        if kind.resolve_index is not None:
            forms.append(repr(f"{kind.type}:N"))
    return ", ".join(forms)


def parse_device(device: Any) -> torch.device:
    """Turn a user's ``device=`` value into a ``torch.device``, with a clear error if it is not one.

    Accepts ``torch.device``, strings of a registered kind such as ``"cuda:1"``, ``"mps"``,
    ``"cpu"``, and an int (a CUDA index, as torch does). Availability is checked later, per call,
    by the backend.
    """
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, bool):
        raise DeviceError(f"device must be a torch.device, a string or an int, not bool ({device!r})")
    elif isinstance(device, int):
        if device < 0:
            raise DeviceError(f"device index must be >= 0, got {device}")
        dev = torch.device("cuda", device)
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as exc:
            raise DeviceError(f"unknown device {device!r}: expected one of {_device_forms()}") from exc
    else:
        raise DeviceError(
            f"device must be a torch.device, a string such as 'cuda:0' or an int, "
            f"not {type(device).__name__}"
        )
    kind = BACKENDS.get(dev.type)
    if kind is None:
        raise DeviceError(f"unsupported device {str(dev)!r}: gnnmon measures {', '.join(BACKENDS)}")
    if kind.resolve_index is None and dev.index:  # "cpu:1": a kind of one device has no other
        raise DeviceError(f"device {str(dev)!r}: {dev.type} is one device, with no index {dev.index}; "
                          f"use {dev.type!r}")
    return dev


_CPU = torch.device("cpu")
_mode_stack_len = getattr(torch._C, "_len_torch_function_stack", None)
_get_default_device = getattr(torch, "get_default_device", None)
_DEVICE_CONTEXT = getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None)
"""torch's ``threading.local`` that holds a default device set with ``torch.set_default_device``
(made once, as torch is imported; its ``__dict__`` is the reading thread's)."""


# How a row's device was chosen (its ``device_source`` field); one inferred from a kind in use
# reads "<type> in use" (BackendKind.in_use_source).
BY_ARGUMENT = "argument"
BY_EXPLICIT = "explicit"
BY_DEFAULT = "torch default device"
BY_NOTHING = "cpu: no accelerator in use"
BY_WORK = "{type}: its allocator was used (arguments on the cpu)"
"""A call whose arguments are on the host, while an accelerator is in use, that used the accelerator."""
BY_HOST_WORK = "cpu: arguments on the cpu, {type}'s allocator unused"
"""The same, when the call did not use it: its work was the host's."""
EITHER = "either"
"""What :func:`choose_backend` says of such a call until it ends: measured on the accelerator and
the host, and settled then (:mod:`gnnmon.measure.row_device`) as :data:`BY_WORK` or
:data:`BY_HOST_WORK`."""
BY_FORK = "cpu: a forked child, where {type} cannot run"
"""A call in a child forked after its parent started a device that cannot run there (CUDA)."""


_FORKED = [cuda_lost()]
"""Whether this process may have lost a device kind: a child forked since gnnmon was imported, or
one that started as a CUDA process's forked child. Only then are the kinds' ``lost`` asked, each a
call into torch that a row would pay for nothing in every other process."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _FORKED.__setitem__(0, True))


def infer_device() -> tuple[torch.device, str]:
    """The device of a call with no device among its arguments (``@monitor_memory_device def
    train(): ...`` over a global model and loader), and how it was chosen:

    1. torch's default device, where one was set (``torch.set_default_device``);
    2. else the first accelerator kind in use in this process (:mod:`gnnmon.devices.registry`:
       CUDA initialised, then MPS holding memory): ``cuda in use``, ``mps in use``;
    3. else the CPU: ``cpu: no accelerator in use`` (or, in a child forked from a CUDA process,
       :data:`BY_FORK`).

    Never the CPU silently while a GPU is in use. A call that is the first to use an accelerator
    is measured on the CPU (none was in use when it started); its row says so, from
    :func:`accelerator_in_use` at its end. Every step runs in this frame (one per row that infers)."""
    # torch's default device: ``torch.get_default_device()`` walks the mode stack (~10 µs), so its usual
    # answer (no mode, no default set: the CPU) is read first
    if _get_default_device is not None and (
            _mode_stack_len is None or _mode_stack_len() or _DEVICE_CONTEXT is None
            or _DEVICE_CONTEXT.__dict__.get("device_context") is not None):
        dev = _get_default_device()
        if dev.type != HOST_BACKEND:
            return dev, BY_DEFAULT
    if not none_in_use():
        for in_use, source in BACKENDS.in_use:
            used = in_use()
            if used is not None:
                return used, source
    if _FORKED[0]:
        for type_ in BACKENDS.losable:
            if BACKENDS[type_].lost():
                return _CPU, BY_FORK.format(type=type_)
    return _CPU, BY_NOTHING


def host_now() -> Backend | None:
    """The host's backend where a call with no device among its arguments is measured there now
    (:func:`infer_device`'s usual answer, :data:`BY_NOTHING`), read without inferring: no default
    device set, no accelerator in use, not a child that may have lost one; None where it may be
    another (then infer)."""
    if (_get_default_device is not None and (_mode_stack_len is None or _mode_stack_len() or _DEVICE_CONTEXT is None
                                             or _DEVICE_CONTEXT.__dict__.get("device_context") is not None)
            or _FORKED[0] or not none_in_use()):
        return None
    return backend_for(_CPU)


def accelerator_in_use() -> tuple[BackendKind, torch.device] | None:
    """The first accelerator kind this process uses now, and its device (registry order)."""
    if none_in_use():
        return None
    for kind in BACKENDS.accelerators:
        used = kind.in_use()
        if used is not None:
            return kind, used
    return None


def choose_backend(found: torch.device | None, explicit: Any = None) -> tuple[Backend, str]:
    """The backend a call is measured on, and how its device was chosen (a row's
    ``device_source``): ``explicit`` (a ``device=`` value) if given, else ``found`` (the device of
    its arguments, :func:`~gnnmon.devices.arguments.scan_arguments`), else :func:`infer_device`;
    the host where that device cannot run in this process (:data:`BY_FORK`). Arguments on the
    host while an accelerator that can say whether a call used it is in use: that accelerator,
    with :data:`EITHER`, for the row to settle when the call ends."""
    if explicit is not None:
        dev = explicit if isinstance(explicit, torch.device) else parse_device(explicit)
        how = BY_EXPLICIT
    elif found is not None:
        dev, how = found, BY_ARGUMENT
        if found.type == HOST_BACKEND:  # a batch moved inside the step: where did the work run?
            used = accelerator_in_use()
            if used is not None:
                backend = backend_for(used[1])
                if getattr(backend, "activity", None) is not None:
                    return backend, EITHER
    else:
        dev, how = infer_device()
        if dev is _CPU:  # the host's (the usual answer on a machine with no accelerator in use)
            return backend_for(_CPU), how
    # a forked child: its CUDA objects are the parent's
    if dev is not _CPU and dev.type in BACKENDS.losable and BACKENDS[dev.type].lost():
        return backend_for(_CPU), BY_FORK.format(type=dev.type)
    try:
        return backend_for(dev), how
    except DeviceError:
        check_supported(dev)  # an unsupported device among the arguments: say so
        raise


def started_during() -> str | None:
    """For a call measured on the host because no accelerator was in use when it started
    (:data:`BY_NOTHING`), read at its end: what its row says if it started one (that memory is not
    in the row); else None."""
    if none_in_use():
        return None
    for kind in BACKENDS.accelerators:  # accelerator_in_use(), in this frame
        if kind.in_use() is not None:
            break
    else:
        return None
    name = kind.type.upper()
    return (f"{name} was first used during this call, after it was measured on the CPU: its {name} memory is "
            f"not in this row; later calls measure {name} (or pass device=)")
