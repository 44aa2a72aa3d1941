"""Embedders: the protocol, the default offline MiniLM model and a hashing embedder for tests."""
