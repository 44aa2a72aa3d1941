"""The embedder protocol every model implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: reading a file's model fingerprint needs no numpy
    import numpy as np


@dataclass(frozen=True)
class ModelFingerprint:
    """What identifies the vector space a file was built with.

    Two embedders with equal fingerprints produce interchangeable vectors; a file records the
    fingerprint of the embedder that filled it and refuses to be searched with another one.
    """

    name: str
    dimension: int
    version: str

    def describe(self) -> str:
        return f"{self.name} (dim {self.dimension}, version {self.version})"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def fingerprint(self) -> ModelFingerprint: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dimension), float32, each row of unit length."""
        ...


class EmbeddingModelError(RuntimeError):
    """The embedding model cannot be loaded (missing package, altered file, ...)."""


class DelegatingEmbedder:
    """An embedder that forwards to another: subclass it to observe or alter `embed` (timing in
    benchmarks, counting or failing calls in tests) without repeating the protocol."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def fingerprint(self) -> ModelFingerprint:
        return self.inner.fingerprint

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)
