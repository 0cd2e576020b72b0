"""``gnnmon fields``: the reference of every field a row can hold (markdown)."""

from __future__ import annotations

import argparse
from typing import Any

from gnnmon.figures import reference

EXIT = "Exit status: 0."


def add(sub: Any, argv: list[str]) -> None:
    p = sub.add_parser("fields", help="print the reference of every field a row can hold (markdown)", epilog=EXIT,
                       description="Print every field a row can hold: its unit, meaning and logged name.")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print(reference(), end="")
    return 0
