"""Which device a call's arguments live on: one pass over them, reading devices, never values.

The device of a call's tensors, modules (their first parameter or buffer) and PyG data, with an
accelerator winning over the host; and the first PyG data object among them, for its shape. No
sync, no copy, nothing read from a tensor's memory.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from gnnmon.devices.registry import BACKENDS
from gnnmon.errors import DeviceError
from gnnmon.fields import HOST_BACKEND


def _tensor_device(obj: Any, pyg_kinds: tuple[type, ...]) -> torch.device | None:
    if isinstance(obj, torch.Tensor):
        return obj.device
    if isinstance(obj, torch.nn.Module):
        for p in obj.parameters():
            return p.device
        for b in obj.buffers():
            return b.device
        return None
    if pyg_kinds and isinstance(obj, pyg_kinds):
        stores: Any = getattr(obj, "stores", ())
        for store in stores:
            for value in store.values():
                if isinstance(value, torch.Tensor):
                    return value.device
    return None


def _pyg_kinds() -> tuple[type, ...]:
    pyg = sys.modules.get("torch_geometric.data")
    return (pyg.Data, pyg.HeteroData) if pyg is not None else ()


def scan_arguments(args: Iterable[Any], kwargs: Mapping[str, Any] | None) -> tuple[torch.device | None, Any]:
    """One pass over a call's arguments: (their device, the first PyG data object or None).

    The device is that of the tensors, modules (first parameter) or PyG data among them; an
    accelerator wins over the CPU (a model on ``cuda`` with a batch still on the host runs on
    ``cuda``). Looks one level into lists and tuples (their first 8 items). Reads no values."""
    kinds = _pyg_kinds()
    found: torch.device | None = None
    data = None
    for group in (args, kwargs.values() if kwargs else ()):
        for obj in group:
            items = obj[:8] if isinstance(obj, (list, tuple)) else (obj,)
            for item in items:
                if item is None or isinstance(item, (int, float, str, bool)):
                    continue
                if data is None and kinds and isinstance(item, kinds):
                    data = item
                if found is not None and found.type != HOST_BACKEND:
                    continue  # the device is settled; still looking for PyG data
                dev = _tensor_device(item, kinds)
                if dev is not None and (found is None or dev.type != HOST_BACKEND):
                    found = dev
    return found, data


def check_supported(dev: torch.device) -> torch.device:
    """``dev`` if gnnmon can measure it, else a clear :class:`DeviceError`."""
    if dev.type not in BACKENDS:
        raise DeviceError(
            f"the call's arguments live on {str(dev)!r}, which gnnmon cannot measure "
            f"(supported: {', '.join(BACKENDS)}); pass device= explicitly"
        )
    return dev
