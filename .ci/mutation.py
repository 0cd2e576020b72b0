"""Mutation testing of the modules whose answers users act on (``make mutation``): mutmut mutates
each module listed in pyproject.toml's ``[tool.mutmut] only_mutate`` and runs its fast tests
(``pytest_add_cli_args_test_selection``) against every mutant; then each module's score is
printed: mutants killed (a test failed, or timed out twice: how many timed out is shown) out of
those not listed as equivalent in docs/mutation.md. A survivor that is neither killed nor listed
there is printed with its diff, and the command exits 1 where a module scores under
``--floor`` (85 %).

    python .ci/mutation.py                 # run mutmut, then score (tens of minutes on 2 cores)
    python .ci/mutation.py --score         # score the last run (mutants/ as mutmut left it)
    python .ci/mutation.py --only gnnmon.report.compare.gate   # one module's mutants again
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "docs" / "mutation.md"
KILLED = {1, 3, 24, -24, 36, 152, 255, 37}
"""mutmut's exit codes of a mutant the tests caught: a failure, an internal error, a timeout, a type check."""

TIMED_OUT = {24, -24, 36, 152}
"""Of those, a timeout. mutmut stops a mutant's tests after ``timeout_multiplier`` times their
duration when it listed them, in wall time: on a busy machine tests that would pass run past it (25
of creep's 936 mutants in one run beside other work on this VM, mutants the docs list as
equivalent among them, with the multiplier at mutmut's 15). ``[tool.mutmut]`` sets it wider, and a
mutant that timed out is run again, alone (see :func:`main`): one whose tests never end times out
again."""


def modules() -> list[str]:
    """The modules ``[tool.mutmut] only_mutate`` names (read as text: tomllib is Python 3.11's)."""
    text = (ROOT / "pyproject.toml").read_text()
    listed = re.search(r"^only_mutate = \[(.*?)\]", text[text.index("[tool.mutmut]"):], re.M | re.S)
    if listed is None:
        raise SystemExit("pyproject.toml's [tool.mutmut] has no only_mutate")
    return [p.removesuffix(".py").replace("/", ".") for p in re.findall(r'"([^"]+)"', listed.group(1))]


def equivalent() -> dict[str, str]:
    """The mutants docs/mutation.md lists as equivalent, with the reason given: ``- `name`: reason``."""
    if not EQUIVALENT.exists():
        return {}
    found = re.findall(r"^- `([\w.ǁ]+__mutmut_\d+)`: (.+)$", EQUIVALENT.read_text(), re.M)
    return dict(found)


def results(module: str) -> dict[str, int | None]:
    meta = ROOT / "mutants" / (module.replace(".", "/") + ".py.meta")
    if not meta.exists():
        raise SystemExit(f"no mutmut results for {module} ({meta.relative_to(ROOT)}): run python .ci/mutation.py first")
    return json.loads(meta.read_text())["exit_code_by_key"]


def diff(name: str) -> str:
    out = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=ROOT,
                         capture_output=True, text=True).stdout
    return "\n".join("      " + line for line in out.splitlines()
                     if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def score(floor: float, show: bool) -> int:
    listed = equivalent()
    bad = 0
    seen: set[str] = set()
    print(f"{'module':<40} {'mutants':>8} {'equivalent':>11} {'killed':>8} {'timed out':>10} {'score':>7}")
    for module in modules():
        codes = results(module)
        seen |= set(codes)
        kept = {k: v for k, v in codes.items() if k not in listed}
        killed = sum(v in KILLED for v in kept.values())
        share = killed / len(kept) if kept else 1.0
        timed_out = sum(v in TIMED_OUT for v in kept.values())  # of those killed
        print(f"{module:<40} {len(codes):>8} {len(codes) - len(kept):>11} {killed:>8} {timed_out:>10} "
              f"{100 * share:>6.1f}%")
        survivors = sorted(k for k, v in kept.items() if v not in KILLED)
        if show:
            for name in survivors:
                print(f"  survived: {name}\n{diff(name)}")
        if share < floor:
            bad += 1
    stale = sorted(set(listed) - seen)
    if stale:
        print(f"\n{len(stale)} listed as equivalent but not mutants now (the code moved: list them again): "
              + ", ".join(stale))
    print(f"\nfloor {100 * floor:.0f} %: {'every module meets it' if not bad else f'{bad} module(s) under it'}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--score", action="store_true", help="score the last run only")
    parser.add_argument("--only", help="run the mutants of one module again (its dotted name)")
    parser.add_argument("--floor", type=float, default=0.85, help="the least share killed a module must reach")
    parser.add_argument("--jobs", type=int, default=2, help="mutmut's children")
    parser.add_argument("--survivors", action="store_true", help="print each survivor's diff")
    args = parser.parse_args(argv)
    if not args.score:
        names = [f"{args.only}.*"] if args.only else []
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *names], cwd=ROOT,
                       check=False)
        timed_out = [k for m in modules() if not args.only or m == args.only
                     for k, v in results(m).items() if v in TIMED_OUT]
        if timed_out:  # once more, one at a time: a mutant whose tests never end times out again
            print(f"{len(timed_out)} mutant(s) timed out: running them again, one at a time")
            subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "1", *timed_out], cwd=ROOT,
                           check=False)
    return score(args.floor, args.survivors)


if __name__ == "__main__":
    sys.exit(main())
