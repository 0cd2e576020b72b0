"""A run file read with json alone, as a reader without gnnmon would: each line an object; a row
line that names a set of repeated fields (``"same": id``) gets that set's fields and aliases put
back as the format says (docs/guarantees.md, "Rows read back as recorded"), written here apart
from gnnmon's reader so that the tests check it against an independent one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def lines(path: str | Path) -> list[dict[str, Any]]:
    """Every line of the file as json reads it, rows made whole, ``same`` lines left out."""
    sets: dict[int, dict[str, Any]] = {}
    out = []
    for raw in Path(path).read_bytes().splitlines():
        obj = json.loads(raw)
        if obj.get("type") == "same":
            sets[obj["id"]] = obj
            continue
        if obj.get("type") == "row" and "same" in obj:
            declared = sets[obj.pop("same")]
            values = dict(declared["fields"], **obj)
            for key, source in reversed(list(declared.get("alias", {}).items())):
                values.setdefault(key, values[source])
            obj = {"type": "row", **{key: values[key] for key in declared["keys"]}}  # in the order recorded
        out.append(obj)
    return out


def rows(path: str | Path) -> list[dict[str, Any]]:
    """The file's rows, whole, without their ``type``."""
    return [{k: v for k, v in obj.items() if k != "type"} for obj in lines(path) if obj.get("type") == "row"]
