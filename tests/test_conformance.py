"""The official MCP conformance suite against `kbmcp serve --http` (bench/conformance.sh): every
scenario that applies to a knowledge server passes. ~5 s once the suite is installed (~20 s the
first time: npm installs Node 22 and the suite from the registry)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.mcp_support import REPO_ROOT


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm to install the suite")
def test_every_applicable_conformance_scenario_passes() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBMCP_")}
    env["PYTHON"] = sys.executable
    run = subprocess.run(
        ["bash", str(REPO_ROOT / "bench" / "conformance.sh")],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = run.stdout.splitlines()[1]
    applicable, total = summary.removeprefix("applies to kbmcp: ").split(" pass")[0].split(" of ")
    assert applicable == total and int(total) >= 11, run.stdout
    assert "logging-set-level" in run.stdout and "completion-complete" in run.stdout
