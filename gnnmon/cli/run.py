"""``gnnmon run [options] script.py [args]`` / ``gnnmon run [options] -m pkg.module [args]``: an
unmodified training script run in this process (as ``python script.py`` runs it: its own
``sys.argv``, ``__main__`` and ``sys.path[0]``), its steps found (:mod:`gnnmon.measure.auto_steps`)
and recorded to a run file, one live line on a terminal, and at the end, on stderr, the
diagnosis's lead, the file's path and the command to read it. The exit status is the script's."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import os
import runpy
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

from gnnmon.cli.live import Live, Tally, wanted
from gnnmon.data.paths import rank_path
from gnnmon.report import Report
from gnnmon.report.diagnosis.findings_markdown import NOTHING, headline

EXIT = ("Exit status: the script's (its sys.exit code; 1 when it raised, with its traceback; 130 on Ctrl-C, "
        "every row kept; killed by SIGTERM as it would be); 2 when gnnmon refused to run it (no such script "
        "or module, a syntax error, a launcher, an output file that exists without -f).")

VALUED = frozenset(("-o", "--output", "--sample"))
"""gnnmon run's options that take a value (how the script's own arguments are told apart)."""

LAUNCHERS = {"torchrun": "torchrun [its options] -m gnnmon run", "torch.distributed.run":
             "torchrun [its options] -m gnnmon run", "torch.distributed.launch": "torchrun [its options] -m gnnmon run",
             "accelerate": "accelerate launch [its options] -m gnnmon run",
             "accelerate.commands.launch": "accelerate launch [its options] -m gnnmon run",
             "deepspeed": "deepspeed [its options] --module gnnmon run",
             "deepspeed.launcher.runner": "deepspeed [its options] --module gnnmon run"}
"""Launchers refused, each with the form that works: gnnmon run inside it, one file per rank."""

INTERRUPTED = 130
"""128 + SIGINT: what a shell reports for a program Ctrl-C ended."""

CHILD_ENV = ("GNNMON_RUN_OUTPUT", "GNNMON_RUN_PID", "GNNMON_RUN_MODE")
"""What ``gnnmon run`` sets while its script runs, for the processes the script starts (Lightning's
``callbacks_factory`` entry point, :func:`gnnmon.integrations.lightning.callbacks_factory`, reads
them): the run file, this process's id, and ``w`` where ``-f`` was given."""


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """``run``'s words for gnnmon (its options and the target) and the script's arguments (what
    follows the script, or ``-m MODULE``, or the ``--`` before the script); other commands as they are."""
    if argv[:1] != ["run"]:
        return argv, []
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in ("--", "-m"):
            return argv[:i + 2], argv[i + 2:]
        if word.startswith("-m") and not word.startswith("--"):
            return argv[:i + 1], argv[i + 1:]
        if word in VALUED:
            i += 2
            continue
        if word.startswith("-"):
            i += 1
            continue
        return argv[:i + 1], argv[i + 1:]
    return argv, []


