"""A vector store's chunks in memory, searched hybrid: the cosine of each chunk's embedding with the query's
(one matrix product: the embeddings are unit length) and BM25 over the chunks' words (an inverted index, so only
the query's terms are read), fused as `embedding_weight * cosine + text_weight * bm25 / best bm25` (weights
from `ranking_options.hybrid_search`, default 0.7 and 0.3; `ranker: "none"`: the cosine alone). Scores are in
[0, 1], which `score_threshold` compares with.

An index is built once per version of its store (rostra/store/vector_store.py), in a thread, and kept: a search
of an unchanged store costs the product and a partial sort (benchmarks/bench_vector_search.py).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rostra.store.vector_objects import Attributes, IndexRow

_WORD = re.compile(r"\w+", re.UNICODE)
BM25_K1, BM25_B = 1.2, 0.75


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Weights:
    embedding: float = 0.7
    text: float = 0.3


@dataclass(frozen=True)
class Hit:
    row: IndexRow
    score: float


class SearchIndex:
    def __init__(self, rows: Sequence[IndexRow], dimensions: int | None = None):
        self.rows = list(rows)
        width = dimensions or (len(self.rows[0].embedding) // 4 if self.rows else 1)
        self.matrix = np.frombuffer(b"".join(row.embedding for row in self.rows), dtype=np.float32).reshape(
            len(self.rows), width) if self.rows else np.zeros((0, width), dtype=np.float32)
        postings: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        lengths = np.zeros(len(self.rows), dtype=np.float32)
        for number, row in enumerate(self.rows):
            terms = Counter(words(row.text))
            lengths[number] = sum(terms.values())
            for term, count in terms.items():
                where, counts = postings[term]
                where.append(number)
                counts.append(count)
        self.postings = {term: (np.asarray(where, dtype=np.int64), np.asarray(counts, dtype=np.float32))
                         for term, (where, counts) in postings.items()}
        self.lengths = lengths
        self.average_length = float(lengths.mean()) if len(lengths) else 1.0
        # Each chunk's file, numbered (a filter is decided once per file, then spread to its chunks by this).
        numbers: dict[str, int] = {}
        self.file_attributes: list[Attributes | None] = []
        for row in self.rows:
            if row.file_id not in numbers:
                numbers[row.file_id] = len(numbers)
                self.file_attributes.append(row.attributes)
        self.file_of = np.asarray([numbers[row.file_id] for row in self.rows], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.rows)

    def bm25(self, query: str) -> np.ndarray:
        scores = np.zeros(len(self.rows), dtype=np.float32)
        if not self.rows:
            return scores
        norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lengths / max(self.average_length, 1e-6))
        for term in set(words(query)):
            found = self.postings.get(term)
            if found is None:
                continue
            where, counts = found
            idf = math.log(1 + (len(self.rows) - len(where) + 0.5) / (len(where) + 0.5))
            scores[where] += idf * counts * (BM25_K1 + 1) / (counts + norm[where])
        return scores

    def scores(self, vectors: np.ndarray, queries: Sequence[str], weights: Weights | None) -> np.ndarray:
        """Each chunk's score: the best over the queries (`vectors` their unit embeddings, one per row)."""
        cosine = np.clip(self.matrix @ vectors.T, 0.0, 1.0)  # (chunks, queries)
        if weights is None:
            return np.asarray(cosine.max(axis=1))
        total = weights.embedding + weights.text
        fused = np.zeros(len(self.rows), dtype=np.float32)
        for column, query in enumerate(queries):
            keyword = self.bm25(query)
            best = float(keyword.max()) if len(keyword) else 0.0
            if best > 0:
                keyword /= best
            score = (weights.embedding * cosine[:, column] + weights.text * keyword) / total
            np.maximum(fused, score, out=fused)
        return fused  # type: ignore[no-any-return]

    def search(self, vectors: np.ndarray, queries: Sequence[str], limit: int, threshold: float = 0.0,
               weights: Weights | None = Weights(),
               keep: Callable[[Attributes | None], bool] | None = None) -> list[Hit]:
        """The best `limit` chunks at or above `threshold` (of files whose attributes `keep` takes), best first."""
        if not self.rows:
            return []
        scores = self.scores(vectors, queries, weights)
        if keep is not None:
            scores[~self._mask(keep)] = -1.0
        limit = min(limit, len(scores))
        best = np.argpartition(-scores, limit - 1)[:limit]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [Hit(self.rows[number], float(scores[number])) for number in best
                if scores[number] >= threshold and scores[number] >= 0]

    def _mask(self, keep: Callable[[Attributes | None], bool]) -> np.ndarray:
        """Which chunks' files `keep` takes (decided once per file)."""
        files = np.asarray([keep(attributes) for attributes in self.file_attributes], dtype=bool)
        return files[self.file_of] if len(files) else np.zeros(len(self.rows), dtype=bool)


def unit(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors as float32 rows of length 1 (a zero vector stays zero)."""
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)
