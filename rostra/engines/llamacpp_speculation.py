"""Speculative decoding from the prompt (n-gram lookup) on the llama.cpp engine, on only where it pays.

What llama.cpp gives (the xllamacpp build rostra pins): its server drafts from the context itself
(`COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE`: when the last `size_n` tokens occurred earlier in the prompt or
output, the `size_m` tokens that followed them there are the draft), verifies the draft in one batch and
keeps the longest prefix the model itself samples: every token emitted is the model's own. The switch is
per server: this build reads no per-request speculation field from /completion (`speculative.n_max`,
`speculative.n_min` and `speculative.types` in the body were tried: drafting went on), and reports
`draft_n` / `draft_n_accepted` in each reply's timings. Once a slot has drafted, its stream carries no token
probabilities: while drafting, requests that ask for logprobs go to a second, one-slot server that does not
draft (`Speculation.undrafted`; the weights are mapped from the same file, only its context is extra).

When it pays: a step that verifies a draft of k tokens evaluates k+1 tokens in one batch. Where decoding is
memory-bound (the weights are read once per step whatever the batch), that batch costs little more than one
token, and each accepted token is nearly free; where it is compute-bound (a tiny model on a few CPU cores)
the batch costs nearly k+1 tokens, and a draft that is rejected is pure loss (issue 27 measured 0.60x on
SmolLM2-135M with llama.cpp's own server, NGRAM_SIMPLE on vs off, on 2 cores). So in `auto` rostra measures
at load, on the model just loaded, what a batch of k+1 tokens costs against decoding one, and what a step with
every slot drafting costs against one without (`Calibration`), and turns drafting on only if, in both cases, at the acceptance an edit workload reaches (`REFERENCE_ACCEPTANCE`), the
tokens a step yields outweigh its cost by `MARGIN`. Per request there is no lever (see above): llama.cpp's
n-gram gate is what keeps free text from paying (no draft unless the context repeats itself), and the
acceptance rostra observes (`AcceptanceMeter`) is logged against the break-even so that a wrong call shows.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import xllamacpp

log = logging.getLogger("rostra.engine.llamacpp")

MODES = ("auto", "on", "off")
DRAFT_LENGTHS = (4, 8, 16)  # what calibration tries; `on` without a length drafts DEFAULT_DRAFT
DEFAULT_DRAFT = 8
# Draft acceptance on an edit workload (a file given back with a small change): 56-62% measured in issue 27
# with Qwen2.5-Coder-1.5B; speculation is worth turning on only if it wins at that acceptance.
REFERENCE_ACCEPTANCE = 0.6
MARGIN = 1.15  # the expected speed-up that turns it on: below that, measurement noise could be the win
_CALIBRATION_ROUNDS = 3
_LOG_EVERY = 2048  # drafted tokens between two acceptance reports

Post = Callable[[str, dict], Awaitable[Any]]


def expected_tokens(acceptance: float, draft: int) -> float:
    """Tokens one verification step yields on average, each draft token accepted with probability
    `acceptance` until the first rejection, plus the token the model samples itself."""
    if acceptance >= 1.0:
        return draft + 1.0
    return (1.0 - acceptance ** (draft + 1)) / (1.0 - acceptance)


@dataclass(frozen=True)
class Calibration:
    """What the loaded model costs: one decoded token, and batches of n tokens evaluated at once.

    A k-token draft is checked in a batch of k+1 tokens where one token would have been decoded; with all
    `parallel` slots busy, a step evaluates parallel x (k+1) tokens where it would have evaluated `parallel`.
    Drafting must pay in both cases (a server that drafts for one stream drafts for every stream)."""
    decode_ms: float
    batch_ms: dict[int, float]  # n -> milliseconds to evaluate n new tokens in one batch
    parallel: int = 1
    drafts: tuple[int, ...] = DRAFT_LENGTHS

    def cost_ratio(self, draft: int) -> float:
        alone = self.batch_ms[draft + 1] / self.decode_ms
        if self.parallel == 1:
            return alone
        return max(alone, self.batch_ms[self.parallel * (draft + 1)] / self.batch_ms[self.parallel])

    def speedup(self, draft: int, acceptance: float = REFERENCE_ACCEPTANCE) -> float:
        return expected_tokens(acceptance, draft) / self.cost_ratio(draft)

    def best_draft(self) -> int:
        return max(self.drafts, key=self.speedup)

    def pays(self) -> bool:
        return bool(self.drafts) and self.speedup(self.best_draft()) >= MARGIN

    def summary(self) -> str:
        ratios = ", ".join(f"k={k}: {self.cost_ratio(k):.2f}x -> {self.speedup(k):.2f}x" for k in self.drafts)
        return (f"one token {self.decode_ms:.2f} ms; {self.parallel} slots; a draft's check costs (the worse of one "
                f"stream and all slots busy) / expected speed-up: {ratios}")

    @staticmethod
    def sizes(drafts: tuple[int, ...], parallel: int) -> list[int]:
        """The batch sizes to measure."""
        wanted = {k + 1 for k in drafts}
        if parallel > 1:
            wanted |= {parallel} | {parallel * (k + 1) for k in drafts}
        return sorted(wanted)


async def calibrate(post: Post, vocab_size: int, drafts: tuple[int, ...] = DRAFT_LENGTHS, parallel: int = 1,
                    rounds: int = _CALIBRATION_ROUNDS) -> Calibration:
    """Measure on the running server (no speculation): the per-token decode time of a short generation, and
    the time of evaluating n new tokens after a cached prefix, for every batch size a draft's check makes.
    The fastest of a few rounds of each: load on the machine only ever adds time."""
    rng = random.Random(27)
    ordinary = range(min(1000, vocab_size // 4), vocab_size)  # low ids are control tokens in many vocabularies
    prefix = rng.sample(ordinary, 64)
    base = {"n_predict": 1, "temperature": 0, "cache_prompt": True, "id_slot": 0}
    await post("/completion", {**base, "prompt": prefix})  # the prefix is cached from here on
    decode: list[float] = []
    sizes = Calibration.sizes(drafts, parallel)
    batch: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(rounds):
        reply = await post("/completion", {**base, "prompt": prefix, "n_predict": 9, "ignore_eos": True})
        timings = reply["timings"]
        decode.append(timings["predicted_ms"] / max(1, timings["predicted_n"]))
        for n in sizes:
            # New tokens each time: their first differs from the slot's cached continuation, so exactly
            # these n are evaluated, in one batch, after the cached prefix.
            reply = await post("/completion", {**base, "prompt": prefix + rng.sample(ordinary, n)})
            timings = reply["timings"]
            batch[n].append(timings["prompt_ms"] * n / max(1, timings["prompt_n"]))
    return Calibration(min(decode), {n: min(times) for n, times in batch.items()}, parallel, drafts)


@dataclass
class AcceptanceMeter:
    """Drafted and accepted tokens over the finished requests (llama.cpp's `draft_n`, `draft_n_accepted`)."""
    drafted: int = 0
    accepted: int = 0
    _reported: int = field(default=0, repr=False)

    def observe(self, timings: dict) -> None:
        self.drafted += timings.get("draft_n", 0)
        self.accepted += timings.get("draft_n_accepted", 0)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def due(self) -> bool:
        """Whether enough was drafted since the last report to log another."""
        if self.drafted - self._reported < _LOG_EVERY:
            return False
        self._reported = self.drafted
        return True


@dataclass
class Speculation:
    """One engine's speculation: the mode asked for, what calibration found, and what it does now."""
    mode: str = "auto"
    draft: int | None = None  # tokens per draft; None: calibration's choice (`on`: DEFAULT_DRAFT)
    cache: CalibrationCache | None = None  # measured once per model file and settings, kept in the data dir
    calibration: Calibration | None = None
    active: bool = False
    meter: AcceptanceMeter = field(default_factory=AcceptanceMeter)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"--speculative {self.mode}: choose from {', '.join(MODES)}")
        if self.draft is not None and not 1 <= self.draft <= 64:
            raise ValueError(f"--speculative-draft {self.draft}: a draft is 1 to 64 tokens")

    def configure(self, params: Any) -> None:
        """Turn n-gram drafting on in llama.cpp's server parameters (before the server is made)."""
        draft = self.draft or DEFAULT_DRAFT
        params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
        # size_n: the n-gram looked up in the context; size_m: the draft, up to that many tokens. llama.cpp
        # drafts nothing where size_m < size_n (tried: 4 after an 8-gram never drafted), so the key is
        # shorter than the draft: half of it, at least 3 tokens (shorter keys match by chance in free text).
        params.speculative.ngram_simple.size_n = max(3, min(12, draft // 2))
        params.speculative.ngram_simple.size_m = draft
        self.draft, self.active = draft, True

    @staticmethod
    def undrafted(params: Any) -> Any:
        """The parameters of the drafting server (already made from them), changed for a one-slot server that
        does not draft: llama.cpp reports no token probabilities once a slot has drafted (its stream's
        `completion_probabilities` stay empty from the first draft on), so requests that ask for logprobs
        are served there, exactly as without speculation."""
        params.n_ctx //= max(1, params.n_parallel)
        params.n_parallel = 1
        params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NONE]
        return params

    async def decide(self, post: Post, vocab_size: int, name: str, parallel: int, fingerprint: str = "") -> bool:
        """`auto`: measure the loaded model (or take the measurement kept for the same file and settings:
        `fingerprint`) and say whether to restart its server with drafting on."""
        if self.mode != "auto":
            return False
        kept = await self.recall(parallel, fingerprint)
        return self.settle(kept or await self.measure(post, vocab_size, parallel, fingerprint), name)

    def _drafts(self) -> tuple[int, ...]:
        return (self.draft,) if self.draft else DRAFT_LENGTHS

    def _key(self, parallel: int, fingerprint: str) -> str:
        return f"{fingerprint}|{self._drafts()}|{parallel}"

    async def recall(self, parallel: int, fingerprint: str) -> Calibration | None:
        """The calibration kept for the same file and settings, if any (a start that needs no probe)."""
        if not self.cache or not fingerprint:
            return None
        return await asyncio.to_thread(self.cache.load, self._key(parallel, fingerprint))

    async def measure(self, post: Post, vocab_size: int, parallel: int, fingerprint: str = "") -> Calibration:
        """Calibrate on the running server, and keep the result for the next start."""
        calibration = await calibrate(post, vocab_size, self._drafts(), parallel)
        if self.cache and fingerprint:
            await asyncio.to_thread(self.cache.save, self._key(parallel, fingerprint), calibration)
        return calibration

    def settle(self, calibration: Calibration, name: str) -> bool:
        """Take a calibration: whether drafting pays (and at which length), logged."""
        self.calibration = calibration
        pays = self.calibration.pays()
        if pays and self.draft is None:
            self.draft = self.calibration.best_draft()
        log.info("speculative decoding %s for %s (%s)", f"on, {self.draft}-token drafts" if pays else "off",
                 name, self.calibration.summary())
        return pays

    def observe(self, chunk: dict) -> None:
        """A request's last chunk: its drafting counts go into the meter."""
        if not self.active or not chunk.get("stop"):
            return
        self.meter.observe(chunk.get("timings") or {})
        if self.meter.due():
            line = f"speculative decoding: {self.meter.accepted}/{self.meter.drafted} drafted tokens accepted " \
                   f"({self.meter.acceptance:.0%})"
            if self.calibration is not None and self.draft in self.calibration.drafts:
                line += f"; break-even at this model's batch cost: {self.break_even():.0%}"
            log.info(line)

    def break_even(self) -> float:
        """The acceptance at which drafting neither wins nor loses, from the calibration."""
        assert self.calibration is not None and self.draft is not None
        ratio = self.calibration.cost_ratio(self.draft)
        low, high = 0.0, 1.0
        for _ in range(30):  # expected_tokens grows with acceptance: bisect
            middle = (low + high) / 2
            low, high = (middle, high) if expected_tokens(middle, self.draft) < ratio else (low, middle)
        return high

    def describe(self) -> dict:
        """For logs and tests: the mode, whether drafting is on, and what was measured."""
        return {"mode": self.mode, "active": self.active, "draft": self.draft if self.active else None,
                "drafted": self.meter.drafted, "accepted": self.meter.accepted,
                "calibration": None if self.calibration is None else
                {"decode_ms": self.calibration.decode_ms, "batch_ms": self.calibration.batch_ms}}


class CalibrationCache:
    """Calibrations kept in a directory (DATA_DIR/speculation), one JSON file per model file and settings: the
    measurement takes about a second on a quiet machine and minutes on a busy one, at every start otherwise.
    The key holds the file's path, size and modification time, so a changed file is measured again."""

    def __init__(self, directory: Path):
        self.directory = directory

    def _path(self, key: str) -> Path:
        return self.directory / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")

    def load(self, key: str) -> Calibration | None:
        try:
            kept = json.loads(self._path(key).read_text())
            if kept.get("key") != key:
                return None
            return Calibration(float(kept["decode_ms"]), {int(n): float(ms) for n, ms in kept["batch_ms"].items()},
                               int(kept["parallel"]), tuple(int(k) for k in kept["drafts"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # none kept, or unreadable: measured again

    def save(self, key: str, calibration: Calibration) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            target = self._path(key)
            partial = target.with_suffix(".partial")
            partial.write_text(json.dumps({"key": key, "decode_ms": calibration.decode_ms,
                                           "batch_ms": calibration.batch_ms, "parallel": calibration.parallel,
                                           "drafts": list(calibration.drafts)}))
            partial.replace(target)  # whole or not at all, for another process reading it
        except OSError as exc:
            log.warning("could not keep the speculation calibration in %s: %s", self.directory, exc)
