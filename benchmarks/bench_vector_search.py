"""Vector store search at scale (issue 47): rostra's index (rostra/api/vector_stores/index.py) over N chunks,
hybrid (cosine + BM25) and vector only, with and without an attribute filter, beside a plain brute-force numpy
baseline (every chunk's cosine with the query, then a full sort), and the index's build time.

Synthetic data (the scale is what is measured, not retrieval quality): N chunks of ~60 words drawn from a
5,000-word vocabulary, with random unit embeddings of 384 dimensions (all-MiniLM-L6-v2's width); the index is the
one a search of an unchanged store uses (kept per store version). The query embedding (one all-MiniLM call, a
few ms on a CPU) is not counted: it is the same for both.

    python benchmarks/bench_vector_search.py [--chunks 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rostra.api.vector_stores.filters import Comparison
from rostra.api.vector_stores.index import SearchIndex, Weights
from rostra.store.vector_objects import IndexRow

DIMENSIONS, WORDS_PER_CHUNK, VOCABULARY = 384, 60, 5000


def synthetic_rows(count: int, rng: np.random.Generator) -> list[IndexRow]:
    vocabulary = [f"w{n}" for n in range(VOCABULARY)]
    vectors = rng.standard_normal((count, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    # Zipf-like word frequencies, as text has.
    weights = 1.0 / np.arange(1, VOCABULARY + 1)
    weights /= weights.sum()
    words = rng.choice(VOCABULARY, size=(count, WORDS_PER_CHUNK), p=weights)
    return [IndexRow(f"file-{n // 20}", f"doc{n // 20}.txt", n % 20, " ".join(vocabulary[w] for w in words[n]),
                     vectors[n].tobytes(), {"part": int(n % 10)}) for n in range(count)]


def brute_force(matrix: np.ndarray, query: np.ndarray, limit: int) -> np.ndarray:
    """The baseline: every chunk's cosine (norms computed per query, as a plain implementation does), fully
    sorted."""
    scores = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    return np.argsort(-scores)[:limit]


def timed(run, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return times


def summary(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"| {name} | {statistics.median(times):.1f} | {p95:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(47)
    rows = synthetic_rows(args.chunks, rng)
    start = time.perf_counter()
    index = SearchIndex(rows)
    build = time.perf_counter() - start
    queries = rng.standard_normal((args.queries, DIMENSIONS)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    texts = [f"w{rng.integers(0, 300)} w{rng.integers(0, 3000)} w{rng.integers(0, 5000)}" for _ in queries]
    counter = iter(range(10**9))

    def one(**options):
        n = next(counter) % len(queries)
        return lambda: index.search(queries[n:n + 1], [texts[n]], 10, **options)

    print(f"{args.chunks} chunks x {DIMENSIONS} dims; index built in {build:.1f} s\n")
    print("| search (top 10) | median ms | p95 ms |\n|---|---|---|")
    print(summary("brute-force numpy baseline (cosine, full sort)",
                  timed(lambda: brute_force(index.matrix, queries[next(counter) % len(queries)], 10), args.queries)))
    print(summary("rostra, vector only (ranker none)", timed(lambda: one(weights=None)(), args.queries)))
    print(summary("rostra, hybrid (cosine + BM25)", timed(lambda: one(weights=Weights())(), args.queries)))
    keep = Comparison("eq", "part", 3).matches
    print(summary("rostra, hybrid + attribute filter", timed(lambda: one(keep=keep)(), args.queries)))


if __name__ == "__main__":
    main()
