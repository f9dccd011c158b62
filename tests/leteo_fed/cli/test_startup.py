"""`leteo-fed COMMAND` imports only what COMMAND runs: the parser holds only that command's family,
with the same parser (help, defaults, errors) as the whole tree; `anonymize` loads no gRPC, no
analyst client, no federated protocol and no SciPy."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from leteo_fed.cli.main import COMMANDS, build_parser, command_of
from leteo_fed.cli.options import _value_options

REPO = Path(__file__).resolve().parents[3]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for name, sub in _subparsers(parser).items():
        yield from _tree(sub, (*path, name))


def test_every_top_level_command_is_in_the_family_table():
    """... or is a declared statistic's (those come from the registry: `cli.statistics`)."""
    from leteo_fed.cli.statistics import command_names

    assert set(_subparsers(build_parser())) == COMMANDS | command_names()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_alone_has_the_parser_it_has_in_the_whole_tree(command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    whole = dict(_tree(_subparsers(build_parser())[command], (command,)))
    alone = dict(_tree(_subparsers(build_parser(command))[command], (command,)))
    assert list(alone) == list(whole)  # the same sub-commands, in the same order
    for path, parser in whole.items():
        assert alone[path].format_help() == parser.format_help(), path
        assert alone[path].prog == parser.prog
    # `--bounds -1,1` is read as `--bounds=-1,1` alike, for every option of the command that
    # takes a value (a flag given a value is refused either way)
    takes_value = {
        o for p in whole.values() for a in p._actions if a.nargs != 0 for o in a.option_strings
    }
    joined_alone = _value_options(build_parser(command)) & takes_value
    assert joined_alone == _value_options(build_parser()) & takes_value


def test_the_command_word_is_found_after_the_global_options():
    assert command_of(["anonymize", "--input", "x"]) == "anonymize"
    assert command_of(["--log-level", "DEBUG", "owner", "serve"]) == "owner"
    assert command_of(["--log-level=DEBUG", "pca"]) == "pca"
    assert command_of(["--log", "INFO", "demo", "pca"]) == "demo"
    for whole_tree in ([], ["--help"], ["--version"], ["nonsense"], ["--log-level", "pca"]):
        assert command_of(whole_tree) is None, whole_tree


def _loaded_after(argv: list[str]) -> set[str]:
    code = (
        "import json, sys\n"
        "from leteo_fed.cli.main import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "assert code == 0, code\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


NOT_FOR_ANONYMIZE = ("grpc", "leteo_fed.client", "leteo_fed.protocols", "leteo_fed.transport")
NOT_FOR_ANONYMIZE += ("leteo_fed.demo.cluster", "scipy", "aggregator", "owner_agent", "csp")


def _offending(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded if m.startswith(NOT_FOR_ANONYMIZE))


def test_anonymize_help_loads_no_other_family():
    loaded = _loaded_after(["anonymize", "--help"])
    others = {f"leteo_fed.cli.{m}" for m in ("rounds", "dp_kmeans", "services", "kmeans", "ldp")}
    assert not loaded & others
    assert _offending(loaded) == []


def test_an_anonymize_run_loads_no_protocol_client_grpc_or_scipy(tmp_path):
    rows = ["age,zip,diagnosis"] + [f"{20 + i % 50},{1000 + i % 7},d{i % 3}" for i in range(200)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "job.toml").write_text(
        '[anonymization]\nalgorithm = "mondrian"\nk = 5\n\n'
        '[[quasi_identifier]]\ncolumn = "age"\ntype = "numeric"\n\n'
        '[[quasi_identifier]]\ncolumn = "zip"\ntype = "numeric"\n\n'
        '[[sensitive]]\ncolumn = "diagnosis"\n'
    )
    argv = ["anonymize", "--input", str(tmp_path / "data.csv"), "--config"]
    argv += [str(tmp_path / "job.toml"), "--out", str(tmp_path / "out"), "--engine", "local"]
    loaded = _loaded_after(argv)
    assert "leteo_fed.anonymize.engines.local.job" in loaded  # it did run
    assert not any(m.startswith("leteo_fed.anonymize.engines.spark") for m in loaded)
    assert _offending(loaded) == []


def test_each_builtin_statistic_command_names_the_module_declaring_it():
    """`main.STATISTIC_COMMANDS` (what a command line imports alone) is the registry's view:
    every built-in statistic's command, each with the protocol module that registers it."""
    import importlib

    from leteo_fed.cli.main import STATISTIC_COMMANDS
    from leteo_fed.cli.statistics import _default_name, commands
    from leteo_fed.protocols import registry

    declared = {}
    for protocol in registry.statistics():
        if protocol.plugin:
            continue
        for each in commands(protocol.statistic):
            declared[each.name if each is not None else _default_name(protocol.statistic)] = (
                protocol
            )
    assert set(STATISTIC_COMMANDS) == set(declared)
    for command, module in STATISTIC_COMMANDS.items():
        assert (
            importlib.import_module(f"leteo_fed.protocols.{module}").PROTOCOL is declared[command]
        )
