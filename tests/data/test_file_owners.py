"""Whose file it is: a run never destroys a run another live process is writing, keeps the
permission bits of the file it replaces, and refuses a read-only file as ``open(path, "w")``
would for its owner."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

import gnnmon
from tests.scripts import ROOT

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions and locks")

WRITER = textwrap.dedent("""
    import sys, time, gnnmon

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step(i):
        return i

    with gnnmon.collect(sys.argv[1]) as run:
        for i in range(10):
            step(i)
        run.flush()
        print("writing", flush=True)
        sys.stdin.readline()  # until the test says so
        for i in range(10, 20):
            step(i)
""")


def test_a_second_process_on_the_same_path_is_refused_while_the_first_writes(tmp_path):
    path = tmp_path / "run.jsonl"
    first = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        assert first.stdout.readline().strip() == "writing"
        with pytest.raises(FileExistsError,
                           match=rf"being written by another process's gnnmon run \(pid {first.pid}\)"):
            gnnmon.collect(path).start()
        first.stdin.write("go\n")
        first.stdin.flush()
        assert first.wait(60) == 0
    finally:
        first.kill()
    loaded = gnnmon.load(path)  # the first run whole
    assert [r["index"] for r in loaded.records] == list(range(20)) and loaded.complete
    with gnnmon.collect(path):  # its process has ended: the path is free again
        pass
    assert gnnmon.load(path).records == []


@pytest.mark.parametrize("bits", [0o600, 0o640, 0o664])
def test_a_replaced_file_keeps_its_permission_bits(tmp_path, bits):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path):
        pass
    os.chmod(path, bits)
    with gnnmon.collect(path):
        pass
    assert stat.S_IMODE(os.stat(path).st_mode) == bits
    assert json.loads(path.read_text().splitlines()[0])["type"] == "manifest"


def test_a_read_only_file_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text("the user's own data\n")
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError, match="read-only"):
        gnnmon.collect(path).start()
    assert path.read_text() == "the user's own data\n" and stat.S_IMODE(os.stat(path).st_mode) == 0o444
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]  # no temporary file left


def test_a_path_that_cannot_be_written_is_named_as_the_user_gave_it(tmp_path):
    missing = tmp_path / "no_such_folder_is_made_in_a_file" / "run.jsonl"
    (tmp_path / "no_such_folder_is_made_in_a_file").write_text("a file, not a folder")
    with pytest.raises(OSError, match=rf"cannot write a run file at {missing}") as raised:
        gnnmon.collect(missing).start()
    assert ".tmp" not in str(raised.value)
