"""The timeline's sampler, seen from the training process: :func:`start_sampler` starts the loop of
:mod:`gnnmon.timeline.agent` in a process of its own and hands what it sends to a sink.

Why a process: a sampler thread shares the GIL with the step. A pure-Python step, or a gen-2
collection (130-330 ms in the seed PNA study), stalls it exactly when its reading matters, and
every file or NVML read it makes waits up to a switch interval to get the GIL back. The process
keeps its grid whatever the training process does; what it sends waits in the pipe until a reader
thread here takes it, with the time it was taken at.

* Started with ``subprocess`` (``sys.executable -c``), never ``fork``: forking a process that
  holds a CUDA context is unsafe. The child imports only this package's timeline and device
  readers (no torch, no ``gnnmon/__init__``): about 0.1 s and 20 MB.
* Messages: JSON lines on the child's stdout, read by a thread here (``gnnmon-sampler``); commands
  on its stdin. It exits after ``stop``, at the end of stdin (this process closed it or died: a
  forked DataLoader worker may still hold the pipe open), on Linux by ``PR_SET_PDEATHSIG`` when
  started from the main thread, and when it finds, every 0.25 s, that its parent is no longer
  the training process: no orphan outlives a ``SIGKILL`` of the training process by more than
  that.
* Where the process cannot be started (or says it failed), the same loop runs on a thread here,
  and :attr:`Sampler.mode` / :attr:`Sampler.why` say so (the run puts them in its manifest).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnmon.devices.children import OWN
from gnnmon.timeline.agent import Agent

DEFAULT_INTERVAL = 0.5
STARTUP_TIMEOUT_S = 20.0
"""Seconds the training process waits for the sampler process's ``hello`` before falling back."""

Sink = Callable[[dict[str, Any]], None]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

BOOT = """
import sys, types
root, settings = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
for name in ("gnnmon", "gnnmon.devices", "gnnmon.timeline"):  # skip their __init__ (torch)
    module = types.ModuleType(name)
    module.__path__ = [root + "/" + name.replace(".", "/")]
    sys.modules[name] = module
from gnnmon.timeline.agent import main
main(settings)
"""


class Sampler:
    """The running sampler: :meth:`now` (a sample and every counter's next step, waited for),
    :meth:`stop`. ``hello`` says what the sampler can read; ``bye`` its own cost, after stop."""

    mode = "thread"

    def __init__(self, settings: dict[str, Any], sink: Sink) -> None:
        self.settings = settings
        self.interval = float(settings["interval"])
        self.sink = sink
        self.why = ""
        self.hello: dict[str, Any] = {}
        self.bye: dict[str, Any] = {}
        self.errors: list[str] = []
        self._replies: dict[str, threading.Event] = {}
        self._ids = 0
        self._lock = threading.RLock()
        self._hello = threading.Event()
        self._bye = threading.Event()
        self._reader: threading.Thread | None = None

    # -- messages in ----------------------------------------------------------------------------
    def _take(self, message: dict[str, Any]) -> None:
        kind = message.pop("m", None)
        if kind in ("sample", "point"):
            try:
                self.sink(message | {"type": kind})
            except Exception as exc:  # noqa: BLE001 - keep reading; say what failed
                if len(self.errors) < 10:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
        elif kind == "reply":
            event = self._replies.pop(str(message.get("id")), None)
            if event is not None:
                event.set()
        elif kind == "hello":
            self.hello = message
            self._hello.set()
        elif kind == "bye":
            self.bye = message
            self._bye.set()
            for event in list(self._replies.values()):
                event.set()
        elif kind == "failed":
            self.errors.append(str(message.get("error")))
            self._hello.set()

    # -- commands out ---------------------------------------------------------------------------
    def _send(self, line: str) -> bool:
        raise NotImplementedError

    def go(self) -> None:
        """Start sampling on the grid (after :attr:`hello` has been read)."""
        self._send("go")

    def now(self, timeout: float = 3.0) -> bool:
        """A sample now and, for every counter, its next step: waits until they have reached the
        sink (at most ``timeout`` s; on an H100 up to one 0.1 s step of the energy counter).
        False if the sampler did not answer in time."""
        with self._lock:
            self._ids += 1
            ident = str(self._ids)
            event = self._replies[ident] = threading.Event()
        if not self._send(f"now {ident}"):
            return False
        return event.wait(timeout)

    def stop(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<gnnmon Sampler {self.mode} every {self.interval:g}s>"


class ProcessSampler(Sampler):
    """The loop in a process of its own (see the module doc)."""

    mode = "process"

    def __init__(self, settings: dict[str, Any], sink: Sink) -> None:
        super().__init__(settings, sink)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BOOT, _PACKAGE_ROOT,
             json.dumps(settings | {"mode": "process",
                                    "main_thread": threading.current_thread() is threading.main_thread()})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,  # stderr: this process's (a crash shows)
            close_fds=True, start_new_session=False)
        OWN.add(self.proc.pid)  # a child of this process, but not a worker: host memory leaves it out
        self._reader = threading.Thread(target=self._read, name="gnnmon-sampler", daemon=True)
        self._reader.start()
        if not self._hello.wait(STARTUP_TIMEOUT_S) or not self.hello:
            why = "; ".join(self.errors) or f"no answer in {STARTUP_TIMEOUT_S:g} s"
            self.stop()
            raise RuntimeError(f"the sampler process did not start: {why}")

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        for line in stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            self._take(message)
        self._hello.set()  # the process ended: nobody waits for a hello or a bye that will not come
        self._bye.set()
        for event in list(self._replies.values()):
            event.set()

    def _send(self, line: str) -> bool:
        stdin = self.proc.stdin
        try:
            assert stdin is not None
            stdin.write(line.encode() + b"\n")
            stdin.flush()
            return True
        except (OSError, ValueError):  # the process is gone (BrokenPipe) or stdin closed
            return False

    def stop(self, timeout: float = 3.0) -> None:
        """``stop``, then wait for the last sample, the counters' next steps and ``bye``; the
        process is waited for (killed after ``timeout`` s) and the reader thread joined."""
        if self.proc.poll() is None and self._send("stop"):
            self._bye.wait(timeout)
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        OWN.discard(self.proc.pid)


