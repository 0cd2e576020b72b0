"""README's first example: the unmodified ``train.py`` it prints, run by the command it prints,
says at the end what the README shows, line for line but for the figures and the file's time
stamp (they vary with the machine), and leads with input-bound (planted: each item read for 10 ms,
80 ms a batch of 8, against a step of one 256 x 256 layer)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.cli.running import ROOT, gnnmon_run

FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?")
STAMP = re.compile(r"train-\d{8}-\d{6}")


def first_example() -> tuple[str, list[str], list[str]]:
    """The script, the command's words and the lines shown, from README's first section."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## No edit: `gnnmon run train.py`"):readme.index("## The answer first")]
    script = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    command = re.search(r"```bash\n(.*?)```", section, re.S).group(1).split("#")[0]
    shown = re.search(r"```\n(gnnmon: .*?)```", section, re.S).group(1)
    return script, shlex.split(command), shown.strip().splitlines()


def masked(line: str) -> str:
    return FIGURE.sub("N", STAMP.sub("train-STAMP", line))


def test_the_first_example_runs_unmodified_and_says_what_the_readme_shows(tmp_path: Path):
    script, command, shown = first_example()
    assert "gnnmon" not in script and command[:2] == ["gnnmon", "run"]
    done = gnnmon_run(tmp_path, *command[2:], script=script, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("gnnmon: ")]
    assert [masked(line) for line in said] == [masked(line) for line in shown]
    assert said[2].startswith("gnnmon: input-bound — ")
    written = STAMP.search(said[-1]).group(0)
    assert (tmp_path / "runs" / f"{written}.jsonl").exists()
