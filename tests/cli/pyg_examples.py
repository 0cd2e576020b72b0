"""PyG's own example loops (``examples/gcn.py``, ``examples/reddit.py``, ``examples/mutag_gin.py`` as
PyG 2.8 writes them), on small synthetic stand-ins generated here (no download), each twice: as
PyG writes it (what ``gnnmon run`` runs unmodified) and decorated as the README teaches (what
``collect`` records). The two differ by the decorators, the phases and ``watch_loader`` alone.

Each plants a cause that takes most of its run, so that the diagnosis names it in both and its
share stands above the machine's noise: the GCN's every 10th training forward waits 0.4 s (a
periodic read or lock: its CPU time does not grow, so with the load not sampled the diagnosis names
it an off-CPU wait, "waiting for a core ... or on I/O, a lock or a sleep", whatever the machine's
own load; CPU work planted instead would read as slow steps on a quiet machine and as a busy
machine on a loaded one), the
GraphSAGE loader's transform sleeps 0.1 s a batch and the GIN dataset's items 3 ms each (the wait
for data). GraphSAGE runs PyG's ``NeighborLoader`` with gnnmon's pure-PyTorch sampler (pyg-lib is
not installed here), the one gnnmon import a script may make and still be run unmodified."""

from __future__ import annotations

COMMON = """
import sys, time
import torch
import torch.nn.functional as F
"""

GCN_DATA = """
from torch_geometric.data import Data

torch.manual_seed(0)                                     # a stand-in for Planetoid's Cora: 2,708 nodes,
N, E, FEATS, CLASSES = 2708, 10556, 128, 7               # 10,556 edges, 7 classes (128 features, not 1,433),
data = Data(x=torch.rand(N, FEATS), edge_index=torch.randint(0, N, (2, E)), y=torch.randint(0, CLASSES, (N,)))
data.train_mask = torch.zeros(N, dtype=torch.bool)       # 140 train nodes
data.train_mask[:140] = True
data.test_mask = torch.zeros(N, dtype=torch.bool)
data.test_mask[-1000:] = True
EPOCHS, EVERY, SLOW_S = int(sys.argv[1]), 10, 0.4      # planted: every 10th training forward waits 0.4 s
"""

GCN_MODEL = """
from torch_geometric.nn import GCNConv


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels, normalize=True)
        self.conv2 = GCNConv(hidden_channels, out_channels, normalize=True)

    def forward(self, x, edge_index):
        if self.training:
            self.calls = getattr(self, "calls", 0) + 1
            if self.calls % EVERY == 0:
                time.sleep(SLOW_S)                           # stands in for a periodic wait (a read, a lock)
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, edge_index).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, edge_index)


model = GCN(FEATS, 16, CLASSES)
optimizer = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=5e-4),
                              dict(params=model.conv2.parameters(), weight_decay=0)], lr=0.01)
"""

GCN_PLAIN = COMMON + GCN_DATA + GCN_MODEL + """

def train():
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    return float(loss)


@torch.no_grad()
def test():
    model.eval()
    pred = model(data.x, data.edge_index).argmax(dim=-1)
    return int((pred[data.test_mask] == data.y[data.test_mask]).sum()) / int(data.test_mask.sum())


for epoch in range(1, EPOCHS + 1):
    loss = train()
    acc = test()
print(f"GCN trained: loss {loss:.3f}, test {acc:.3f}")
"""

GCN_DECORATED = COMMON + GCN_DATA + GCN_MODEL + """
import gnnmon
from gnnmon import phase


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
def train():
    model.train()
    optimizer.zero_grad()
    with phase("forward"):
        out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        optimizer.step()
    return float(loss)


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
@torch.no_grad()
def test():
    model.eval()
    with phase("forward"):
        pred = model(data.x, data.edge_index).argmax(dim=-1)
    return int((pred[data.test_mask] == data.y[data.test_mask]).sum()) / int(data.test_mask.sum())


with gnnmon.collect(sys.argv[2]):
    for epoch in range(1, EPOCHS + 1):
        loss = train()
        acc = test()
print(f"GCN trained: loss {loss:.3f}, test {acc:.3f}")
"""

SAGE_DATA = """
from torch_geometric.data import Data
from gnnmon.integrations.pyg_sampler import neighbor_loader   # PyG's NeighborLoader (pyg-lib is not here)

torch.manual_seed(0)                                     # a stand-in for Reddit, smaller
N, E, FEATS, CLASSES = 20000, 200000, 64, 8
data = Data(x=torch.rand(N, FEATS), edge_index=torch.randint(0, N, (2, E)), y=torch.randint(0, CLASSES, (N,)))
data.train_mask = torch.rand(N) < 0.25
EPOCHS, READ_S = int(sys.argv[1]), 0.1                   # planted: each batch's transform reads for READ_S


def read_features(batch):                                 # stands in for features read from disk
    time.sleep(READ_S)
    return batch


train_loader = neighbor_loader(data, input_nodes=data.train_mask, num_neighbors=[10, 5], shuffle=True,
                               batch_size=256, transform=read_features)
"""

