"""Embedders by configured name (`KBMCP_EMBEDDER`)."""

from __future__ import annotations

from kbmcp.embed.base import Embedder


def create_embedder(name: str) -> Embedder:
    if name == "hash":
        from kbmcp.embed.hashing import HashingEmbedder

        return HashingEmbedder()
    if name == "minilm":
        from kbmcp.embed.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    raise ValueError(f"unknown embedder {name!r}")
