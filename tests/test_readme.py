"""The README's two set-up commands stay true: CI runs the README's test command, and the first
command ingests files that the repository ships."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"
CI_RUN = REPO_ROOT / ".ci" / "run"


def shell_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```(?:bash|sh|shell|console)?\n(.*?)^```", markdown, re.M | re.S)


def ci_test_command() -> str:
    lines = [line.strip() for line in CI_RUN.read_text().splitlines() if line.strip()]
    return lines[-1]


def test_the_ci_test_command_is_in_the_readme_verbatim() -> None:
    command = ci_test_command()
    assert "pytest" in command
    readme_lines = {
        line.strip() for block in shell_blocks(README.read_text()) for line in block.splitlines()
    }
    assert command in readme_lines


def add_arguments(command: str) -> list[str]:
    """The paths given to `kbmcp add` in a shell command line (`a && b && ...`)."""
    for step in command.split("&&"):
        words = shlex.split(step)
        names = [Path(word).name for word in words]
        if "kbmcp" in names and "add" in words[names.index("kbmcp") :]:
            paths = []
            for word in words[words.index("add") + 1 :]:
                if word.startswith("-"):
                    break
                paths.append(word)
            return paths
    return []


def test_the_first_command_adds_files_the_repository_ships() -> None:
    first_command = shell_blocks(README.read_text())[0].strip().splitlines()[0]
    assert "pip install" in first_command
    paths = add_arguments(first_command)
    assert paths, f"the README's first command does not run `kbmcp add`: {first_command}"
    for path in paths:
        assert (REPO_ROOT / path).exists(), f"README adds {path!r}, which the repo does not ship"


def test_add_arguments_parsing() -> None:
    command = ".venv/bin/kbmcp --db demo.db add docs README.md --kb x && kbmcp search 'q'"
    assert add_arguments(command) == ["docs", "README.md"]
    assert add_arguments("kbmcp ls && echo add") == []
