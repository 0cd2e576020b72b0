"""Faults a training job meets: signals, forked workers, Ctrl-C, scopes closed out of order, bad
config, no file descriptors, a full disk, a second run on the same file, files that are not
gnnmon's, bad sampling intervals, partials of generators. Nothing lost, nothing hung: each is
planted, signals and forks in subprocesses with time limits."""

from __future__ import annotations

import errno
import functools
import json
import warnings

import pytest
import torch

import gnnmon
from gnnmon.cli import main
from gnnmon.data import write as storage
from gnnmon.errors import ReportFileError
from gnnmon.measure.adapters import _OPEN_SCOPE
from gnnmon.record import state
from tests.scripts import run_script

# 1 -------------------------------------------------------------------------------------------------

def test_a_signal_handler_may_call_a_decorated_function_while_rows_stream(tmp_path):
    """A SIGALRM every 5 ms whose handler runs a decorated save_checkpoint(), while decorated
    steps stream to a file: it used to hang for good on a lock its own thread held. (Every 1 ms on
    a loaded machine, about 1 run in 5 crashed inside CPython's ContextVar.set: a handler run from
    a GC callback that fired inside another ContextVar.set; see the README.)"""
    path = tmp_path / "sig.jsonl"
    proc = run_script("""
        import faulthandler, json, signal, sys
        import gnnmon
        faulthandler.enable()
        faulthandler.dump_traceback_later(60, exit=True)  # a hang prints where, then fails the test

        @gnnmon.monitor_memory_device
        @gnnmon.cuda_timed
        def save_checkpoint():
            return 1

        @gnnmon.monitor_memory_device
        @gnnmon.cuda_timed
        @gnnmon.gc_controlled
        def step():
            return 2

        signal.signal(signal.SIGALRM, lambda *_: save_checkpoint())
        with gnnmon.collect(sys.argv[1], flush_interval=0.001) as run:
            signal.setitimer(signal.ITIMER_REAL, 0.005, 0.005)
            for _ in range(20000):
                step()
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
        print(json.dumps({"records": run.rows_written}))
    """, str(path))
    run = gnnmon.load(path)
    labels = [r["label"] for r in run.records]
    # the handler ran, often: measured where it interrupted the loop, unmeasured (counted on the end
    # line) where it interrupted gnnmon's own bookkeeping, as it mostly does in a loop of empty steps
    assert labels.count("step") == 20000
    assert labels.count("save_checkpoint") + run.end["unmeasured_calls"] >= 10
    keys = [(r["label"], r["index"]) for r in run.records]
    assert len(set(keys)) == len(keys) and run.complete
    assert json.loads(proc.stdout)["records"] == len(run.records)


# 2 -------------------------------------------------------------------------------------------------

def test_forked_dataloader_workers_do_not_write_into_the_parents_run(tmp_path):
    path = tmp_path / "fork.jsonl"
    run_script("""
        import sys, torch, gnnmon
        from torch.utils.data import DataLoader, Dataset

        @gnnmon.cuda_timed
        def load_item(i):
            return torch.tensor([i])

        @gnnmon.cuda_timed
        def train_step(batch):
            return batch.sum()

        class Items(Dataset):
            def __len__(self):
                return 16

            def __getitem__(self, i):
                return load_item(i)

        with gnnmon.collect(sys.argv[1]):
            for batch in DataLoader(Items(), batch_size=2, num_workers=2):
                train_step(batch)
    """, str(path))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [o for o in lines if o["type"] == "row"]
    (end,) = [o for o in lines if o["type"] == "end"]
    # the parent's 8 steps only, once each; the workers' rows and GC events stay in the workers
    assert [(r["label"], r["index"]) for r in rows] == [("train_step", i) for i in range(8)]
    assert end["rows"] == 8 and end["children_forked"] == 2 and "not in this run" in end["notes"][0]
    assert not [o for o in lines if o["type"] == "gc" and (o.get("row") or "").startswith("load_item")]
    assert gnnmon.load(path).children_forked == 2


# 3 -------------------------------------------------------------------------------------------------

