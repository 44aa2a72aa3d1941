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


def test_the_postgres_path_is_three_lines_that_exist() -> None:
    """Issue 18: the README shows the PostgreSQL path as install, copy, serve; the extra it
    installs is in pyproject.toml and the commands are the CLI's."""
    import tomllib

    from kbmcp.cli import cli

    bash_blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(), re.M | re.S)
    blocks = [b for b in bash_blocks if "kbmcp[postgres]" in b]
    assert len(blocks) == 1
    install, copy, serve = (shlex.split(line) for line in blocks[0].strip().splitlines())
    assert install == ["pip", "install", "kbmcp[postgres]"]
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert "postgres" in extras["optional-dependencies"]
    assert copy[:2] == ["kbmcp", "copy"] and copy[3].startswith("postgresql://")
    assert serve[:2] == ["kbmcp", "--db"] and serve[2] == copy[3]
    assert serve[3:] == ["serve", "--http"]
    assert {"copy", "serve"} <= set(cli.commands)
