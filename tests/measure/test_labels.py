"""Row labels when none is given (``@cuda_timed`` bare): what a user wrote, never a repr."""

from __future__ import annotations

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed


def test_default_labels_read_as_a_user_wrote_them():
    """A step defined inside a function is labelled by its own name, not ``main.<locals>.…``; a
    module instance by its class, never its multi-line repr; a method keeps its class."""
    import functools

    import torch

    def main():
        @cuda_timed
        def train_step():
            return 1

        return train_step

    class Trainer:
        @cuda_timed
        def step(self):
            return 2

    def scaled(x, k):
        return x * k

    with gnnmon.collect() as run:
        main()()
        cuda_timed(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))(torch.ones(2))
        Trainer().step()
        cuda_timed(functools.partial(scaled, k=2))(3)
    assert [r["label"] for r in run.records] == ["train_step", "Sequential", "Trainer.step", "scaled"]


def test_a_decorated_method_inherited_by_subclasses_is_labelled_by_each_class():
    """Two model variants sharing their base's decorated ``forward``: one label each, counted
    apart; the base keeps its own; an explicit label is kept for all."""
    import torch

    class GNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @gnnmon.cuda_timed
        def forward(self, x):
            return self.lin(x)

        @gnnmon.cuda_timed(label="step")
        def step(self, x):
            return self.lin(x)

    class GAT(GNN):
        pass

    class GCN(GNN):
        pass

    x = torch.ones(2, 4)
    with gnnmon.collect() as run:
        for model in (GNN(), GAT(), GAT(), GCN()):
            model(x)
            model.step(x)
    assert [(r["label"], r["index"]) for r in run.records] == [
        ("GNN.forward", 0), ("step", 0), ("GAT.forward", 0), ("step", 1), ("GAT.forward", 1), ("step", 2),
        ("GCN.forward", 0), ("step", 3)]


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def triple(x: torch.Tensor) -> torch.Tensor:
    return x * 3


class Solver:
    @staticmethod
    def halve(x: torch.Tensor) -> torch.Tensor:
        return x / 2


@pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:DeprecationWarning")
def test_a_label_is_the_users_function_whatever_wraps_it():
    """Functions scripted (``torch.jit.script``), traced, compiled and put in ``functools.partial``
    (nested, and around a scripted one): each call's row is labelled by the user's function's own
    qualified name, so two scripted functions are two labels; a scripted or compiled module by its
    class."""
    import functools

    class Net(torch.nn.Module):
        def forward(self, x):
            return x + 1

    x = torch.ones(2)
    wrapped = [
        (torch.jit.script(double), "double"),
        (torch.jit.script(triple), "triple"),
        (torch.jit.script(Solver.halve), "Solver.halve"),
        (torch.jit.trace(double, x), "double"),
        (torch.compile(triple, backend="eager"), "triple"),
        (torch.compile(Solver.halve, backend="eager"), "Solver.halve"),
        (functools.partial(torch.jit.script(triple)), "triple"),
        (functools.partial(functools.partial(Solver.halve)), "Solver.halve"),
        (torch.jit.script(Net()), "Net"),
        (torch.compile(Net(), backend="eager"), "Net"),
    ]
    with gnnmon.collect() as run:
        for fn, _ in wrapped:
            assert torch.equal(cuda_timed(fn)(x), fn(x))
    assert [r["label"] for r in run.records] == [label for _, label in wrapped]


def test_a_scope_takes_its_label_by_position_as_a_phase_takes_its_name():
    """``timed("eval")`` and ``memory_scope("load")`` label their rows as ``label=`` does; a label
    given both ways, or one that is not a string, is refused naming the scope (the first by Python itself)."""
    with gnnmon.collect() as run:
        with gnnmon.timed("eval"):
            pass
        with gnnmon.memory_scope("load"):
            pass
        with gnnmon.timed(label="kw"):
            pass
    assert [r["label"] for r in run.records] == ["eval", "load", "kw"]
    assert run.records[0]["wall_s"] is not None and run.records[1]["mem_peak_bytes"] is not None
    with pytest.raises(TypeError, match=r"timed\(\) got multiple values for argument 'label'"):
        gnnmon.timed("a", label="b")
    with pytest.raises(TypeError, match=r"memory_scope\(\): label must be a string, not int"):
        gnnmon.memory_scope(3)
    with pytest.raises(TypeError, match=r"timed\(\) measures a block .* decorated with @cuda_timed"):
        gnnmon.timed(lambda: None)  # as @gnnmon.timed over a function reads
    with pytest.raises(TypeError, match=r"decorated with @monitor_memory_device"):
        gnnmon.memory_scope(print)
