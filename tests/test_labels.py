"""Row labels when none is given (``@cuda_timed`` bare): what a user wrote, never a repr."""

from __future__ import annotations

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
