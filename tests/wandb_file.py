"""Reading an offline W&B run back from its ``.wandb`` file: a LevelDB-style log of protobuf
records (W&B's own reader is not shipped in recent wheels), enough for the tests to compare what
the sink logged with the run's rows."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7  # checksum (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[bytes]:
    """The file's records, their pieces joined across blocks."""
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run file (starts {data[:4]!r})")
    out: list[bytes] = []
    pos, pieces = 7, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos: pos + HEADER])
        piece = data[pos + HEADER: pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            out.append(piece)
        elif kind == FIRST:
            pieces = piece
        elif kind == MIDDLE:
            pieces += piece
        elif kind == LAST:
            out.append(pieces + piece)
        elif length == 0:
            break
    return out


def history(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(each ``run.log`` call's values, the run's config) of an offline run file."""
    from wandb.proto import wandb_internal_pb2 as pb

    logged: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    for data in records(path):
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            logged.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                           for item in record.history.item})
        elif kind in ("run", "config"):
            updates = record.run.config.update if kind == "run" else record.config.update
            for item in updates:
                config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return logged, config


def summary(path: Path) -> dict[str, Any]:
    """The run's summary (what ``run.summary[...]`` set, and each key's last logged value)."""
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict[str, Any] = {}
    for data in records(path):
        record = pb.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "summary":
            for item in record.summary.update:
                out[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return out
