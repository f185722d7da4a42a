"""tabbyAPI's truncation samplers that llama.cpp lacks, for the transformers engine: top-a and tail-free.

Both take a probability vector (after temperature, top-k and min-p) and zero the tokens they cut; the most
likely token always stays.
- top-a: a token stays when its probability is at least `a` times the square of the top one's; a confident
  distribution is cut hard, a flat one barely.
- tail-free (z): the probabilities sorted, their curvature (the absolute second differences) normalised to
  a distribution; tokens stay from the head until that curvature's cumulative mass passes z, the tail where
  the curve has flattened out is cut.
"""

from __future__ import annotations

import torch


def top_a(probs: torch.Tensor, a: float) -> torch.Tensor:
    if a <= 0:
        return probs
    return probs.masked_fill(probs < a * probs.max() ** 2, 0.0)


def tail_free(probs: torch.Tensor, z: float) -> torch.Tensor:
    if z >= 1.0 or probs.numel() < 3:
        return probs
    ordered, order = torch.sort(probs, descending=True)
    curvature = (ordered[:-2] - 2 * ordered[1:-1] + ordered[2:]).abs()
    total = curvature.sum()
    if total <= 1e-6:  # a straight line (up to rounding): no tail to tell apart
        return probs
    before = torch.cumsum(curvature / total, dim=0) - curvature / total  # the mass ahead of each inner token
    keep = torch.zeros_like(ordered, dtype=torch.bool)
    keep[0] = True
    keep[1:-1] = before < z  # an inner token stays while the mass ahead of it is under z; the last never
    return torch.zeros_like(probs).scatter_(0, order, ordered.masked_fill(~keep, 0.0))
