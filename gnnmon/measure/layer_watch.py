"""Per-layer cost inside a step, opt-in: ``gnnmon.watch_layers(model, every=1)``.

The layers watched are every PyG ``MessagePassing`` module (found by its message hooks: gnnmon
never imports PyG) and every other direct child of the model; a child that holds message passing
(a ``ModuleList`` of convolutions, a block) is opened so that its parts are watched instead, so
layers never nest. A ``DistributedDataParallel`` or ``DataParallel`` wrapper is seen through.

For each layer, on the row of the step that runs it (fields ``layer_<name>_<figure>``, ``<name>``
the qualified name with dots as underscores; summed over calls in one row, peaks the largest):

* ``forward_s`` / ``backward_s``: device time between events on an accelerator, host time on the
  CPU. The backward starts when the gradient of the layer's output reaches it and ends when the
  gradient has left it: its inputs' gradients are complete and its parameters' accumulated;
* ``peak_delta_bytes`` / ``backward_peak_delta_bytes``: the highest memory above the layer's
  start during its forward and its backward (the device's allocator; the CPU: exact RSS windows);
* ``saved_bytes``: tensors autograd saved for backward during the forward
  (``saved_tensors_hooks``; distinct storages, the layer's parameters left out);
* ``message_bytes`` (message passing): the message tensor, edges × features, summed over
  ``message()`` calls; absent where a fused ``message_and_aggregate`` ran instead;
* ``output_bytes``: the layer's output tensors.

``every=N`` watches the rows whose ``index`` is a multiple of N; on other steps each hook returns
at once. A forward outside any row is not watched (there is no row to hold its figures). The
figures are kept in a small record per watched row and written into the row when the run
finishes it, off the step's path; device events are read then.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from gnnmon.errors import raised_by_handler
from gnnmon.measure.layer_record import BackwardSpan, LayerStats, StepRecord
from gnnmon.measure.timing import EventSpan
from gnnmon.record.current import filling_row
from gnnmon.record.row import Row


def is_message_passing(module: nn.Module) -> bool:
    """A PyG ``MessagePassing`` layer (by its hooks, so PyG need not be imported)."""
    return hasattr(module, "register_message_forward_hook") and hasattr(module, "propagate")


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a ``DistributedDataParallel`` / ``DataParallel`` wrapper."""
    while type(model).__name__ in ("DistributedDataParallel", "DataParallel") and hasattr(model, "module"):
        model = model.module  # type: ignore[assignment]
    return model


