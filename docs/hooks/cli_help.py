"""An MkDocs hook: the command line's reference page shows ``gnnmon --help`` and each command's
``--help`` as the CLI prints them, run when the site is built (so the page cannot drift from the
code). The page holds the marker ``<!-- gnnmon --help -->`` where the output goes; the commands
are read from the top-level help, so a new command gets its section without editing the page.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- gnnmon --help -->"
ROOT = Path(__file__).resolve().parents[2]


def _help(*command: str) -> str:
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=str(ROOT))  # the checkout's gnnmon, wrapped alike everywhere
    done = subprocess.run([sys.executable, "-m", "gnnmon", *command, "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"gnnmon {' '.join(command)} --help failed ({done.returncode}): {done.stderr}")
    return done.stdout.rstrip()


def commands(top: str) -> list[str]:
    """The commands listed under ``COMMAND`` in the top-level help."""
    found = re.findall(r"^ {4}([a-z][a-z-]*) ", top.split("COMMAND", 2)[-1], flags=re.MULTILINE)
    if not found:
        raise RuntimeError(f"no command found in gnnmon --help:\n{top}")
    return found


def on_page_markdown(markdown: str, *, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    top = _help()
    parts = ["```text", "$ gnnmon --help", top, "```"]
    for command in commands(top):
        parts += ["", f"## gnnmon {command}", "", "```text", f"$ gnnmon {command} --help", _help(command), "```"]
    return markdown.replace(MARKER, "\n".join(parts))
