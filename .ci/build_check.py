"""The package as a user gets it: build the sdist and the wheel (the wheel from the sdist, as pip
would), check their metadata (twine check --strict) and contents, install the wheel into a fresh
virtual environment (torch first, pinned), and run the README's first example ("Three lines")
there, from an empty folder, against the installed wheel and not this checkout.

    python .ci/build_check.py [--torch "torch==2.13.0"] [--python python3]

`make build-check` runs it (CI too, after `make docs`). Needs `build` and `twine` (the `dist`
dependency group) in the interpreter that runs it, and a package index for the build's setuptools
and the fresh environment's torch and dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = ("gnnmon/py.typed", "gnnmon/report/renderers/page.js", "gnnmon/report/renderers/page.css")
"""Files that are not Python modules and must travel with the package."""
DEV_TOOLS = ("pytest", "hypothesis", "selenium", "ruff", "mypy", "mkdocs", "build", "twine")
"""Developer tooling: in dependency groups, never in the wheel's requirements or extras."""


STARTED = time.monotonic()


def step(name: str) -> None:
    print(f"\n== {name} (at {time.monotonic() - STARTED:.0f} s)", flush=True)


def run(*cmd: str | os.PathLike[str], cwd: Path | None = None, env: dict[str, str] | None = None,
        capture_output: bool = False) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, text=True, cwd=cwd, env=env, capture_output=capture_output)


def version() -> str:
    found = re.search(r'__version__ = "([^"]+)"', (ROOT / "gnnmon" / "_version.py").read_text())
    if found is None:
        sys.exit("gnnmon/_version.py sets no __version__")
    return found.group(1)


