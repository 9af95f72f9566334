"""docs/CLI.md cannot drift from the argument parser.

The parser of ``voicepipe/cli.py`` is built in-process (no subprocess per
command) and walked, sub-subcommands included. For every command it knows,
CLI.md must have a section headed by the command in backticks
(``## `voicepipe serve` `` or ``### `voicepipe bench e2e` ``), and that
section must document each option the parser defines as a list item starting
with the option in backticks (``- `--port PORT`: …``). The other way round, no
section may document a command or an option the parser does not have.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from voicepipe.cli import build_parser

CLI_MD = Path(__file__).resolve().parents[1] / "docs" / "CLI.md"

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_COMMAND_HEADING = re.compile(r"^`(voicepipe(?: [a-z0-9][a-z0-9-]*)*)`$")
# A list item documenting options: "- `--foo X`: …" or "- `-v`, `--verbose`: …".
_OPTION_ITEM = re.compile(r"^- ((?:`-[^`]+`(?:, )?)+)")
_CODE = re.compile(r"`([^`]+)`")


def parser_commands() -> dict[str, set[str]]:
    """Every command path the parser knows -> the option strings it defines (no -h/--help)."""
    found: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        options: set[str] = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction):
                options.update(action.option_strings)
        found[path] = options

    walk(build_parser(), "voicepipe")
    return found


def doc_sections(text: str) -> tuple[dict[str, set[str]], list[str]]:
    """Command sections of CLI.md -> the options their list items document; and problems."""
    sections: dict[str, set[str]] = {}
    problems: list[str] = []
    current: str | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        heading = _HEADING.match(line)
        if heading:
            m = _COMMAND_HEADING.match(heading.group(2))
            current = m.group(1) if m else None
            if current is not None:
                if current in sections:
                    problems.append(f"CLI.md:{lineno}: `{current}` has a second section")
                sections[current] = set()
            continue
        item = _OPTION_ITEM.match(line)
        if item and current is not None:
            for code in _CODE.findall(item.group(1)):
                sections[current].add(code.split()[0])
    return sections, problems


def drift(text: str, commands: dict[str, set[str]]) -> list[str]:
    sections, problems = doc_sections(text)
    for cmd in sorted(commands):
        if cmd not in sections:
            problems.append(
                f"docs/CLI.md has no section for `{cmd}`: add a heading "
                f"'### `{cmd}`' documenting its options {sorted(commands[cmd]) or '(none)'}"
            )
            continue
        for opt in sorted(commands[cmd] - sections[cmd]):
            problems.append(
                f"docs/CLI.md, section `{cmd}`: option {opt} is not documented "
                f"(add a list item '- `{opt} …`: …'; see `{cmd} --help`)"
            )
        for opt in sorted(sections[cmd] - commands[cmd]):
            problems.append(
                f"docs/CLI.md, section `{cmd}`: documents {opt}, which `{cmd}` does not define"
            )
    for cmd in sorted(set(sections) - set(commands)):
        problems.append(f"docs/CLI.md documents `{cmd}`, which the parser does not know")
    return problems


def test_cli_md_matches_the_parser() -> None:
    problems = drift(CLI_MD.read_text(encoding="utf-8"), parser_commands())
    assert not problems, "docs/CLI.md has drifted from voicepipe/cli.py:\n" + "\n".join(problems)


def test_drift_is_detected() -> None:
    """The check can fail, and says where: a missing section, option, or an invented one."""
    commands = parser_commands()
    text = CLI_MD.read_text(encoding="utf-8")
    e2e = text.index("### `voicepipe bench e2e`")
    edited = text[:e2e] + text[e2e:].replace("- `--concurrency N`:", "- `--concurency N`:", 1)
    edited = edited.replace("### `voicepipe bench jitter`", "### bench jitter", 1)
    problems = "\n".join(drift(edited, commands))
    assert "section `voicepipe bench e2e`: option --concurrency is not documented" in problems
    assert "section `voicepipe bench e2e`: documents --concurency" in problems
    assert "no section for `voicepipe bench jitter`" in problems
    assert "section `voicepipe client`" not in problems

    commands["voicepipe bench startup"] = {"--json"}
    commands["voicepipe serve"] = commands["voicepipe serve"] | {"--workers"}
    problems = "\n".join(drift(text, commands))
    assert "no section for `voicepipe bench startup`" in problems
    assert "section `voicepipe serve`: option --workers is not documented" in problems
