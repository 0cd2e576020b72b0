"""The node-classification GCN of the seed memory study: two graph convolutions with ReLU and
dropout, then a linear head (GCNConv by default; GraphConv, the article's operator, as an option),
with optional activation checkpointing of each convolution; and the GraphSAGE of issue 42's forecast
study."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch_geometric.nn import GCNConv, GraphConv, SAGEConv

CONVS = {"gcn": GCNConv, "graphconv": GraphConv}


class GCN(torch.nn.Module):
    """``conv -> ReLU -> dropout`` twice, then ``Linear(hidden, classes)``.

    ``checkpoint=True`` recomputes each convolution's activations during backward instead of
    keeping them (``torch.utils.checkpoint``, non-reentrant); ``conv_calls`` counts convolution
    forwards, so a test or a study can see the recomputation happen."""

    def __init__(self, in_dim: int, hidden: int, classes: int, *, conv: str = "gcn",
                 dropout: float = 0.25, checkpoint: bool = False) -> None:
        super().__init__()
        if conv not in CONVS:
            raise ValueError(f"conv must be one of {sorted(CONVS)}, got {conv!r}")
        self.conv1 = CONVS[conv](in_dim, hidden)
        self.conv2 = CONVS[conv](hidden, hidden)
        self.head = torch.nn.Linear(hidden, classes)
        self.dropout = dropout
        self.checkpoint = checkpoint
        self.conv_calls = 0

    def _conv(self, conv: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        self.conv_calls += 1
        return F.relu(conv(x, edge_index))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for conv in (self.conv1, self.conv2):
            if self.checkpoint and self.training:
                x = checkpoint(self._conv, conv, x, edge_index, use_reentrant=False)
            else:
                x = self._conv(conv, x, edge_index)
            x = F.dropout(x, self.dropout, self.training)
        return self.head(x)


class SAGE(torch.nn.Module):
    """GraphSAGE ``in-hidden-hidden-classes``: two ``SAGEConv`` layers (mean aggregation) with ReLU,
    then a linear head; :meth:`encode` stops before the head (node embeddings for link prediction)."""

    def __init__(self, in_dim: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.conv1 = SAGEConv(in_dim, hidden)
        self.conv2 = SAGEConv(hidden, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def encode(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv2(F.relu(self.conv1(x, edge_index)), edge_index))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.head(self.encode(x, edge_index))
