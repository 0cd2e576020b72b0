"""The hot path: measurements that run inside the user's step (memory, timing and phases, GC
control, graph shape, what torch.compile did) and the one helper that makes decorators and
scopes of them.

May import: ``gnnmon.record`` (rows, shared state), ``gnnmon.devices``, and the root modules."""
