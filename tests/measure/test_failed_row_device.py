"""A row that never started because its own ``device=`` cannot be measured (``device='cuda'`` on a
machine without CUDA) keeps no device (gnnmon/measure/row_device.py): nothing was measured, on the
device named or any other, so its ``device`` and ``backend`` are None and it has no
``device_source``, as a row whose device could not be resolved. It is stored all the same, with
its error and the ``did not start`` note that names the device and why; the call raises what it
raised before. Rows that ran are measured as before, a row inside which a phase's named device
failed among them.

The machine without an accelerator is planted by the ``no_accelerator`` fixture (tests/conftest.py):
CUDA and MPS unavailable and none in use, whatever machine runs the suite (a GPU machine's cached
backends put aside)."""

from __future__ import annotations

import pytest
import torch

import gnnmon
from gnnmon.errors import DeviceError

NO_CUDA = "requested but CUDA is not available (torch.cuda.is_available() is False)"
NO_MPS = "device 'mps' requested but MPS is not available (torch.backends.mps.is_available() is False)"


def _decorated(decorator, name):
    """A call of a step decorated with ``decorator(device=...)``, as a form named ``name``."""

    def form(device, ran):
        @decorator(device=device)
        def step(x):
            ran.append("step")
            return x

        return step(torch.ones(2))

    form.__name__ = name
    return form


_memory_call = _decorated(gnnmon.monitor_memory_device, "_memory_call")
_timed_call = _decorated(gnnmon.cuda_timed, "_timed_call")


def _timed_scope(device, ran):
    with gnnmon.timed(label="step", device=device):
        ran.append("step")


def _memory_scope(device, ran):
    with gnnmon.memory_scope(label="step", device=device):
        ran.append("step")


def _lone_phase(device, ran):
    with gnnmon.phase("step", device=device):
        ran.append("step")


FORMS = [_memory_call, _timed_call, _timed_scope, _memory_scope, _lone_phase]

NAMED = [  # (device=, what the call raises: DeviceError's message)
    ("cuda", f"device 'cuda' {NO_CUDA}"),
    ("cuda:7", f"device 'cuda:7' {NO_CUDA}"),
    (torch.device("cuda", 1), f"device 'cuda:1' {NO_CUDA}"),
    (0, f"device 'cuda:0' {NO_CUDA}"),
    ("mps", NO_MPS),
]


def _failed_row(form, device, message):
    """The call's DeviceError (its message exactly ``message``) and the one row it stored, which
    says it did not start for it and names no device."""
    ran: list = []
    with gnnmon.collect() as run:
        with pytest.raises(DeviceError) as raised:
            form(device, ran)
    assert type(raised.value) is DeviceError
    assert str(raised.value) == message
    assert ran == []  # the user's code never ran
    (row,) = run.records
    assert row["label"] == "step"
    assert row["error"] == "DeviceError"
    assert list(row["notes"]) == [f"did not start: DeviceError: {message}"]
    assert row["device"] is None and row["backend"] is None, row
    assert "device_source" not in row, row
    return row


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize(("device", "message"), NAMED, ids=[str(d) for d, _ in NAMED])
def test_a_row_whose_named_device_is_unavailable_is_stored_naming_no_device(no_accelerator, form, device, message):
    _failed_row(form, device, message)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__.strip("_"))
def test_a_cuda_index_past_the_devices_there_are_names_no_device_either(fake_cuda, form):
    """CUDA there, with two devices: ``cuda:7`` is not one of them."""
    _failed_row(form, "cuda:7", "device 'cuda:7' requested but only 2 CUDA device(s) exist")


def _identity(row):
    return row["device"], row["backend"], row["device_source"]


def test_rows_that_ran_keep_the_device_they_were_measured_on(no_accelerator):
    ran: list = []
    with gnnmon.collect() as run:
        _memory_call("cpu", ran)
        _memory_call(None, ran)
        _timed_call("cpu", ran)
        _timed_scope(None, ran)
        with pytest.raises(DeviceError):  # a failed row between them changes none of them
            _memory_call("cuda", ran)
        _memory_call(None, ran)
    assert ran == ["step"] * 5
    rows = run.records
    assert [_identity(r) for r in rows if r["error"] is None] == [
        ("cpu", "cpu", "explicit"),
        ("cpu", "cpu", "argument"),
        ("cpu", "cpu", "explicit"),
        ("cpu", "cpu", "cpu: no accelerator in use"),
        ("cpu", "cpu", "argument"),
    ]
    assert all(not r["notes"] for r in rows if r["error"] is None)
    assert [r["device"] for r in rows if r["error"] is not None] == [None]


def test_a_row_that_ran_keeps_its_device_when_a_phase_inside_it_names_one_that_fails(no_accelerator):
    """A row no measurement chose a device for (``@gc_controlled``) whose code opened
    ``phase(device='cuda')``: the row ran, whether its code caught the phase's error or not; its
    device is chosen at its close as any such row's (its arguments', on the CPU)."""

    @gnnmon.gc_controlled
    def caught(x):
        with pytest.raises(DeviceError):
            with gnnmon.phase("forward", device="cuda"):
                pass
        return x

    @gnnmon.gc_controlled
    def uncaught(x):
        with gnnmon.phase("forward", device="cuda"):
            pass

    with gnnmon.collect() as run:
        caught(torch.ones(2))
        with pytest.raises(DeviceError) as raised:
            uncaught(torch.ones(2))
    assert str(raised.value) == f"device 'cuda' {NO_CUDA}"
    first, second = run.records
    assert _identity(first) == _identity(second) == ("cpu", "cpu", "argument")
    assert first["error"] is None and second["error"] == "DeviceError"
    assert not any(n.startswith("did not start") for r in (first, second) for n in r["notes"])