def test_ctrl_c_anywhere_in_gnnmons_own_code_leaves_nothing_behind():
    """A real SIGINT planted at every line gnnmon runs (k = 0, 1, 2, ...) of a step with memory,
    timing, GC control and a phase, a gc_paused block and a memory_scope (from a Python tracer,
    as a debugger would deliver it: a handler can then run at any line): whatever line it lands
    on, the KeyboardInterrupt reaches the caller, once, and GC is on, no row or phase is current,
    no window, pause or hook is left open, and the next row has no parent."""
    proc = run_script("""
        import gc, json, signal, sys, time
        import gnnmon
        from gnnmon.devices.host import HOST
        from gnnmon.record import gc_pause
        from gnnmon.record import state
        from gnnmon.record.gc_log import GC_LOG
        from gnnmon.record.interrupts import HELD

        PACKAGE = gnnmon.__file__.rsplit("/", 1)[0]

        @gnnmon.monitor_memory_device
        @gnnmon.cuda_timed
        @gnnmon.gc_controlled(collect="after")  # a deferred collection after the row, as in training
        def step():
            with gnnmon.phase("forward"):
                pass
            return 1

        def scenario():
            with gnnmon.gc_paused():
                step()
            with gnnmon.memory_scope(label="block"):
                pass

        def leftovers(baseline_users):
            probe = gnnmon.timed(label="probe")
            with probe as fields:
                pass
            return {"gc_enabled": gc.isenabled(), "row": repr(state.CURRENT_ROW.get()),
                    "phase": getattr(state.OPEN_PHASE.get(), "name", None),
                    "pauses": gc_pause.pauses(),
                    "gc_hook_users": GC_LOG._users - baseline_users, "held": HELD.depth,
                    "next_parent": fields["parent"]}

        results, caught = [], 0
        gnnmon.freeze_gc()  # torch's objects out of the way: each collection is quick
        with gnnmon.collect() as run:
            scenario()  # warm: first-use imports are not what is tested
            baseline = GC_LOG._users
            k = 0
            while True:
                seen = [0]

                def local(frame, event, arg):
                    if event == "line":
                        seen[0] += 1
                        if seen[0] == k + 1:  # raised here, at that line, unless held there
                            signal.raise_signal(signal.SIGINT)
                    return local

                def trace(frame, event, arg):
                    return local if frame.f_code.co_filename.startswith(PACKAGE) else None

                sys.settrace(trace)
                try:
                    scenario()
                except KeyboardInterrupt:
                    caught += 1
                finally:
                    sys.settrace(None)
                while True:  # an interrupt held at a line that no release follows: the probe's raises it
                    try:
                        state_now = leftovers(baseline)
                        break
                    except KeyboardInterrupt:
                        caught += 1
                results.append({"k": k, "planted": seen[0] > k, **state_now})
                if seen[0] <= k:
                    break
                k += 1
        print(json.dumps({"results": results, "caught": caught}))
    """, timeout=300)
    out = json.loads(proc.stdout)
    results = out["results"]
    assert len(results) > 100  # every line of the scenario was a landing point
    planted = sum(r["planted"] for r in results)
    # every one raised, once: where it lands held, by the release that ends the section
    assert planted == len(results) - 1 and out["caught"] == planted
    clean = {"gc_enabled": True, "row": "None", "phase": None, "pauses": 0, "gc_hook_users": 0, "held": 0,
             "next_parent": None}
    dirty = [r for r in results if {k: r[k] for k in clean} != clean]
    assert not dirty, dirty[:3]


# 4 -------------------------------------------------------------------------------------------------

def test_scopes_closed_out_of_order_leave_no_stale_current_row():
    @gnnmon.cuda_timed
    def step():
        return gnnmon.current_row().fields["parent"]

    with gnnmon.collect() as run:
        a = gnnmon.memory_scope(label="a")
        b = gnnmon.memory_scope(label="b")
        a.__enter__()
        fields_b = b.__enter__()
        a.__exit__(None, None, None)  # A first, B still open
        assert gnnmon.current_row().fields is fields_b
        b.__exit__(None, None, None)
        assert gnnmon.current_row() is None
        assert _OPEN_SCOPE.get() is None  # no closed scope left for the next one to stack on
        assert step() is None  # not a child of a closed scope
    rows = {r["label"]: r for r in run.records}
    assert rows["b"]["parent"] == "a#0" and rows["step"]["parent"] is None


def test_a_scope_closed_out_of_order_in_the_middle_hands_the_open_scope_below_back():
    """Three scopes, the middle one closed first: once the innermost closes, the outermost (still
    open) is the open scope again, and a scope stacked on it in its frame joins its row."""
    with gnnmon.collect() as run:
        a, b, c = (gnnmon.memory_scope(label=name) for name in "abc")
        a.__enter__()
        b.__enter__()
        c.__enter__()
        b.__exit__(None, None, None)
        c.__exit__(None, None, None)
        assert _OPEN_SCOPE.get() is a
        with gnnmon.timed(label="a"):  # stacked on a, same label and frame: one row with both
            pass
        a.__exit__(None, None, None)
        assert _OPEN_SCOPE.get() is None
    rows = [r for r in run.records if r["label"] == "a"]
    assert len(rows) == 1 and "wall_s" in rows[0] and "mem_peak_bytes" in rows[0]


# 5 -------------------------------------------------------------------------------------------------

