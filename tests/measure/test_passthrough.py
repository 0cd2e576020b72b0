"""Decorated calls return and raise exactly what the function does, and are still recorded."""

from __future__ import annotations

import functools

import pytest
import torch

import gnnmon
from gnnmon import DeviceError, memory_scope, monitor_memory_device


class Boom(Exception):
    pass


def test_return_value_is_the_same_object():
    sentinel = object()

    @monitor_memory_device
    def f():
        return sentinel

    assert f() is sentinel


def test_exception_passes_through_unchanged_and_row_has_error():
    exc = Boom("planted")

    @monitor_memory_device(label="fails")
    def f():
        raise exc

    with gnnmon.collect() as run:
        with pytest.raises(Boom) as info:
            f()
    assert info.value is exc
    (row,) = run.records
    assert row["error"] == "Boom" and row["label"] == "fails"
    assert row["mem_peak_bytes"] is not None  # figures still recorded


def test_scope_records_error_and_reraises():
    with gnnmon.collect() as run:
        with pytest.raises(KeyError):
            with memory_scope(label="blk"):
                raise KeyError("x")
    (row,) = run.records
    assert row["error"] == "KeyError"


def test_wraps_metadata_and_arguments():
    @monitor_memory_device
    def add(a, b=2, *, c=3):
        """Adds."""
        return a + b + c

    assert add.__name__ == "add" and add.__doc__ == "Adds."
    assert add.__wrapped__(1) == 6
    assert add(1, 10, c=100) == 111


def test_methods_staticmethods_classmethods():
    class Trainer:
        scale = 3

        @monitor_memory_device
        def step(self, x):
            return x * self.scale

        @staticmethod
        @monitor_memory_device
        def s(x):
            return x + 1

        @monitor_memory_device
        @classmethod
        def c(cls, x):
            return cls.scale + x

    with gnnmon.collect() as run:
        t = Trainer()
        assert t.step(2) == 6 and Trainer.s(1) == 2 and t.c(1) == 4
    assert [r["label"] for r in run.records] == ["Trainer.step", "Trainer.s", "Trainer.c"]


def test_refused_targets_have_clear_errors():
    with pytest.raises(TypeError, match="generator function .*gen: its body"):
        @monitor_memory_device
        def gen():
            yield 1

    with pytest.raises(TypeError, match="coroutine function .*co: gnnmon"):
        @monitor_memory_device
        async def co():
            return 1

    with pytest.raises(TypeError, match="not the class"):
        @monitor_memory_device
        class K:
            pass

    with pytest.raises(TypeError, match="Pass options by keyword"):
        monitor_memory_device("cuda")


def test_bad_options_have_clear_errors():
    with pytest.raises(TypeError, match="unknown option.*'devcie'"):
        monitor_memory_device(devcie="cpu")
    with pytest.raises(DeviceError, match="unknown device 'gpu0'"):
        monitor_memory_device(device="gpu0")
    with pytest.raises(DeviceError, match="unsupported device 'meta'"):
        monitor_memory_device(device="meta")
    with pytest.raises(DeviceError, match="not list"):
        memory_scope(device=["cuda"])
    with pytest.raises(TypeError, match="label must be a string"):
        monitor_memory_device(label=3)
    with pytest.raises(ValueError, match="sample_interval"):
        monitor_memory_device(sample_interval=0)
    with pytest.raises(TypeError, match="include_children"):
        monitor_memory_device(include_children="yes")


def test_unavailable_device_fails_at_call_not_at_decoration():
    @monitor_memory_device(device="cuda:0")
    def f():
        return 1

    if torch.cuda.is_available():
        pytest.skip("a real CUDA device is present")
    with gnnmon.collect() as run:
        with pytest.raises(DeviceError, match="CUDA is not available"):
            f()
    (row,) = run.records
    assert row["error"] == "DeviceError"


def test_stacked_decorators_fill_one_row_and_inner_calls_get_their_own():
    def plain(func):  # a foreign decorator in between, using functools.wraps
        @functools.wraps(func)
        def w(*a, **k):
            return func(*a, **k)
        return w

    @monitor_memory_device(label="leaf")
    def leaf():
        return torch.ones(10)

    @monitor_memory_device(label="step")
    @plain
    @monitor_memory_device
    def step():
        leaf()
        leaf()
        return 1

    with gnnmon.collect() as run:
        step()
        step()
    rows = run.records
    assert [(r["label"], r["index"], r["parent"]) for r in rows] == [
        ("leaf", 0, "step#0"), ("leaf", 1, "step#0"), ("step", 0, None),
        ("leaf", 2, "step#1"), ("leaf", 3, "step#1"), ("step", 1, None),
    ]


def test_label_of_inner_decorator_is_used_for_the_stack():
    @monitor_memory_device
    @monitor_memory_device(label="train")
    def f():
        return 0

    with gnnmon.collect() as run:
        f()
    assert [r["label"] for r in run.records] == ["train"]


