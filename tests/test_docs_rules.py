"""House rules for the docs that a reviewer would otherwise have to remember.

The README stays short enough to read; no tracked file cites a tracker number (the
tracker is not in the repository, so say what the work was); every benchmark page
leads with today's figure and the command that produced them and keeps its history
newest first; and relative links between the docs resolve, anchors included.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))

README_MAX_LINES = 200
# The word, then a number (with a space, a hyphen or "#" between): a number in a tracker
# the repository does not have.
TRACKER_REF = re.compile(r"\b[Ii]ssue[ -]?#?\d+")
# A command line in an indented (4 spaces) or fenced block; a wrapper such as
# `nice -n 10` or `taskset -c 1` may come first.
BENCH_COMMAND = re.compile(r"^(?: {4}|\t)(?:[\w=$./-]+ )*voicepipe bench \S", re.M)
FIGURE = re.compile(r"\d[\d,.]*\s?(?:%|×|ms\b|s\b|tok/s|MB\b|dB\b)")
DATED = re.compile(r"^## (20\d\d-\d\d-\d\d)", re.M)
DATE_ROW = re.compile(r"^\| (20\d\d-\d\d-\d\d) \|")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / p for p in out.split()]


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of every '## ' section, in order."""
    parts = re.split(r"^## (.*)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/"
    )


def test_no_tracker_numbers() -> None:
    found = []
    for path in _tracked("*.md", "*.py", "*.toml"):
        text = path.read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            if m := TRACKER_REF.search(line):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {m.group(0)!r}")
    assert not found, "say what the work was, not its tracker number:\n" + "\n".join(found)


def test_there_are_benchmark_pages() -> None:
    assert len(PAGES) >= 5, PAGES


def test_each_benchmark_page_leads_with_a_figure_and_its_command() -> None:
    problems = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT)
        if not text.startswith("# "):
            problems.append(f"{name}: does not start with its title")
        sections = _sections(text)
        if not sections or sections[0][0] != "Current":
            problems.append(f"{name}: its first section is not '## Current'")
            continue
        lead = sections[0][1]
        if not BENCH_COMMAND.search(lead):
            problems.append(f"{name}: '## Current' shows no `voicepipe bench` command line")
        if not FIGURE.search(lead):
            problems.append(f"{name}: '## Current' quotes no figure")
    assert not problems, "\n".join(problems)


def test_benchmark_history_is_newest_first() -> None:
    problems = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        dates = DATED.findall(text)
        if dates != sorted(dates, reverse=True):
            problems.append(f"{page.name}: dated sections out of order: {dates}")
        block: list[str] = []  # the dates of one run of consecutive table rows
        for line in [*text.splitlines(), ""]:
            if m := DATE_ROW.match(line):
                block.append(m.group(1))
                continue
            if block != sorted(block, reverse=True):
                problems.append(f"{page.name}: table rows out of order: {block}")
            block = []
    assert not problems, "\n".join(problems)


def test_index_lists_every_benchmark_page() -> None:
    index = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    linked = {t for t in LINK.findall(index) if re.match(r"benchmarks/[^/]+\.md$", t)}
    assert linked == {f"benchmarks/{p.name}" for p in PAGES}


def test_relative_links_resolve() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *PAGES]
    broken = []
    for doc in docs:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto: not checked offline
            path_part, _, anchor = target.partition("#")
            dest = (doc.parent / path_part).resolve() if path_part else doc
            name = f"{doc.relative_to(ROOT)} -> {target}"
            if not dest.exists():
                broken.append(name)
            elif anchor and dest.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", dest.read_text(encoding="utf-8"), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{name} (no such heading)")
    assert not broken, "\n".join(broken)