SAGE_MODEL = """
from torch_geometric.nn import SAGEConv


class SAGE(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.convs = torch.nn.ModuleList([SAGEConv(in_channels, hidden_channels),
                                          SAGEConv(hidden_channels, out_channels)])

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(x.relu(), p=0.5, training=self.training)
        return x


model = SAGE(FEATS, 64, CLASSES)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
"""

SAGE_PLAIN = COMMON + SAGE_DATA + SAGE_MODEL + """

def train(epoch):
    model.train()
    total_loss = total_examples = 0
    for batch in train_loader:
        optimizer.zero_grad()
        y = batch.y[:batch.batch_size]
        y_hat = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(y_hat, y)
        loss.backward()
        optimizer.step()
        total_loss += float(loss) * batch.batch_size
        total_examples += batch.batch_size
    return total_loss / total_examples


for epoch in range(1, EPOCHS + 1):
    loss = train(epoch)
print(f"SAGE trained: loss {loss:.3f}")
"""

SAGE_DECORATED = COMMON + SAGE_DATA + SAGE_MODEL + """
import gnnmon
from gnnmon import phase


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
def train_step(batch):
    optimizer.zero_grad()
    y = batch.y[:batch.batch_size]
    with phase("forward"):
        y_hat = model(batch.x, batch.edge_index)[:batch.batch_size]
    loss = F.cross_entropy(y_hat, y)
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        optimizer.step()
    return loss


def train(epoch):
    model.train()
    total_loss = total_examples = 0
    for batch in gnnmon.watch_loader(train_loader):
        loss = train_step(batch)
        total_loss += float(loss) * batch.batch_size
        total_examples += batch.batch_size
    return total_loss / total_examples


with gnnmon.collect(sys.argv[2]):
    for epoch in range(1, EPOCHS + 1):
        loss = train(epoch)
print(f"SAGE trained: loss {loss:.3f}")
"""

GIN_DATA = """
from torch.utils.data import Dataset as TorchDataset
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

torch.manual_seed(0)                                      # a stand-in for TUDataset's MUTAG: 188 graphs,
GRAPHS = []                                               # about 18 nodes and 40 directed edges each,
for i in range(188):                                      # 7 node features, 2 classes
    n = int(torch.randint(10, 28, ()))
    GRAPHS.append(Data(x=torch.rand(n, 7), edge_index=torch.randint(0, n, (2, 2 * n + 4)), y=torch.tensor([i % 2])))
EPOCHS, READ_S = int(sys.argv[1]), 0.003                  # planted: each graph read for READ_S


class Molecules(TorchDataset):                           # stands in for graphs read from disk
    def __len__(self):
        return len(GRAPHS)

    def __getitem__(self, i):
        time.sleep(READ_S)
        return GRAPHS[i]


train_loader = DataLoader(Molecules(), batch_size=32, shuffle=True)
"""

GIN_MODEL = """
from torch_geometric.nn import MLP, GINConv, global_add_pool


class GIN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        for _ in range(num_layers):
            mlp = MLP([in_channels, hidden_channels, hidden_channels])
            self.convs.append(GINConv(nn=mlp, train_eps=False))
            in_channels = hidden_channels
        self.mlp = MLP([hidden_channels, hidden_channels, out_channels], norm=None, dropout=0.5)

    def forward(self, x, edge_index, batch, batch_size):
        for conv in self.convs:
            x = conv(x, edge_index).relu()
        x = global_add_pool(x, batch, size=batch_size)
        return self.mlp(x)


model = GIN(7, 32, 2, 5)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
"""

GIN_PLAIN = COMMON + GIN_DATA + GIN_MODEL + """

def train():
    model.train()
    total_loss = 0
    for data in train_loader:
        optimizer.zero_grad()
        out = model(data.x, data.edge_index, data.batch, data.batch_size)
        loss = F.cross_entropy(out, data.y)
        loss.backward()
        optimizer.step()
        total_loss += float(loss) * data.num_graphs
    return total_loss / len(train_loader.dataset)


for epoch in range(1, EPOCHS + 1):
    loss = train()
print(f"GIN trained: loss {loss:.3f}")
"""

GIN_DECORATED = COMMON + GIN_DATA + GIN_MODEL + """
import gnnmon
from gnnmon import phase


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
def train_step(data):
    optimizer.zero_grad()
    with phase("forward"):
        out = model(data.x, data.edge_index, data.batch, data.batch_size)
    loss = F.cross_entropy(out, data.y)
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        optimizer.step()
    return loss


def train():
    model.train()
    total_loss = 0
    for data in gnnmon.watch_loader(train_loader):
        loss = train_step(data)
        total_loss += float(loss) * data.num_graphs
    return total_loss / len(train_loader.dataset)


with gnnmon.collect(sys.argv[2]):
    for epoch in range(1, EPOCHS + 1):
        loss = train()
print(f"GIN trained: loss {loss:.3f}")
"""

EXAMPLES = {"gcn": (GCN_PLAIN, GCN_DECORATED), "sage": (SAGE_PLAIN, SAGE_DECORATED), "gin": (GIN_PLAIN, GIN_DECORATED)}
"""Each example's two forms: (as PyG writes it, decorated)."""