def test_rows_without_collect_go_to_the_default_run():
    @monitor_memory_device(label="default-run-probe")
    def f():
        return 1

    before = sum(r["label"] == "default-run-probe" for r in gnnmon.default_run().records)
    f()
    after = sum(r["label"] == "default-run-probe" for r in gnnmon.default_run().records)
    assert after == before + 1


def test_directly_stacked_decorators_merge_into_one_wrapper():
    def f(x):
        return x

    stacked = gnnmon.monitor_memory_device(gnnmon.cuda_timed(gnnmon.gc_controlled(f)))
    assert stacked.__gnnmon_target__ is f
    assert [c.name for c, _ in stacked.__gnnmon_measures__] == ["memory", "timing", "gc"]
    with gnnmon.collect() as run:
        assert stacked(5) == 5
    (row,) = run.records
    assert {"mem_peak_bytes", "wall_s", "gc_collections"} <= set(row)


def test_a_failing_measurement_never_changes_the_result():
    from gnnmon.measure.adapters import make_decorator
    from gnnmon.measure.lifecycle import Measurement

    class Broken(Measurement):
        name = "broken"

        def __exit__(self, *exc):
            raise ZeroDivisionError("planted bug in a measurement")

    broken = make_decorator(Broken, "broken")
    sentinel = object()

    @monitor_memory_device
    @broken
    def f():
        return sentinel

    with gnnmon.collect() as run:
        with pytest.warns(RuntimeWarning, match="broken measurement failed"):
            assert f() is sentinel
    (row,) = run.records
    assert row["error"] is None and row["mem_peak_bytes"] is not None
    assert any("broken failed: ZeroDivisionError" in n for n in row["notes"])


def test_stacked_scopes_with_one_label_fill_one_row_as_stacked_decorators_do(fake_cuda):
    """``with memory_scope(label="x", device="cuda"), timed(label="x", device="cuda"):`` around a
    planted 10 ms sleep and 16 MiB allocated on the fake CUDA device: one row per block with memory
    and time, not two rows (one the other's parent); the same measurement twice, or another label,
    still nests."""
    import time

    with gnnmon.collect() as run:
        for _ in range(3):
            with memory_scope(label="x", device="cuda"), gnnmon.timed(label="x", device="cuda", sync="none") as fields:
                time.sleep(0.01)
                fake_cuda.free(fake_cuda.alloc(16 * 2**20, 0))
            assert "wall_s" in fields and "mem_peak_bytes" in fields  # one row, both measurements
        with gnnmon.timed(label="y"), gnnmon.timed(label="y"):
            pass
        with memory_scope(label="a"), gnnmon.timed(label="b"):
            pass
    x = [r for r in run.records if r["label"] == "x"]
    assert len(x) == 3 and all(r["parent"] is None and r["wall_s"] >= 0.01 for r in x)
    assert all(r["mem_peak_delta_bytes"] == 16 * 2**20 and r["device"] == "cuda:0" for r in x)
    assert [(r["label"], r["parent"]) for r in run.records if r["label"] in "yab"] == [
        ("y", "y#0"), ("y", None), ("b", "a#0"), ("a", None)]
    assert gnnmon.current_row() is None


def test_an_exception_in_stacked_scopes_closes_their_one_row_with_the_error():
    with gnnmon.collect() as run:
        with pytest.raises(KeyError):
            with memory_scope(label="x"), gnnmon.timed(label="x"):
                raise KeyError("planted")
        with gnnmon.timed(label="after"):
            pass
    first, after = run.records
    assert first["label"] == "x" and first["error"] == "KeyError" and "wall_s" in first
    assert "mem_peak_bytes" in first and after["parent"] is None


def test_every_decorator_and_scope_shows_its_options_by_name():
    """``inspect.signature`` (what IDEs, ``help`` and notebooks show) names each option with its
    default, no ``**options``; each one named is accepted, and an unknown one is refused by name."""
    import inspect

    from gnnmon.measure.gc_control import GcControl
    from gnnmon.measure.memory import MemoryMeasurement
    from gnnmon.measure.timing import TimingMeasurement

    for made, cls, decorator in ((monitor_memory_device, MemoryMeasurement, True),
                                 (gnnmon.cuda_timed, TimingMeasurement, True),
                                 (gnnmon.gc_controlled, GcControl, True),
                                 (memory_scope, MemoryMeasurement, False), (gnnmon.timed, TimingMeasurement, False)):
        params = inspect.signature(made).parameters
        assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in params.values())
        named = [n for n in params if n not in ("func", "label")]
        assert named == list(cls.option_names) and params["label"].default is None
        assert all(params[n].default == cls.defaults[n] for n in named)
        given = {n: params[n].default for n in named}
        applied = made(**given)
        if decorator:
            applied(lambda: None)
        with pytest.raises(TypeError, match="nope"):
            made(nope=1)
    assert {"sync", "device"} <= set(inspect.signature(gnnmon.phase).parameters)
