"""Every shell command of README.md and the documentation runs as written.

The commands are the lines of fenced ``sh``/``bash``/``console`` blocks that start with
``dpcurator `` or ``.venv/bin/dpcurator`` (after an optional ``$`` prompt). Each document's
commands run in order, in a fresh folder set up as the README's ``make demo`` leaves a clone:
``.venv`` (this environment), ``examples/``, the documentation's TOML files, and the files
that the document itself shows as TOML blocks titled with a file name (```toml
title="server.toml"```). ``dpcurator`` is found on ``PATH`` from ``.venv/bin``, as after
``source .venv/bin/activate``.

Only commands that start servers or need peers are skipped: ``SKIPPED`` names each, with why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = {"sh", "bash", "console", "shell"}
PREFIXES = ("dpcurator ", ".venv/bin/dpcurator ")

# Commands not run, by their text up to the first differing character, with the reason.
SKIPPED: dict[str, str] = {
    "dpcurator serve ": "starts a server that runs until it is stopped",
    "dpcurator admin revoke-key server.toml 1a2b3c4d5e6f": (
        "the key id is a placeholder for one that `issue-key` printed"
    ),
}


@dataclass(frozen=True)
class Command:
    """One documented command: where it is written and its text."""

    document: str
    line: int
    text: str


def _fences(text: str) -> list[tuple[str, str, int, list[str]]]:
    """Fenced blocks of a Markdown text: (language, info, first line number, lines)."""
    blocks, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^\s*```(\w*)(.*)$", lines[i])
        if not opening:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        blocks.append((opening.group(1), opening.group(2), i + 2, lines[i + 1 : end]))
        i = end + 1
    return blocks


def commands(path: Path, root: Path = ROOT) -> list[Command]:
    """The dpcurator commands of a document, in order (continuation lines joined)."""
    found = []
    for language, _, first, lines in _fences(path.read_text(encoding="utf-8")):
        if language not in SHELLS:
            continue
        pending, start = "", first
        for number, raw in enumerate(lines, start=first):
            line = raw.strip().removeprefix("$ ")
            if not pending:
                start = number
            if line.endswith("\\"):
                pending += line[:-1].rstrip() + " "
                continue
            line, pending = pending + line, ""
            if line.startswith(PREFIXES):
                found.append(Command(path.relative_to(root).as_posix(), start, line))
    return found


def titled_files(path: Path) -> dict[str, str]:
    """The TOML blocks of a document titled with a file name: the files it asks you to write."""
    files = {}
    for language, info, _, lines in _fences(path.read_text(encoding="utf-8")):
        title = re.search(r'title="([^"]+)"', info)
        if language == "toml" and title:
            files[title.group(1)] = "\n".join(lines) + "\n"
    return files


def skip_reason(command: Command) -> str | None:
    """Why a command is not run, or None."""
    text = command.text.removeprefix(".venv/bin/")
    return next((why for prefix, why in SKIPPED.items() if text.startswith(prefix)), None)


def _workspace(folder: Path, document: Path) -> None:
    """A clone after `make demo`: .venv, the examples, the docs' TOML files, the document's."""
    (folder / ".venv").symlink_to(Path(sys.prefix))
    shutil.copytree(
        ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("*.ledger*")
    )
    for toml in (ROOT / "docs").rglob("*.toml"):
        target = folder / toml.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(toml, target)
    for name, content in titled_files(document).items():
        (folder / name).write_text(content, encoding="utf-8")


def test_commands_are_found() -> None:
    readme = commands(ROOT / "README.md")
    assert len(readme) >= 10
    assert any(
        c.text.startswith(".venv/bin/dpcurator query --table examples/cps.toml") for c in readme
    )
    everything = [c for document in DOCUMENTS for c in commands(document)]
    assert len(everything) >= 30
    for prefix in SKIPPED:  # no stale entries: each skip matches a documented command
        assert any(c.text.removeprefix(".venv/bin/").startswith(prefix) for c in everything), prefix


def test_continuations_prompts_and_titles(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```sh\n$ dpcurator epsilon \\\n    --steps 2\nmake demo\n```\n"
        '```toml title="a.toml"\nx = 1\n```\n```python\ndpcurator x\n```\n',
        encoding="utf-8",
    )
    found = [(c.line, c.text) for c in commands(doc, tmp_path)]
    assert found == [(2, "dpcurator epsilon --steps 2")]
    assert titled_files(doc) == {"a.toml": "x = 1\n"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "document",
    [d for d in DOCUMENTS if commands(d)],
    ids=lambda d: d.relative_to(ROOT).as_posix(),
)
def test_documented_commands_run(document: Path, tmp_path: Path) -> None:
    _workspace(tmp_path, document)
    env = {**os.environ, "PATH": f"{tmp_path / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("DPCURATOR_KEY", None)
    for command in commands(document):
        if skip_reason(command):
            continue
        result = subprocess.run(
            ["bash", "-c", command.text],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, (
            f"{command.document}:{command.line}: `{command.text}` exited {result.returncode}\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