def three_lines() -> str:
    """The README's first example: the first python block of its "Three lines" section."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n## Three lines\n")
    end = readme.index("\n## ", start + 1)
    found = re.search(r"```python\n(.*?)```", readme[start:end], re.S)
    if found is None:
        sys.exit("README.md: no python block in the 'Three lines' section")
    return found.group(1)


WHEEL_EXAMPLE = re.compile(r'<!-- example: runs from the wheel; prints "([^"]+)" -->\n```python\n(.*?)```', re.S)
"""A docs example that must run as printed from the wheel, and what its output must hold."""


def wheel_examples() -> list[tuple[str, str, str]]:
    """(name, code, expected output) of every docs example marked to run from the wheel."""
    found = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for i, (expect, code) in enumerate(WHEEL_EXAMPLE.findall(page.read_text())):
            found.append((f"{page.stem}_{i}.py", code, expect))
    return found


def check_contents(sdist: Path, wheel: Path, ver: str) -> None:
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        metadata = whl.read(f"gnnmon-{ver}.dist-info/METADATA").decode()
        entry_points = whl.read(f"gnnmon-{ver}.dist-info/entry_points.txt").decode()
    with tarfile.open(sdist) as tar:
        sdist_names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    missing = ([f for f in PACKAGE_DATA if f not in names]
               + [f"sdist: {f}" for f in PACKAGE_DATA if f not in sdist_names])
    if missing:
        sys.exit(f"package data missing: {missing}")
    tops = sorted({n.split("/", 1)[0] for n in names})
    if tops != ["gnnmon", f"gnnmon-{ver}.dist-info"]:
        sys.exit(f"the wheel holds more than the package: {tops}")
    if f"\nVersion: {ver}\n" not in metadata:
        sys.exit(f"the wheel's METADATA does not say Version: {ver}")
    requires = re.findall(r"^Requires-Dist: ([A-Za-z0-9_.-]+)", metadata, re.M)
    tools = sorted(set(requires) & set(DEV_TOOLS))
    if tools:
        sys.exit(f"developer tooling among the wheel's requirements or extras: {tools}")
    if "gnnmon = gnnmon.cli:main" not in entry_points:
        sys.exit("the wheel declares no gnnmon command")
    print(f"{wheel.name}: {len(names)} files, package data {', '.join(PACKAGE_DATA)}; "
          f"{len(requires)} requirements, none of them developer tooling")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", default=os.environ.get("TORCH_SPEC", "torch==2.13.0"),
                        help="what the fresh environment installs first (default: torch==2.13.0, a CPU build "
                        "on this project's machines; an unpinned torch can pull a multi-GB CUDA build)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the fresh environment is made from")
    parser.add_argument("--outdir", default=str(ROOT / "dist"), help="where the sdist and wheel go (default: dist/)")
    args = parser.parse_args()
    ver = version()
    out = Path(args.outdir)

    step("build the sdist, then the wheel from it")
    for old in out.glob("gnnmon-*"):
        old.unlink()
    run(sys.executable, "-m", "build", "--quiet", "--outdir", out, ROOT)
    sdist, wheel = out / f"gnnmon-{ver}.tar.gz", out / f"gnnmon-{ver}-py3-none-any.whl"
    if not (sdist.is_file() and wheel.is_file()):
        sys.exit(f"expected {sdist.name} and {wheel.name} in {out}, found {sorted(p.name for p in out.iterdir())}")

    step("check the metadata and contents")
    run(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel)
    check_contents(sdist, wheel, ver)

    with tempfile.TemporaryDirectory(prefix="gnnmon-build-check-") as tmp:
        env_dir, work = Path(tmp) / "venv", Path(tmp) / "work"
        work.mkdir()
        bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
        python = bindir / ("python.exe" if os.name == "nt" else "python")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}

        step(f"install the wheel into a fresh environment ({args.torch} first)")
        run(args.python, "-m", "venv", env_dir)
        run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", args.torch, env=env)
        run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel, env=env)

        step("run the README's 'Three lines' example against it")
        (work / "three_lines.py").write_text(three_lines())
        # -I: no PYTHONPATH, no user site, not the script's folder: gnnmon can only be the installed one
        where = run(python, "-I", "-c", "import gnnmon; print(gnnmon.__file__, gnnmon.__version__)", cwd=work,
                    env=env, capture_output=True).stdout.split()
        if not Path(where[0]).resolve().is_relative_to(env_dir.resolve()) or where[1] != ver:
            sys.exit(f"gnnmon imported from {where[0]} (version {where[1]}), not the wheel installed in {env_dir}")
        printed = run(python, "-I", "three_lines.py", cwd=work, env=env, capture_output=True).stdout
        print("\n".join(printed.splitlines()[:8]))
        lines = [json.loads(line) for line in (work / "runs" / "first.jsonl").read_text().splitlines()]
        rows = [line for line in lines if line.get("type") == "row"]
        if "### train_step — 20 call(s)" not in printed or len(rows) != 20 or lines[0].get("gnnmon") != ver:
            sys.exit(f"the example did not print or record what the README shows ({len(rows)} rows)")
        report = run(bindir / "gnnmon", "report", "runs/first.jsonl", cwd=work, env=env, capture_output=True).stdout
        shown = run(bindir / "gnnmon", "--version", cwd=work, env=env, capture_output=True).stdout.strip()
        if "### train_step" not in report or shown != f"gnnmon {ver}":
            sys.exit(f"the installed gnnmon command did not report the run ({shown!r})")
        print(f"gnnmon {ver} from {where[0]}: 20 rows recorded, the report printed, `gnnmon report` read the file")

        examples = wheel_examples()
        step(f"run the docs' {len(examples)} example(s) marked to run from the wheel, with gnnmon[pyg] installed")
        run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{wheel}[pyg]", env=env)
        for name, code, expect in examples:
            (work / name).write_text(code)
            printed = run(python, "-I", name, cwd=work, env=env, capture_output=True).stdout
            if expect not in printed:
                sys.exit(f"docs example {name} did not print {expect!r}; it printed:\n{printed}")
            print(f"{name}: {printed.splitlines()[0]}")

    print(f"\nbuild check passed in {time.monotonic() - STARTED:.0f} s: {sdist.name}, {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