def test_a_run_that_cannot_start_leaves_the_previous_file_untouched(tmp_path):
    path = tmp_path / "results.jsonl"
    with gnnmon.collect(path), gnnmon.timed(label="kept"):
        pass
    before = path.read_bytes()
    looped: dict = {}
    looped["self"] = looped
    with pytest.raises(ValueError, match="config cannot be stored as JSON"):
        gnnmon.collect(path, config={"loop": looped})
    assert path.read_bytes() == before
    # values JSON has no word for are stored as something readable, not refused
    with gnnmon.collect(path, config={"t": torch.arange(3), "nan": torch.tensor(float("nan")),
                                      "s": {float("inf"), 1.0}}) as run:
        pass
    assert gnnmon.load(path).manifest["config"] == {"t": [0, 1, 2], "nan": None, "s": [1.0, None]}
    assert run.complete
    # a start that fails after the file would have been opened (here: the manifest cannot be
    # written) leaves the previous file as it was, and no temporary file beside it
    before = path.read_bytes()
    original = storage.JsonlWriter.__init__

    def failing(self, *args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    storage.JsonlWriter.__init__ = failing
    try:
        with pytest.raises(OSError):
            gnnmon.collect(path).start()
    finally:
        storage.JsonlWriter.__init__ = original
    assert path.read_bytes() == before and not state.RUNS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl"]
    with pytest.raises(FileExistsError):
        gnnmon.collect(path, mode="x").start()
    assert path.read_bytes() == before and not state.RUNS


# 6 -------------------------------------------------------------------------------------------------

def test_out_of_file_descriptors_the_call_still_runs():
    proc = run_script("""
        import json, os, resource, warnings
        import gnnmon

        @gnnmon.monitor_memory_device
        @gnnmon.cuda_timed
        def step(x):
            return x + 1

        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        held = []
        try:
            while True:
                held.append(open(os.devnull))
        except OSError:
            pass
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = step(41)  # the first call: the memory measurement has files to open
        for f in held:
            f.close()
        row = gnnmon.default_run().records[-1]
        print(json.dumps({"result": result, "warnings": [str(w.message) for w in caught],
                          "wall_s": row["wall_s"], "notes": row["notes"]}))
    """)
    out = json.loads(proc.stdout)
    assert out["result"] == 42 and out["wall_s"] is not None  # the call ran, and was timed
    assert any("Too many open files" in n for n in out["notes"])
    assert len(out["warnings"]) == 1 and "memory measurement failed" in out["warnings"][0]


# 7 -------------------------------------------------------------------------------------------------

def test_a_full_disk_costs_the_rows_not_the_code_after_the_block(tmp_path, monkeypatch):
    path = tmp_path / "full.jsonl"
    writes = [0]
    original = storage.JsonlWriter.write_lines

    def filling(self, lines):
        writes[0] += 1
        if writes[0] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, lines)

    @gnnmon.cuda_timed
    def step(i):
        return i

    monkeypatch.setattr(storage.JsonlWriter, "write_lines", filling)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gnnmon.collect(path, flush_interval=0.001) as run:
            results = [step(i) for i in range(200)]
        after_the_block = True
    assert after_the_block and results == list(range(200))
    assert len(run.records) == 200  # every row, in memory
    mine = [w for w in caught if "gnnmon" in str(w.message)]
    assert len(mine) == 1 and "No space left" in str(mine[0].message)
    assert run.lines_lost > 0 and run.write_errors and run.complete
    assert gnnmon.load(path).complete is False  # the file says it did not end well: no end line
    assert not run.outlets.file.file or run.outlets.file.file.closed


# 8 -------------------------------------------------------------------------------------------------

def test_a_second_run_on_the_same_file_is_refused(tmp_path):
    path = tmp_path / "run.jsonl"

    @gnnmon.cuda_timed
    def step():
        return 1

    with gnnmon.collect(path) as outer:
        step()
        with pytest.raises(ValueError, match="already being written by an active gnnmon.collect"):
            gnnmon.collect(str(tmp_path / "." / "run.jsonl")).start()
        step()
    assert [r["index"] for r in gnnmon.load(path).records] == [0, 1] and outer.complete


# 9 -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b"hello world", b"[1, 2, 3]", b"\x89PNG\r\n\x1a\x00\xff", b'{"a": 1}'])
def test_a_file_that_is_not_gnnmons_gets_a_clear_error(tmp_path, content, capsys):
    path = tmp_path / "other.txt"
    path.write_bytes(content)  # one line, no final newline
    with pytest.raises(ReportFileError, match="not a gnnmon report"):
        gnnmon.load(path)
    assert main(["report", str(path)]) == 2
    assert "not a gnnmon report" in capsys.readouterr().err


def test_a_cut_off_gnnmon_manifest_is_still_a_cut_off_run(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b'{"type":"manifest","format":"gnnmon.jsonl","format_ver')
    with pytest.warns(RuntimeWarning, match="cut off"):
        run = gnnmon.load(path)
    assert run.records == []