def add(sub: Any, argv: list[str]) -> None:
    p = sub.add_parser("run", help="run a training script and record its steps, unmodified", epilog=EXIT,
                       description=(
                           "Run SCRIPT (or -m MODULE) in this process with its own arguments, find its steps (a row "
                           "per optimizer update; fallbacks said in the report), record them to a run file and say "
                           "the diagnosis's lead at the end. gnnmon's options go before the script; everything after "
                           "it is the script's. Under a launcher: torchrun [its options] -m gnnmon run train.py."))
    p.add_argument("-o", "--output", metavar="RUN", help="the run file (default: runs/<script>-<time>.jsonl; under "
                   "torchrun each rank writes its own, .rank<N> before the suffix)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite RUN if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="say nothing at the start and the end")
    live = p.add_mutually_exclusive_group()
    live.add_argument("--status", dest="status", action="store_const", const=True, default=None,
                      help="draw the live line even where stderr is not a terminal")
    live.add_argument("--no-status", dest="status", action="store_const", const=False, help="no live line")
    p.add_argument("--sched", action="store_true", help="record each row's thread CPU time, context switches and "
                   "run-queue time (thread_* fields; Linux), as collect(sched=True): what gnnmon compare judges a "
                   "step on where torch runs on one thread (its time less its wait for a core)")
    p.add_argument("--sample", metavar="SECONDS", type=_seconds, help="sample the machine every SECONDS (e.g. 0.5), "
                   "as collect(sample=...): other processes' CPU on the run's cores (others_cpu_pct), which gnnmon "
                   "compare names beside its verdict, and utilisation")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module as python -m does (ends gnnmon's options)")
    p.add_argument("target", nargs="?", metavar="SCRIPT", help="the script (its arguments follow it)")
    p.set_defaults(run=run, script_args=split(argv)[1])


def _seconds(text: str) -> float:
    """``--sample``'s interval: seconds, a finite number over 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (e.g. 0.5)") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r}: the interval is a number of seconds over 0 (e.g. 0.5)")
    return value


def run(args: argparse.Namespace) -> int:
    module, target = args.module, args.target
    if module is not None and target is not None:  # -m MOD's first argument: the script's
        args.script_args = [target, *args.script_args]
        target = None
    if module is None and target is None:
        return _refuse("run needs a script (gnnmon run train.py [args]) or a module (gnnmon run -m pkg.module [args])")
    launcher = module if module is not None else Path(target).name.removesuffix(".py")
    family = launcher.split(".")[0]
    if launcher in LAUNCHERS or (module is not None and family in ("accelerate", "deepspeed")):
        script = next((a for a in args.script_args if a.endswith(".py")), "train.py")
        form = LAUNCHERS[launcher] if launcher in LAUNCHERS else LAUNCHERS[family]
        return _refuse(f"{launcher} is a launcher: it measures nothing itself. Run gnnmon inside it (each rank records "
                       f"its own file): {form} {script} [args]")
    checked = _check_module(module) if module is not None else _check_script(target)
    if isinstance(checked, int):
        return checked
    source, name = checked
    records_itself = _records_itself(source)
    path: Path | None = None
    if not records_itself:
        path = _output(args.output, name, args.force)
        if path is None:
            return 2
    return _launch(args, module, target, path, records_itself)


def _refuse(message: str) -> int:
    print(f"gnnmon: {message}", file=sys.stderr)
    return 2


def _check_script(target: str) -> tuple[str, str] | int:
    """The script's source and name, or 2 (said) when it is missing or does not parse."""
    where = Path(target)
    if where.is_dir():
        where = where / "__main__.py"
    try:
        source = where.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        return _refuse(f"cannot run {target}: {exc.strerror or exc}")
    try:
        ast.parse(source, str(where))
    except SyntaxError as exc:
        return _refuse(f"{target} does not parse: {exc.msg} (line {exc.lineno})")
    return source, Path(target).resolve().stem if Path(target).is_dir() else Path(target).stem


def _check_module(module: str) -> tuple[str, str] | int:
    """The module's source and name, or 2 (said) when it cannot be found."""
    sys.path.insert(0, os.getcwd())  # as python -m finds it
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:  # a package: its __main__
            spec = importlib.util.find_spec(module + ".__main__")
    except (ImportError, ValueError) as exc:
        return _refuse(f"no module {module}: {exc}")
    finally:
        sys.path.pop(0)
    if spec is None:
        return _refuse(f"no module named {module}")
    source = ""
    if spec.origin and spec.origin.endswith(".py"):
        try:
            source = Path(spec.origin).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            source = ""
    return source, module.rsplit(".", 1)[-1]


RECORDING_NOT = frozenset((("gnnmon", "integrations", "pyg_sampler"),))
"""gnnmon's modules a script may import and still not record itself (PyG's loaders' sampler), as
their names' parts (names compared with a script's imports; nothing here imports them)."""


def _records_itself(source: str) -> bool:
    """Whether the script imports gnnmon (``collect``, the decorators; any module of gnnmon's but
    :data:`RECORDING_NOT`): it records itself, and ``gnnmon run`` adds no run and no steps of its own."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "gnnmon"
                                                and tuple(a.name.split(".")) not in RECORDING_NOT for a in node.names):
            return True
        if (isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "gnnmon"
                and tuple((node.module or "").split(".")) not in RECORDING_NOT):
            return True
    return False


def _output(given: str | None, name: str, force: bool) -> Path | None:
    """The run file: as given, else a new one under ``runs/`` named from the script and the time
    (a job's ranks: its run id); None (said) where it exists and ``-f`` was not given."""
    from gnnmon.devices.ranks import current_rank  # torch: imported when a script is run, not for --help

    rank = current_rank()
    number = None if rank is None else rank.rank
    if given is not None:
        path = Path(given)
    else:
        stamp = os.environ.get("TORCHELASTIC_RUN_ID") if rank is not None else None
        stamp = stamp if stamp and stamp != "none" else time.strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{name}-{stamp}.jsonl"
        n = 1
        while rank is None and not force and rank_path(path, number).exists():
            n += 1
            path = Path("runs") / f"{name}-{stamp}-{n}.jsonl"
    written = rank_path(path, number)
    if written.exists() and not force:
        print(f"gnnmon: {written} exists; give another -o, or -f to overwrite it", file=sys.stderr)
        return None
    return path


def _launch(args: argparse.Namespace, module: str | None, target: str | None, path: Path | None,
            records_itself: bool) -> int:
    """Run the script under a run of its own (or none, where it records itself) and say the end."""
    from gnnmon.measure.auto_steps import LOOKED_FOR, RULES, AutoSteps  # torch: not for --help
    from gnnmon.record import state
    from gnnmon.record.active import collect
    from gnnmon.record.interrupts import held_section
    from gnnmon.record.options import AUTO

    pid = os.getpid()
    began_ns = time.time_ns()
    quiet = args.quiet
    own_runs: list[Any] = []

    def note_run() -> None:  # a run the script opens itself: its file is named at the end
        for r in state.RUNS:
            if r not in own_runs and r.path is not None and str(r.path) not in found:
                found.append(str(r.path))

    found: list[str] = []
    state.ON_RUNS.append(note_run)
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    run = engine = live = None
    saved_env: dict[str, str | None] = {}
    code, ended = 0, "stop"
    error: BaseException | None = None
    try:
        if not records_itself:
            config = {"gnnmon_run": {"target": module if module is not None else target, "module": module is not None,
                                     "argv": list(args.script_args), "rules": dict(RULES),
                                     "looked_for": list(LOOKED_FOR)}}
            tally = Tally()
            run = collect(path, sinks=[tally], config=config, mode="w" if args.force else "x", distributed=False,
                          sched=True if args.sched else AUTO, sample=args.sample)
            own_runs.append(run)
            with held_section():
                run.start()
            engine = AutoSteps(run).start()
            shown = str(run.path)
            if wanted(args.status, sys.stderr):
                live = Live(tally, shown, sys.stderr).start()
            elif not quiet:
                print(f"gnnmon: recording {module or target} to {shown}", file=sys.stderr)
        elif not quiet:
            print(f"gnnmon: {module or target} records itself (it imports gnnmon): running it as it is, with no "
                  "steps of gnnmon run's" + ("; --sched and --sample do not reach its collect(): give them there"
                                             if args.sched or args.sample is not None else ""), file=sys.stderr)
        if run is not None:  # Lightning's DDP children re-run the script without gnnmon: its entry point
            saved_env = {name: os.environ.get(name) for name in CHILD_ENV}  # records them from these
            os.environ.update({CHILD_ENV[0]: str(path), CHILD_ENV[1]: str(pid),
                               CHILD_ENV[2]: "w" if args.force else "x"})
        sys.argv = [module if module is not None else str(target), *args.script_args]
        if sys.path:
            sys.path[0] = os.getcwd() if module is not None else os.path.dirname(os.path.abspath(str(target)))
        if module is not None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            _run_file(str(target))
    except SystemExit as exc:
        code, ended = _exit_code(exc), "exit"
    except KeyboardInterrupt as exc:
        code, error, ended = INTERRUPTED, exc, "exception KeyboardInterrupt"
    except BaseException as exc:  # noqa: BLE001 - the script's: its traceback, then exit status 1
        code, error, ended = 1, exc, f"exception {type(exc).__name__}"
    finally:
        if os.getpid() != pid:  # a child the script forked that ran on to here: it ends as it would have
            sys.stdout.flush()
            os._exit(code)
        sys.argv = saved_argv
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if sys.path and saved_path0 is not None:
            sys.path[0] = saved_path0
        state.ON_RUNS.remove(note_run)
        if live is not None:
            live.stop()
    if error is not None and not isinstance(error, KeyboardInterrupt):
        _print_traceback(error)
    summary = None
    if run is not None:
        with held_section():
            summary = engine.stop(error) if engine is not None else None
            if summary is not None:
                run.end_info["steps"] = summary
            run.stop(ended)
    if not quiet:
        sys.stdout.flush()
        _say_end(run, summary, found, code, began_ns)
    return code


def _run_file(target: str) -> None:
    """The script run as ``python script.py`` runs it: its code named by its absolute path (the
    file:line of its warnings and traceback, its ``__file__``) in a fresh ``__main__`` module, while
    ``sys.argv[0]`` stays as given (``runpy.run_path`` would give both the one path). A folder's
    ``__main__.py`` goes to runpy."""
    path = os.path.abspath(target)
    if os.path.isdir(path):
        runpy.run_path(target, run_name="__main__")
        return
    with io.open_code(path) as f:  # bytes: compile reads the file's coding line
        code = compile(f.read(), path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__=None, __spec__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)  # the script the user asked to run
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
        else:
            del sys.modules["__main__"]


def _exit_code(exc: SystemExit) -> int:
    """``sys.exit(None | int | str)``: 0, the int, or 1 with the message on stderr (as Python exits)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_traceback(error: BaseException) -> None:
    """The script's traceback as Python would print it: gnnmon's and runpy's frames left out."""
    tb = error.__traceback__
    skipped = (os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>")
    while tb is not None and (tb.tb_frame.f_code.co_filename in skipped
                              or os.path.abspath(tb.tb_frame.f_code.co_filename) in skipped):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb, file=sys.stderr)


def _say_end(run: Any, summary: dict[str, Any] | None, found: list[str], code: int, since_ns: int = 0) -> None:
    """On stderr: the steps and the rule, the diagnosis's lead, the file and how to read it."""
    say: list[str] = []
    if run is None:
        if found:
            say += [f"its run file(s): {', '.join(found)}", f"read it: gnnmon report {found[0]}"]
        for line in say:
            print(f"gnnmon: {line}", file=sys.stderr)
        return
    path = str(run.path)
    say.append(steps_line(summary))
    say += [f"note: {note}" for note in (summary or {}).get("notes") or ()]  # each fallback, named
    try:
        findings = Report.load(path).diagnosis() if summary and summary.get("rule") else []
        say.append(f"{headline(findings[0])}: {findings[0]['words']}" if findings else NOTHING)
        if len(findings) > 1:
            say.append(also_line(findings[1:]))
    except Exception as exc:  # noqa: BLE001 - the file is there: the report says the rest
        say.append(f"no diagnosis ({type(exc).__name__}: {exc})")
    say.append(f"wrote {path}")
    children = _children_files(Path(path), since_ns)
    if children:
        say.append(f"its children wrote (Lightning's DDP ranks, through gnnmon's callback): {', '.join(children)}")
    say.append(f"read it: gnnmon report {path}")
    for line in say:
        print(f"gnnmon: {line}", file=sys.stderr)


def also_line(more: list[dict[str, Any]], most: int = 3) -> str:
    """``also: input-bound — 46 % of the measured time (eval); ...``: the findings after the lead,
    headlines only (the report says each in full)."""
    named = [headline(f) + (f" ({f['label']})" if f.get("label") else "") for f in more[:most]]
    left = len(more) - len(named)
    return "also: " + "; ".join(named) + (f"; and {left} more" if left else "") + " (the report says each)"


def _children_files(path: Path, since_ns: int) -> list[str]:
    """The rank files beside ``path`` written since the script began (its DDP children's, recorded
    through Lightning's entry point: :data:`CHILD_ENV`)."""
    try:
        beside = path.parent.glob(f"{path.stem}.rank*{path.suffix}")
        return sorted(str(p) for p in beside if p.stat().st_mtime_ns >= since_ns)
    except OSError:
        return []


def steps_line(summary: dict[str, Any] | None) -> str:
    """``20 rows: step 20 (a row per optimizer update ...)`` or what was looked for and not seen."""
    if not summary or not summary.get("rule"):
        looked = "; ".join((summary or {}).get("looked_for") or ())
        return f"no step found: looked for {looked} on the script's thread, and saw none (no row is made up)"
    labels = ", ".join(f"{label} {n}" for label, n in summary["labels"].items())
    return f"{sum(summary['labels'].values())} rows ({labels}): " + "; ".join(summary["said"])
