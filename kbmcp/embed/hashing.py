"""A deterministic, model-free embedder for tests: signed feature hashing of words and trigrams.

Features of a text are its lower-cased words (``\\w+``) and the character 3-grams of each word
wrapped in boundary markers (``<cat>`` -> ``<ca``, ``cat``, ``at>``). Each feature is hashed
with blake2b (stable across processes, unlike the salted built-in ``hash``) to a bucket and a
sign; the signed counts are L2-normalised. Texts with no features embed to the zero vector.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from kbmcp.embed.base import ModelFingerprint

_WORD = re.compile(r"\w+")


@lru_cache(maxsize=1 << 18)
def _hash_feature(feature: str) -> int:
    """A stable 64-bit hash of a feature string."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def text_features(text: str) -> list[str]:
    """The word and character-trigram features of ``text`` (namespaced so they never collide)."""
    features: list[str] = []
    for word in _WORD.findall(text.lower()):
        features.append("w:" + word)
        marked = f"<{word}>"
        features.extend("c:" + marked[i : i + 3] for i in range(len(marked) - 2))
    return features


class HashingEmbedder:
    """Signed feature hashing into ``dimension`` buckets; deterministic and dependency-free."""

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 1:
            raise ValueError("dimension must be at least 1")
        self._dimension = dimension
        self._fingerprint = ModelFingerprint(name="hashing", dimension=dimension, version="1")

    @property
    def name(self) -> str:
        return "hashing"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def fingerprint(self) -> ModelFingerprint:
        return self._fingerprint

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dimension), float32; unit rows, or zero rows for featureless text."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._embed_one(text)
        return out

    def _embed_one(self, text: str) -> np.ndarray:
        hashes = np.fromiter((_hash_feature(f) for f in text_features(text)), dtype=np.uint64)
        if hashes.size == 0:
            return np.zeros(self._dimension, dtype=np.float32)
        buckets = (hashes >> np.uint64(1)) % np.uint64(self._dimension)
        signs = np.where(hashes & np.uint64(1), 1.0, -1.0)
        vector = np.bincount(buckets.astype(np.intp), weights=signs, minlength=self._dimension)
        norm = np.linalg.norm(vector)
        if norm == 0.0:  # every feature cancelled out
            return np.zeros(self._dimension, dtype=np.float32)
        return (vector / norm).astype(np.float32)