def test_a_row_without_a_label_is_named_not_a_crash(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path):
        gnnmon.phase("step").__enter__().__exit__(None, None, None)
    lines = path.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if '"type":"row"' in line)
    broken = json.loads(lines[row])
    del broken["label"]
    lines[row] = json.dumps(broken)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReportFileError, match=f":{row + 1}: a row without its label"):
        gnnmon.load(path)
    assert main(["report", str(path)]) == 2
    with pytest.warns(RuntimeWarning, match="skipped a row"):
        assert gnnmon.load(path, strict=False).records == []
    with pytest.warns(RuntimeWarning, match="skipped a row"):
        assert main(["report", "--lenient", str(path)]) == 0


# 10 ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_sampling_interval_must_be_finite(bad):
    with pytest.raises(ValueError, match="finite"):
        gnnmon.collect(sample=bad)
    with pytest.raises(ValueError, match="finite"):
        gnnmon.sample_utilisation(bad)
    with pytest.raises(ValueError, match="finite"):
        gnnmon.monitor_memory_device(sample_interval=bad)
    with pytest.raises(ValueError, match="finite"):
        gnnmon.collect(flush_interval=bad)
    assert not state.RUNS


# 11 ------------------------------------------------------------------------------------------------

def test_a_partial_of_a_generator_function_is_refused_with_a_type_error():
    def batches(n):
        yield from range(n)

    with pytest.raises(TypeError, match="cannot decorate the generator function batches"):
        gnnmon.cuda_timed(functools.partial(batches, 3))
    with pytest.raises(TypeError, match="generator function batches"):
        gnnmon.monitor_memory_device(functools.partial(batches, n=3))


@pytest.mark.parametrize("decorator, scope", [(gnnmon.cuda_timed, "gnnmon.timed()"),
                                              (gnnmon.monitor_memory_device, "gnnmon.memory_scope()"),
                                              (gnnmon.gc_controlled, "gnnmon.gc_paused()"),
                                              (gnnmon.track_compile, None)])
def test_a_generator_or_a_coroutine_is_refused_naming_the_block_form_that_measures_it(decorator, scope):
    def batches():
        yield 1

    async def step():
        return 1

    with pytest.raises(TypeError) as gen:
        decorator(batches)
    with pytest.raises(TypeError) as coro:
        decorator(step)
    if scope is None:  # no block form: a synchronous function to decorate instead
        assert str(gen.value).endswith("Decorate the function that consumes it")
        assert str(coro.value).endswith("Decorate a synchronous function the coroutine calls instead")
    else:
        assert str(gen.value).endswith(f"Decorate the function that consumes it, or wrap each step in `with {scope}:`")
        assert str(coro.value).endswith(f"Use `with {scope}:` inside the coroutine instead")
    for block in {scope} - {None}:  # the form named is one users have
        name = block.removeprefix("gnnmon.").removesuffix("()")
        assert callable(getattr(gnnmon, name)), block



def test_phases_closed_out_of_order_hand_back_an_open_phase():
    with gnnmon.collect(), gnnmon.timed(label="step"):
        a, b = gnnmon.phase("a"), gnnmon.phase("b")
        a.__enter__()
        b.__enter__()
        a.__exit__(None, None, None)  # A first: B is still the current phase
        assert state.OPEN_PHASE.get().name == "b"
        b.__exit__(None, None, None)
        assert state.OPEN_PHASE.get() is None  # not the closed A
        with gnnmon.phase("c"), gnnmon.phase("c"):  # the same name nested, closed in order
            pass
        assert state.OPEN_PHASE.get() is None


def test_a_fork_while_the_writer_holds_the_file_does_not_hang_the_child(tmp_path):
    """The run's file lock held by another thread at the fork (the writer mid-write, planted by a
    thread that holds it): the child's fork handler lets go of the parent's file without waiting
    for that lock, which no thread of the child would ever release."""
    import os
    import signal
    import threading
    import time

    path = tmp_path / "held.jsonl"
    with gnnmon.collect(path) as run:
        writer_file = run.outlets.file.file
        held, done = threading.Event(), threading.Event()

        def hold_the_file() -> None:
            with writer_file._lock:
                held.set()
                done.wait()

        holder = threading.Thread(target=hold_the_file)
        holder.start()
        held.wait()
        try:
            pid = os.fork()
            if pid == 0:
                os._exit(0)  # the fork handlers have run by now
            deadline = time.monotonic() + 10
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    pytest.fail("the forked child hung in gnnmon's fork handler")
                time.sleep(0.01)
        finally:
            done.set()
            holder.join()
    assert gnnmon.load(path).complete  # the child closed its descriptor only: the parent's file ended cleanly
