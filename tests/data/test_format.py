"""The run file format's lines (gnnmon/data/format.py) on their own: every kind of line named once;
a planted object encoded (by :func:`encode` and by :func:`dumps`) parses back exactly, each value
of its own type; non-finite floats written as null, at any depth, tensors and numpy values as their
values, paths, sets and tuples as JSON, anything else as its repr; a typed line's kind is first and
its fields follow unchanged; a manifest begins as :data:`MANIFEST_START` says; JSON string literals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import gnnmon
from gnnmon.data.format import (
    END,
    FORMAT,
    FORMAT_VERSION,
    GC,
    KINDS,
    MANIFEST,
    MANIFEST_START,
    MARKER,
    MAX_TENSOR_VALUES,
    POINT,
    ROW,
    SAME,
    SAMPLE,
    WHOLE_INTS,
    dumps,
    dumps_str,
    encode,
    parse,
    typed_line,
)


def same(a, b) -> bool:
    """Equal and of the same type all the way down (``1 == 1.0 == True`` for ``==``, not here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


PLANTED = {
    "type": ROW, "label": "train step", "index": 7, "t_start_ns": 1_795_374_289_252_326_605, "wall_s": 0.125,
    "zero": 0, "zero_float": 0.0, "negative_zero": -0.0, "flag": True, "off": False, "nothing": None,
    "notes": ["slow", "gc"], "empty": [], "nested": {"a": [1, 2.5, None, {"b": "c"}], "d": {}},
    "text": "café – 東京 \"quoted\" \\ back\nslash", "big": 2**62, "negative": -(2**62), "tiny": 5e-324,
}
"""A row of every kind of JSON value, in an order of its own (keys are kept in order)."""


def test_every_kind_of_line_is_named_once():
    assert KINDS == (MANIFEST, ROW, GC, SAMPLE, POINT, MARKER, END, SAME)
    assert len(set(KINDS)) == 8 and all(type(k) is str and k for k in KINDS)
    assert (FORMAT, FORMAT_VERSION) == ("gnnmon.jsonl", 3)


@pytest.mark.parametrize("write", [encode, dumps])
def test_a_planted_row_encodes_to_one_line_and_parses_back_exactly(write):
    line = write(PLANTED)
    raw = line if isinstance(line, bytes) else line.encode("ascii")  # dumps: ASCII only
    assert b"\n" not in raw and raw.startswith(b'{"type":"row","label":"train step","index":7,')  # compact, in order
    back = parse(line)
    assert same(back, PLANTED), back
    assert same(json.loads(raw), PLANTED)  # JSON any reader accepts, read back the same


def test_dumps_is_compact_ascii_and_encode_utf8_and_both_say_the_same():
    obj = {"name": "é", "n": [1, 2]}
    assert dumps(obj) == '{"name":"\\u00e9","n":[1,2]}'
    assert encode(obj) == '{"name":"é","n":[1,2]}'.encode()
    assert parse(dumps(obj)) == parse(encode(obj)) == obj


@pytest.mark.parametrize("write", [encode, dumps])
def test_non_finite_floats_are_written_as_null_at_any_depth_and_finite_ones_kept(write):
    nan, inf = math.nan, math.inf
    obj = {"a": nan, "b": [1.5, inf, {"c": -inf, "d": [nan]}], "e": 2.0, "f": (inf, 3)}
    text = write(obj)
    raw = text if isinstance(text, bytes) else text.encode()
    assert b"NaN" not in raw and b"Infinity" not in raw
    assert same(json.loads(raw), {"a": None, "b": [1.5, None, {"c": None, "d": [None]}], "e": 2.0, "f": [None, 3]})


@pytest.mark.parametrize("write", [encode, dumps])
def test_an_int_beyond_64_bits_is_written_whole(write):
    for value in (2**64, -(2**70) - 3, 2**63, -(2**63) - 1):
        line = write({"v": value, "w": [value]})
        assert same(json.loads(line), {"v": value, "w": [value]})  # the digits, not a float's


def test_ints_up_to_64_bits_parse_back_exactly():
    for value in (2**63 - 1, 2**63, 2**64 - 1, -(2**63), 0, -1):
        assert same(parse(encode({"v": value})), {"v": value})


def test_an_int_beyond_64_bits_parses_back_as_the_int_written(tmp_path):
    """orjson would read it as a float: its line is written by json and ends in a space (JSON
    whitespace), which tells gnnmon's reader to read it with json, alone or among other lines."""
    for value in (2**64, -(2**63) - 1, 2**70):
        line = encode({"mine": value})
        assert line.endswith(WHOLE_INTS) and same(parse(line), {"mine": value})
        assert same(json.loads(line), {"mine": value})  # any reader: the space is whitespace
    path = tmp_path / "big.jsonl"

    @gnnmon.cuda_timed(device="cpu")
    def step(i: int) -> None:
        gnnmon.current_row().fields["mine"] = 2**70 + i if i % 3 == 0 else i

    with gnnmon.collect(path) as run:
        for i in range(30):
            step(i)
    mine = [2**70 + i if i % 3 == 0 else i for i in range(30)]
    assert [r["mine"] for r in run.records] == mine and all(type(r["mine"]) is int for r in run.records)
    loaded = gnnmon.load(path).records
    assert [r["mine"] for r in loaded] == mine and all(type(r["mine"]) is int for r in loaded)


class Opaque:
    def __repr__(self) -> str:
        return "<opaque 42>"


@pytest.mark.parametrize("write", [encode, dumps])
def test_what_json_cannot_hold_is_written_as_json_or_its_repr(write):
    obj = {"path": Path("/runs/a.jsonl"), "set": {"only"}, "frozen": frozenset({3}), "tuple": (1, "a"),
           "numpy_int": np.int32(3), "numpy_float": np.float64(0.25), "opaque": Opaque(), "key": {1: "one"}}
    assert parse(write(obj)) == {"path": "/runs/a.jsonl", "set": ["only"], "frozen": [3], "tuple": [1, "a"],
                                 "numpy_int": 3, "numpy_float": 0.25, "opaque": "<opaque 42>", "key": {"1": "one"}}


@pytest.mark.parametrize("write", [encode, dumps])
def test_a_tensor_is_written_as_its_values_up_to_the_limit_else_as_its_repr(write):
    torch = pytest.importorskip("torch")
    small = torch.tensor([1.5, math.nan, 3.0])
    one = torch.tensor([[2.5]])
    big = torch.zeros(MAX_TENSOR_VALUES + 1)
    ints = torch.arange(MAX_TENSOR_VALUES)
    got = parse(write({"small": small, "one": one, "big": big, "ints": ints, "device": torch.device("cpu"),
                       "dtype": torch.float16}))
    assert got["small"] == [1.5, None, 3.0]  # its NaN made null too
    assert same(got["one"], 2.5) and got["ints"] == list(range(MAX_TENSOR_VALUES))
    assert got["big"] == repr(big) and got["big"].startswith("tensor(")
    assert (got["device"], got["dtype"]) == ("cpu", "torch.float16")


def test_a_typed_line_puts_its_kind_first_and_keeps_the_fields_as_encoded():
    fields = {"label": "s", "index": 3, "wall_s": 0.5, "notes": ["a"]}
    line = typed_line(ROW, encode(fields))
    assert line == b'{"type":"row",' + encode(fields)[1:]
    back = parse(line)
    assert list(back) == ["type", *fields] and back == {"type": ROW, **fields}
    for kind in KINDS:
        assert parse(typed_line(kind, encode({"t_ns": 5}))) == {"type": kind, "t_ns": 5}
        assert typed_line(kind, b"{}") == b'{"type":"' + kind.encode() + b'"}' and parse(typed_line(kind, b"{}")) == {
            "type": kind}
    odd = 'we"ird\u00e9'
    assert parse(typed_line(odd, encode({"a": 1}))) == {"type": odd, "a": 1}


def test_a_manifest_line_begins_as_manifest_start_says():
    manifest = {"type": MANIFEST, "format": FORMAT, "format_version": FORMAT_VERSION, "config": {"lr": 0.1}}
    assert encode(manifest).startswith(MANIFEST_START) and dumps(manifest).encode().startswith(MANIFEST_START)
    assert not encode({"format": FORMAT, "type": MANIFEST}).startswith(MANIFEST_START)  # another order: not gnnmon's


def test_parse_reads_text_and_bytes_alike_and_says_where_it_stopped():
    line = '{"label":"s","index":1,"x":[1,2]}'
    assert parse(line) == parse(line.encode()) == {"label": "s", "index": 1, "x": [1, 2]}
    with pytest.raises(ValueError) as raised:
        parse(b'{"label":"s","index":1,"x":[1,')
    assert getattr(raised.value, "pos", None) == len(b'{"label":"s","index":1,"x":[1,')  # at the end of what it got


def test_dumps_str_is_a_json_string_literal_that_reads_back():
    for text in ("plain", 'a "quote"', "back\\slash", "new\nline\ttab", "é東", "\x00", "\udce9"):
        literal = dumps_str(text)
        assert literal.startswith('"') and literal.endswith('"') and literal.isascii()
        assert json.loads(literal) == text
