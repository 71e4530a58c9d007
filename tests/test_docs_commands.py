"""The documented commands still exist, still parse, and the README's offline ones still run.

1. ``--help`` of every ``propius`` command and sub-command exits 0. The commands are walked from the
   typer app in :mod:`propius.cli`, so a new command is covered without editing this file; README.md
   must name each of them as ``propius <command> [<sub-command>]``, and its CLI table (a row starting
   ``| `propius <command> ``) must show every option of each, and of ``propius-client``.
   ``propius-client --help`` exits 0 too, as do the installed console scripts where
   ``pip install -e .`` put them on the PATH.
2. Command lines of README.md and docs/*.md are checked. In a fenced code block, a command line is a
   line, or an ``&&``-separated part of one (``\\`` continuations joined, ``VAR=value`` prefixes, a
   trailing ``&`` and ``# comments`` dropped), that starts with ``propius``, ``propius-client``,
   ``python benchmarks/`` or ``python -m benchmarks.``. In running text, an inline code span is one
   when it starts so and, for ``propius``, names one of its commands (``propius`` alone is also the
   default policy's name). Synopses (a line or span with ``[``, ``|``, ``…`` or ``<``) are skipped.
   Each is checked by the strictest rule that applies to it:

   - ``run``: lines of README.md's code blocks that need no server run exactly as written, in a
     temporary directory, and must exit 0: ``propius`` lines whose command is in :data:`OFFLINE`
     (``simulate``), and ``propius`` / ``propius-client`` lines that already end in ``--help``. The
     README keeps such lines small: each runs in well under a minute on 2 cores.
   - ``parse``: README.md's other code-block lines need a running control plane, a job id, a data
     point or minutes. Each is parsed by click down to its command without invoking it: an unknown
     command or option, or a missing or malformed value, fails; a placeholder such as ``JOB_ID``
     passes where the value is text.
   - ``flags``: everything else (inline spans, other docs' code blocks) often names a command or an
     option in passing (``propius up --policy``), so only an unknown command or option fails.

   Benchmark scripts run for minutes and write to ``benchmarks/results/``: their arguments are only
   parsed, by the script's own argparse parser (``parse_args`` is patched to exit 0 once it parsed);
   under ``flags`` only an unrecognized argument fails.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from clients.daemon import app as client_app
from propius.cli import app as propius_app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

OFFLINE = {"simulate"}  # propius commands that need no server: README lines using them run as written
COMMAND = re.compile(r"^(propius|propius-client|python benchmarks/\S+|python -m benchmarks\.\S+)(\s|$)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
INLINE_CODE = re.compile(r"`([^`]+)`")
SYNOPSIS_MARKS = ("[", "|", "…", "<")
RUN_TIMEOUT_S = 110

# Parses a benchmark's arguments with its own parser, then exits 0 instead of running it.
PARSE_ONLY = """
import argparse, os, runpy, sys
parse = argparse.ArgumentParser.parse_args
def parse_then_exit(self, args=None, namespace=None):
    parse(self, args, namespace)  # exits 2 on an unknown or malformed argument
    raise SystemExit(0)
argparse.ArgumentParser.parse_args = parse_then_exit
kind, target, *args = sys.argv[1:]
sys.argv = [target, *args]
if kind == "module":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.path[0] = os.path.dirname(os.path.abspath(target))  # as `python script.py` would
    runpy.run_path(target, run_name="__main__")
