"""Retrieval-evaluation building blocks: BEIR dataset loading and graded-relevance metrics."""