def find_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(qualified name, module) of the layers :func:`watch_layers` watches, in definition order."""
    root = unwrap(model)
    if is_message_passing(root):
        return [("", root)]
    found: list[tuple[str, nn.Module]] = []

    def visit(prefix: str, module: nn.Module) -> None:
        for name, child in module.named_children():
            qualified = prefix + name
            if is_message_passing(child):
                found.append((qualified, child))
            elif isinstance(child, (nn.ModuleList, nn.ModuleDict)) or any(
                    is_message_passing(m) for m in child.modules()):
                visit(qualified + ".", child)
            else:
                found.append((qualified, child))

    visit("", root)
    return found


def field_name(qualified: str) -> str:
    """``convs.0`` -> ``convs_0`` (the ``<name>`` of ``layer_<name>_<figure>``)."""
    return qualified.replace(".", "_") or "model"


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a module's output or arguments: a tensor, or those one level inside a tuple,
    list or dict."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (tuple, list)):
        return []
    return [v for v in value if isinstance(v, torch.Tensor)]


def _nbytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class _Layer:
    __slots__ = ("index", "name", "field", "module", "params")

    def __init__(self, index: int, name: str, module: nn.Module) -> None:
        self.index, self.name, self.module = index, name, module
        self.field = field_name(name)
        self.params = [p for p in module.parameters() if p.requires_grad]


class LayerWatch:
    """Hooks on a model's layers that put each layer's figures on the step's row; made by
    :func:`watch_layers`. A context manager; :meth:`remove` takes the hooks off."""

    def __init__(self, model: nn.Module, every: int = 1, *, memory: bool = True, saved: bool = True) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"watch_layers: model must be a torch.nn.Module, got {type(model).__name__}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"watch_layers: every must be an int >= 1 (watch one step in every), got {every!r}")
        self.every = every
        self.memory, self.saved = bool(memory), bool(saved)
        self.layers = [_Layer(i, name, module) for i, (name, module) in enumerate(find_layers(model))]
        if not self.layers:
            raise ValueError(f"watch_layers: {type(model).__name__} has no child modules to watch")
        self.step: StepRecord | None = None
        self._row: Row | None = None
        self._current: _Layer | None = None
        self._starts: dict[int, Any] = {}  # layer -> its forward's start: an event, or perf_counter_ns
        self._saved_seen: set[int] = set()
        self._param_ptrs: set[int] = set()
        self._saved_ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._pushed = False
        self._handles: list[Any] = []
        self.broken: Exception | None = None
        guard = self._guarded
        root = unwrap(model)
        self._handles.append(root.register_forward_pre_hook(guard(self._model_pre)))
        for layer in self.layers:
            module = layer.module
            self._handles.append(module.register_forward_pre_hook(guard(self._pre_hook(layer))))
            self._handles.append(module.register_forward_hook(guard(self._post_hook(layer)), always_call=True))
            if is_message_passing(module):
                passing: Any = module  # PyG's MessagePassing
                self._handles.append(passing.register_message_forward_hook(guard(self._message_hook(layer))))
            for param in layer.params:
                self._handles.append(param.register_post_accumulate_grad_hook(guard(self._param_hook(layer))))

    # -- a hook that fails stops the watch, never the model -------------------------------
    def _guarded(self, hook: Any) -> Any:
        def guarded(*args: Any) -> None:
            if self.broken is not None:
                return
            try:
                hook(*args)
            except Exception as exc:  # the user's step must not fail for a figure
                if raised_by_handler(exc):  # a step timeout from a signal handler: the caller's
                    raise
                self._break(exc)

        return guarded

    def _break(self, exc: Exception) -> None:
        """Stop watching (the hooks stay, and return at once): one warning, a note on the row."""
        self.broken = exc
        step, self.step = self.step, None
        self._pop_saved()
        if step is not None and step.row is not None:
            step.row.note(f"watch_layers stopped: {exc!r}; layer figures of this row may be incomplete")
        warnings.warn(f"gnnmon.watch_layers stopped watching after an error in its hooks: {exc!r}; the model "
                      "runs on, without layer figures", RuntimeWarning, 2)

    # -- which rows ---------------------------------------------------------------------
    def _model_pre(self, module: nn.Module, args: Any) -> None:
        row = filling_row()
        if row is self._row:
            return
        self._row = row
        self.step = None
        if row is None or row.fields["index"] % self.every:
            return
        step = self.step = StepRecord(row, [layer.field for layer in self.layers], self.memory, module)
        row.defer(step)
        row.after_close(step.finish)

    def _live(self) -> StepRecord | None:
        step = self.step
        if step is None:
            return None
        if step.closed:
            self.step = self._row = None
            return None
        return step

    # -- forward --------------------------------------------------------------------------
    def _pre_hook(self, layer: _Layer) -> Any:
        index = layer.index

        def pre(module: nn.Module, args: Any) -> None:
            step = self._live()
            if step is None:
                return
            step.open_forwards[index] = step.memory.open() if step.memory is not None else None
            if self.saved:
                self._current = layer
                self._saved_seen = set()
                self._param_ptrs = {p.untyped_storage().data_ptr() for p in layer.params}
                if not self._pushed:
                    self._saved_ctx.__enter__()
                    self._pushed = True
            step.stats[index].calls += 1
            self._starts[index] = step.backend.record_event() if step.events else time.perf_counter_ns()

        return pre

    def _post_hook(self, layer: _Layer) -> Any:
        index = layer.index

        def post(module: nn.Module, args: Any, output: Any) -> None:
            step = self.step
            if step is None or index not in step.open_forwards:
                return
            t1 = time.perf_counter_ns()
            stats = step.stats[index]
            start = self._starts.pop(index, None)
            if step.events:
                end = step.backend.record_event()
                if start is not None:
                    stats.spans.append(EventSpan(start, end, stats.prefix + "forward_s", True, step.backend))
            elif start is not None:
                stats.add("forward_s", (t1 - start) / 1e9)
            window = step.open_forwards.pop(index)
            if window is not None:
                start, peak = step.memory.close(window)  # type: ignore[union-attr]
                stats.peak("peak_delta_bytes", peak - start)
            self._pop_saved()
            if output is None or step.closed:  # the forward raised
                return
            outputs = _tensors(output)
            stats.add("output_bytes", _nbytes(outputs))
            if self.saved and stats.saved_bytes is None:
                stats.saved_bytes = 0
            if torch.is_grad_enabled():
                self._watch_backward(step, stats, layer, args, outputs)

        return post

    def _message_hook(self, layer: _Layer) -> Any:
        index = layer.index

        def message(module: nn.Module, inputs: Any, output: Any) -> None:
            step = self.step
            if step is not None and index in step.open_forwards:
                step.stats[index].add("message_bytes", _nbytes(_tensors(output)))

        return message

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        layer, step = self._current, self.step
        if layer is not None and step is not None:
            try:
                storage = tensor.untyped_storage()
                ptr = storage.data_ptr()
                if ptr not in self._saved_seen and ptr not in self._param_ptrs:
                    self._saved_seen.add(ptr)
                    step.stats[layer.index].add("saved_bytes", storage.nbytes())
            except Exception as exc:  # a tensor without a storage (sparse, nested): not counted
                if raised_by_handler(exc):
                    raise
                if step.row is not None:
                    step.row.note("layer saved_bytes leave out saved tensors without a storage (sparse, nested)")
        return tensor

    def _pop_saved(self) -> None:
        """Take the saved-tensor hook off autograd's stack, if this watch put it there."""
        if self._pushed:
            self._saved_ctx.__exit__(None, None, None)
            self._pushed = False
            self._current = None

    # -- backward -------------------------------------------------------------------------
    def _watch_backward(self, step: StepRecord, stats: LayerStats, layer: _Layer, args: Any,
                        outputs: list[torch.Tensor]) -> None:
        out_node = next((t.grad_fn for t in outputs if t.grad_fn is not None), None)
        if out_node is None:
            return
        in_nodes = {id(t.grad_fn): t.grad_fn for t in _tensors(args) if t.grad_fn is not None}
        backward = BackwardSpan(stats, step, len(in_nodes) + len(layer.params))
        if not backward.pending:
            return
        with step._lock:
            if step.closed:
                return
            step.backwards.append(backward)
        begin, done = self._guarded(backward.begin), self._guarded(backward.one_done)
        out_node.register_prehook(lambda grads: begin())
        for node in in_nodes.values():
            node.register_prehook(lambda grads: done())

    def _param_hook(self, layer: _Layer) -> Any:
        def done(param: torch.Tensor) -> None:
            step = self.step
            if step is None:
                return
            for backward in step.backwards:
                if backward.stats is step.stats[layer.index]:
                    backward.one_done()

        return done

    # -- handle ---------------------------------------------------------------------------
    def remove(self) -> None:
        """Take every hook off (the row being filled keeps what was measured)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._pop_saved()

    def __enter__(self) -> LayerWatch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    @property
    def names(self) -> list[str]:
        """The layers watched, by qualified name."""
        return [layer.name for layer in self.layers]


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def watch_layers(model: nn.Module, every: int = 1, *, memory: bool = True, saved: bool = True) -> LayerWatch:
    """Put each layer's forward and backward time, peak memory, saved and message bytes on the
    rows of the steps that run ``model`` (see :mod:`gnnmon.measure.layer_watch`). ``every``: watch
    one step in N (rows whose index is a multiple of N); ``memory``/``saved``: leave those out
    to cut the cost. Use as ``with gnnmon.watch_layers(model):`` or keep the handle and call
    ``remove()``."""
    return LayerWatch(model, every, memory=memory, saved=saved)