raise SystemExit("the script never parsed its arguments")
"""


def command_paths(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """``path`` and the paths of every sub-command below it, depth first."""
    paths = [path]
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path[-1] if path else "propius")
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                paths += command_paths(sub, (*path, name))
    return paths


PROPIUS_COMMANDS = command_paths(typer.main.get_command(propius_app))
TOP_COMMANDS = {path[0] for path in PROPIUS_COMMANDS if path}


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _command(text: str) -> list[str] | None:
    """The argv of ``text`` if it is a command line (see the module docstring), else None."""
    if any(mark in text for mark in SYNOPSIS_MARKS):
        return None
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError:  # not shell (a diagram, say)
        return None
    while tokens and ENV_ASSIGNMENT.match(tokens[0]):
        tokens = tokens[1:]
    if tokens and tokens[-1] == "&":
        tokens = tokens[:-1]
    return tokens if tokens and COMMAND.match(" ".join(tokens)) else None


def doc_commands(path: Path) -> list[tuple[list[str], bool]]:
    """(argv, whether in a fenced code block) of every command line of the Markdown file ``path``."""
    found: list[tuple[list[str], bool]] = []
    in_block, pending = False, ""
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if stripped.startswith("```"):
            in_block, pending = not in_block, ""
            continue
        if not in_block:
            for span in INLINE_CODE.findall(raw):
                argv = _command(span)
                if argv and (argv[0] != "propius" or (len(argv) > 1 and argv[1] in TOP_COMMANDS)):
                    found.append((argv, False))
            continue
        line = pending + stripped
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        for part in line.split("&&"):
            argv = _command(part)
            if argv:
                found.append((argv, True))
    return found


def _runs_as_written(argv: list[str]) -> bool:
    if argv[0] == "python":
        return False  # a benchmark: parsed only
    return argv[-1] == "--help" or (argv[0] == "propius" and len(argv) > 1 and argv[1] in OFFLINE)


MODES = ("flags", "parse", "run")  # from the most lenient to the strictest


def _cases() -> list[tuple[str, list[str], str]]:
    """(file, argv, mode) for every distinct command line of the docs, each under its strictest mode."""
    cases: dict[tuple[str, ...], tuple[str, list[str], str]] = {}
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for argv, fenced in doc_commands(path):
            mode = "flags"
            if path == README and fenced:
                mode = "run" if _runs_as_written(argv) else "parse"
            key = tuple(argv)
            if key not in cases or MODES.index(mode) > MODES.index(cases[key][2]):
                cases[key] = (path.relative_to(ROOT).as_posix(), argv, mode)
    return list(cases.values())


CASES = _cases()


def _case_id(case: tuple[str, list[str], str]) -> str:
    text = f"{case[2]} {case[0]}: {shlex.join(case[1])}"
    return text if len(text) <= 100 else text[:97] + "..."


def parse_only(command: click.Command, args: list[str], name: str, strict: bool = True) -> None:
    """Parse ``args`` as click would run them, down to the (sub-)command they name, without invoking it.

    Raises click's UsageError for an unknown command or option and, with ``strict``, for a missing or
    malformed value.
    """
    while isinstance(command, click.Group) and args and args[0] in command.commands:
        name, command, args = args[0], command.commands[args[0]], args[1:]
    if isinstance(command, click.Group) and args and not args[0].startswith("-"):
        raise click.UsageError(f"No such command {args[0]!r} in {name!r}.")
    if not args and not strict:
        return  # a command named in running text, without its arguments
    try:
        command.make_context(name, list(args))  # parses and converts every value; invokes nothing
    except click.exceptions.Exit as done:  # an eager --help
        assert done.exit_code == 0
    except (click.BadOptionUsage, click.BadParameter):  # a value missing or malformed (not an unknown option)
        if strict:
            raise


def _benchmark_program(argv: list[str]) -> list[str]:
    """A command that parses a benchmark line's arguments with the script's own parser, then exits."""
    if argv[1] == "-m":
        return [sys.executable, "-c", PARSE_ONLY, "module", argv[2], *argv[3:]]
    return [sys.executable, "-c", PARSE_ONLY, "path", str(ROOT / argv[1]), *argv[2:]]


# ------------------------------------------------------------------------------------------ --help


def test_the_walk_finds_the_commands() -> None:
    found = {" ".join(path) for path in PROPIUS_COMMANDS}
    assert {"", "simulate", "up", "submit", "jobs", "clients", "demo", "trace", "trace export", "trace metrics",
            "trace check", "flower", "flower run"} <= found


@pytest.mark.parametrize("path", PROPIUS_COMMANDS, ids=lambda path: " ".join(("propius", *path)))
def test_every_propius_command_prints_its_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(propius_app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_propius_client_prints_its_help() -> None:
    result = CliRunner().invoke(client_app, ["--help"])
    assert result.exit_code == 0, result.output
    assert "--devices" in result.output


@pytest.mark.parametrize("script", ["propius", "propius-client"])
def test_the_installed_console_scripts_print_their_help(script: str) -> None:
    executable = shutil.which(script)
    if executable is None:
        pytest.skip(f"{script} is not on the PATH (pip install -e .)")
    result = subprocess.run([executable, "--help"], capture_output=True, text=True, timeout=60, env=_environment())
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", [path for path in PROPIUS_COMMANDS if path], ids=" ".join)
def test_the_readme_names_every_command(path: tuple[str, ...]) -> None:
    name = " ".join(("propius", *path))
    assert name in README.read_text(), f"README.md does not document `{name}`"


def _leaf_options() -> list[tuple[str, str]]:
    """(command, --option) for every option of every leaf command of ``propius`` and of ``propius-client``."""
    leaves: list[tuple[str, click.Command]] = [("propius-client", typer.main.get_command(client_app))]
    root = typer.main.get_command(propius_app)
    for path in PROPIUS_COMMANDS:
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        if not isinstance(command, click.Group):
            leaves.append((" ".join(("propius", *path)), command))
    return [(name, option) for name, command in leaves for param in command.params
            if isinstance(param, click.Option) and not param.hidden
            for option in param.opts[:1] if option.startswith("--") and option != "--help"]


@pytest.mark.parametrize(("command", "option"), _leaf_options(), ids=" ".join)
def test_the_readme_shows_every_option(command: str, option: str) -> None:
    row = next((line for line in README.read_text().splitlines() if line.startswith(f"| `{command} ")), None)
    assert row is not None, f"README.md's CLI table has no row for `{command}`"
    assert re.search(rf"{re.escape(option)}(?![\w-])", row), f"README.md's row of `{command}` does not show {option}"


# ------------------------------------------------------------------------------ documented lines


def test_the_docs_have_commands_of_each_kind() -> None:
    modes = {mode for _, _, mode in CASES}
    assert {"run", "parse"} <= modes, "README.md needs offline commands to run and server commands to parse"
    assert any(argv[0] == "python" for _, argv, _ in CASES)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_a_documented_command_runs_or_parses(case: tuple[str, list[str], str], tmp_path: Path) -> None:
    source, argv, mode = case
    where = f"{source}: {shlex.join(argv)}"
    if mode == "run":  # as written, as a user would; its outputs go to a temporary directory
        module = "propius.cli" if argv[0] == "propius" else "clients.daemon"
        result = subprocess.run([sys.executable, "-m", module, *argv[1:]], cwd=tmp_path, capture_output=True,
                                text=True, timeout=RUN_TIMEOUT_S, env=_environment())
        assert result.returncode == 0, f"{where}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    elif argv[0] == "python":
        result = subprocess.run(_benchmark_program(argv), cwd=ROOT, capture_output=True, text=True, timeout=120,
                                env=_environment())
        unknown = "unrecognized arguments" in result.stderr
        assert result.returncode == 0 or (mode == "flags" and not unknown), f"{where}\n{result.stderr[-3000:]}"
    else:
        app = propius_app if argv[0] == "propius" else client_app
        try:
            parse_only(typer.main.get_command(app), argv[1:], argv[0], strict=mode == "parse")
        except click.ClickException as error:
            pytest.fail(f"{where}\n{error.format_message()}")