class ThreadSampler(Sampler):
    """The same loop on a thread of this process (shares the GIL with the step: a busy loop or a
    GC pause stalls it). Commands through an ``os.pipe``."""

    mode = "thread"

    def __init__(self, settings: dict[str, Any], sink: Sink, why: str = "") -> None:
        super().__init__(settings, sink)
        self.why = why
        self._agent = Agent(settings | {"mode": "thread"})
        self._read_fd, self._write_fd = os.pipe()
        self._reader = threading.Thread(target=self._serve, name="gnnmon-sampler", daemon=True)
        self._reader.start()
        self._hello.wait()

    def _serve(self) -> None:
        try:
            self._agent.serve(self._emit, self._read_fd)
        finally:
            self._agent.nvml.close()
            os.close(self._read_fd)

    def _emit(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            self._take(message)

    def _send(self, line: str) -> bool:
        try:
            os.write(self._write_fd, line.encode() + b"\n")
            return True
        except OSError:
            return False

    def stop(self, timeout: float = 3.0) -> None:
        if self._reader is None:
            return
        self._send("stop")
        self._reader.join(timeout + 2.0)
        if self._reader.is_alive():  # stuck in a read: closing its pipe ends the loop
            os.close(self._write_fd)
            self._reader.join()
        else:
            os.close(self._write_fd)
        self._reader = None


def start_sampler(settings: dict[str, Any], sink: Sink, mode: str = "process") -> Sampler:
    """A sampler for ``settings`` (see :class:`gnnmon.timeline.agent.Agent`), ``pid`` filled in,
    in a process (``mode="process"``; a thread where that fails, saying why) or on a thread."""
    if mode not in ("process", "thread"):
        raise ValueError(f"sampler must be 'process' or 'thread', got {mode!r}")
    settings = {"pid": os.getpid()} | settings
    if mode == "process":
        started = time.perf_counter()
        try:
            sampler: Sampler = ProcessSampler(settings, sink)
            sampler.hello["startup_s"] = time.perf_counter() - started
            return sampler
        except Exception as exc:  # noqa: BLE001 - OSError, a sandbox without fork/exec, a failed child
            return ThreadSampler(settings, sink, why=f"no sampler process ({type(exc).__name__}: {exc})")
    return ThreadSampler(settings, sink, why="asked for a thread")
