"""Summarise a run of the MCP conformance suite (bench/conformance.sh): the pass count, the
scenarios that do not apply to kbmcp with the reason, and any failure of one that applies.

A scenario passes when none of its checks is a FAILURE (WARNING and INFO are advice). Exit
status 1 when a scenario that applies to a knowledge server fails.

    python bench/conformance_report.py RESULTS_DIR [--version V] [--suite S]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REFERENCE_TOOL = "needs the suite's reference tool {}: kbmcp's tools are its knowledge tools"
REFERENCE_PROMPT = "needs the suite's reference prompt {}: kbmcp defines no prompts"
REFERENCE_RESOURCE = (
    "needs the suite's reference resource {}: kbmcp's resources are the caller's documents and "
    "memory stores (kbmcp://documents/...), which resources-list checks"
)
NO_SUBSCRIPTIONS = (
    "kbmcp's resources are read on request and it sends no change notifications (it declares "
    "subscribe: false)"
)

# Scenarios that test features a knowledge server does not have, and why.
NOT_APPLICABLE: dict[str, str] = {
    # kbmcp answers a call of a tool it lacks with the JSON-RPC error the MCP specification asks
    # for (-32602); these two check only the shape of a tool result from the suite's own tools.
    "tools-call-simple-text": REFERENCE_TOOL.format("test_simple_text"),
    "tools-call-error": REFERENCE_TOOL.format("test_error_handling")
    + " (kbmcp's own tool errors: docs/tools.md, Errors)",
    "logging-set-level": "kbmcp sends no log notifications (its logs go to stderr), so it "
    "declares no logging capability and serves no logging/setLevel",
    "tools-call-image": REFERENCE_TOOL.format("test_image_content")
    + " (they return JSON text, no images)",
    "tools-call-audio": REFERENCE_TOOL.format("test_audio_content") + " (no audio)",
    "tools-call-embedded-resource": REFERENCE_TOOL.format("test_embedded_resource"),
    "tools-call-mixed-content": REFERENCE_TOOL.format("test_multiple_content_types"),
    "tools-call-with-logging": REFERENCE_TOOL.format("test_tool_with_logging")
    + "; kbmcp sends no log notifications (logs go to stderr)",
    "tools-call-with-progress": REFERENCE_TOOL.format("test_tool_with_progress")
    + "; kbmcp's calls take milliseconds and report no progress",
    "tools-call-sampling": REFERENCE_TOOL.format("test_sampling")
    + "; kbmcp never asks the client's model for anything",
    "tools-call-elicitation": REFERENCE_TOOL.format("test_elicitation")
    + "; kbmcp never asks the user questions",
    "elicitation-sep1034-defaults": "needs a tool that elicits input: kbmcp never asks the user",
    "elicitation-sep1330-enums": "needs a tool that elicits input: kbmcp never asks the user",
    "resources-read-text": REFERENCE_RESOURCE.format("test://static-text"),
    "resources-read-binary": REFERENCE_RESOURCE.format("test://static-binary"),
    "resources-templates-read": REFERENCE_RESOURCE.format("test://template/{id}/data"),
    "resources-subscribe": NO_SUBSCRIPTIONS,
    "resources-unsubscribe": NO_SUBSCRIPTIONS,
    "prompts-get-simple": REFERENCE_PROMPT.format("test_simple_prompt"),
    "prompts-get-with-args": REFERENCE_PROMPT.format("test_prompt_with_arguments"),
    "prompts-get-embedded-resource": REFERENCE_PROMPT.format("test_prompt_with_embedded_resource"),
    "prompts-get-with-image": REFERENCE_PROMPT.format("test_prompt_with_image"),
    # pending suite
    "json-schema-2020-12": REFERENCE_TOOL.format("json_schema_2020_12_tool"),
    "server-sse-polling": REFERENCE_TOOL.format("test_reconnection")
    + " (kbmcp does send the priming event and retry field to 2025-11-25 clients; the scenario "
    "posts with protocol version 2025-03-26, for which the SDK sends none)",
}

RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def scenario_results(results: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for folder in sorted(results.iterdir()):
        match = RESULT_DIR.match(folder.name)
        if match and (folder / "checks.json").exists():
            found[match["scenario"]] = json.loads((folder / "checks.json").read_text())
    return found


def _listed(checks: list[dict]) -> str:
    """How many resources resources-list saw (the knowledge base's documents): a pass over an
    empty list would check nothing."""
    counts = [
        c["details"]["resourceCount"] for c in checks if "resourceCount" in c.get("details", {})
    ]
    return f" ({counts[0]} resources listed)" if counts else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--version", default="?")
    parser.add_argument("--suite", default="active")
    args = parser.parse_args()
    scenarios = scenario_results(args.results)
    if not scenarios:
        print(f"no scenario results in {args.results}", file=sys.stderr)
        return 1
    passed = {
        name for name, checks in scenarios.items()
        if not any(check["status"] == "FAILURE" for check in checks)
    }  # fmt: skip
    applicable = sorted(set(scenarios) - set(NOT_APPLICABLE))
    failing = [name for name in applicable if name not in passed]
    print(
        f"MCP conformance (@modelcontextprotocol/conformance {args.version}, {args.suite} suite): "
        f"{len(passed)} of {len(scenarios)} scenarios pass"
    )
    print(f"applies to kbmcp: {len(applicable) - len(failing)} of {len(applicable)} pass")
    for name in applicable:
        print(f"  {'pass' if name in passed else 'FAIL'}  {name}{_listed(scenarios[name])}")
    not_applicable = sorted(set(scenarios) & set(NOT_APPLICABLE))
    print(f"does not apply to a knowledge server ({len(not_applicable)}):")
    for name in not_applicable:
        print(f"  {name}: {NOT_APPLICABLE[name]}")
    for name in failing:
        problems = [
            c.get("errorMessage") or c["id"] for c in scenarios[name] if c["status"] == "FAILURE"
        ]
        print(f"FAILED {name}: {'; '.join(problems)}", file=sys.stderr)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
