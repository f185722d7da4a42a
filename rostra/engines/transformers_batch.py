"""The transformers engine's decode loop: one worker thread, one dynamic batch.

Why not transformers' own continuous batching (`model.init_continuous_batching()`)? It runs on
CPU, streams and cancels, and is as fast as this loop here (`transformers serve
--continuous-batching` and rostra measure within a few percent of each other, benchmarks/README.md),
but its sampling is configured once per manager: one `do_sample` and one seed for everyone,
temperature/top-k/top-p at most per request, only the sampled token's logprob, and no
per-request logits processors. rostra needs per-request seeds, penalties, logit bias, min-p,
top-N logprobs and a grammar mask per request, so this loop samples each sequence itself
(transformers_sampling.py). What it gives up: paged attention, and prefill inside the decode
step (new requests' prefill pauses the batch's decoding for its duration).

How the batch works: the requests that are waiting when the loop takes new work are prefilled
together, in one forward pass over their prompts left-padded to the longest (an attention mask
hides the padding, position ids count only real tokens, so each row computes what it would alone);
their first tokens are sampled and their cache rows then join the running batch between two decode
steps. The batch cache is left-padded the same way: every layer's keys/values are [batch, heads,
length, dim] with shorter sequences padded at the front. A finished or aborted row is dropped
between steps (and columns that became padding for every row are cut).
Each step is one forward pass for all rows: on CPU the weights are read once per step for the
whole batch, which is where batching pays (see benchmarks/README.md); the same goes for a prefill
of several prompts, which also means the running batch waits for one prefill instead of several.

Only plain growing caches (DynamicLayer, full attention) can be padded and stacked like this;
a model with sliding-window or other cache layers runs one sequence at a time.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import inspect
import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from rostra.core import EngineOutput, FinishReason, TokenStep, TopLogprob
from rostra.engines.transformers_lora import PeftAdapters
from rostra.engines.transformers_sampling import RequestSampler

log = logging.getLogger("rostra.engine.transformers")


@dataclass
class Sequence:
    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    sampler: RequestSampler
    # Hands an output (or the exception that ended the request) to the request's consumer; thread-safe.
    deliver: Callable[[EngineOutput | BaseException], None]
    cancelled: threading.Event = field(default_factory=threading.Event)
    generated: int = 0
    next_input: int = -1  # the last sampled token: fed to the model at the next decode step
    # The prompt's scores (prompt_logprobs), handed over with the first output.
    prompt_scores: tuple[TokenStep | None, ...] | None = None
    # What the prefill reads besides the token ids: a vision model's image tensors (pixel_values...).
    model_inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    adapter: str | None = None  # the LoRA adapter this request runs with (transformers_lora.py); None: the base

    def deliver_output(self, output: EngineOutput) -> None:
        if self.prompt_scores is not None:
            output = dataclasses.replace(output, prompt_logprobs=self.prompt_scores)
            self.prompt_scores = None
        self.deliver(output)


def stackable_cache(config: Any) -> bool:
    """Whether this model's KV cache is plain full-attention layers that can be padded and stacked."""
    layers = DynamicCache(config=config).layers
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def _filled_layers(cache: DynamicCache) -> list[tuple[DynamicLayer, torch.Tensor, torch.Tensor]]:
    """Each layer with its keys and values. A batched cache holds only plain layers that a prefill
    filled (stackable_cache), so anything else is a bug, not a state to handle."""
    out = []
    for layer in cache.layers:
        if not isinstance(layer, DynamicLayer) or layer.keys is None or layer.values is None:
            raise TypeError(f"only filled DynamicLayers can be batched, not {type(layer).__name__}")
        out.append((layer, layer.keys, layer.values))
    return out


def _left_pad(tensor: torch.Tensor, amount: int, dim: int) -> torch.Tensor:
    if amount == 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = amount
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)


# Padding costs what real tokens cost: a prefill group pads at most this many tokens (or a quarter
# of its real tokens, when that is more), so a long prompt is not prefilled beside short ones at
# the price of their padding. A few dozen padded tokens cost little next to reading the weights.
PADDING_ALLOWANCE = 64


def prefill_groups(waiting: list[Sequence]) -> list[list[Sequence]]:
    """Split the waiting requests into prefill groups: a prompt to be scored alone (it needs the
    logits of every position, too costly for a whole group) and one with images alone (its image
    tensors are its own), the others longest first, a new group whenever the next prompt would pad
    the current one past the allowance."""
    def alone(sequence: Sequence) -> bool:
        return sequence.sampler.params.prompt_logprobs is not None or bool(sequence.model_inputs)

    groups = [[s] for s in waiting if alone(s)]
    current: list[Sequence] = []
    real = 0
    for sequence in sorted((s for s in waiting if not alone(s)),
                           key=lambda s: len(s.prompt_ids), reverse=True):
        length = len(sequence.prompt_ids)
        if current:
            padding = (len(current) + 1) * len(current[0].prompt_ids) - (real + length)
            if padding > max(PADDING_ALLOWANCE, (real + length) // 4):
                groups.append(current)
                current, real = [], 0
        current.append(sequence)
        real += length
    if current:
        groups.append(current)
    return groups


def _take_rows(cache: DynamicCache, mask: torch.Tensor, keep: list[int]) -> torch.Tensor:
    """Keep only rows `keep` of a left-padded cache (in place) and return their mask; columns that
    are padding in every remaining row carry nothing and are cut."""
    index = torch.tensor(keep, dtype=torch.long, device=mask.device)
    mask = mask.index_select(0, index)
    start = int(torch.nonzero(mask.sum(dim=0))[0])
    for layer, keys, values in _filled_layers(cache):
        layer.keys = keys.index_select(0, index)[:, :, start:]
        layer.values = values.index_select(0, index)[:, :, start:]
    return mask[:, start:]


class BatchDecoder:
    def __init__(self, model: Any, max_batch: int, eos_ids: set[int], token_bytes: Callable[[int], bytes],
                 prefill_threads: int | None = None):
        """`prefill_threads`: torch's threads while prefilling, if not the decode steps' (CPU: a prefill is a
        few large matrix products, which every core speeds up; a decode step is thousands of small
        operations, which extra threads slow down, see cpu_threads in transformers.py)."""
        self.model = model
        self.adapters = PeftAdapters(model)  # forward passes run self.adapters.model: the base, or PEFT's over it
        self.prefill_threads = prefill_threads
        # The engine's share of the process's cores now (thread_budget.py; set from any thread), None: no cap.
        self.core_cap: int | None = None
        self._decode_threads = 1  # torch's threads for decode steps as configured (read when the worker starts)
        # Most causal LMs can compute the lm head for the last position only; older ones cannot.
        self._last_logits_only = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(
            model.forward).parameters else {}
        self.max_batch = max_batch
        self.eos_ids = eos_ids
        self.token_bytes = token_bytes
        self._pending: queue.Queue[Sequence] = queue.Queue()
        # Work on the model itself (loading an adapter), run by the worker between two steps.
        self._chores: queue.Queue[tuple[Callable[[], None], concurrent.futures.Future]] = queue.Queue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        # The batch, owned by the worker thread: rows in cache order, cache, padding mask [rows, length].
        self._rows: list[Sequence] = []
        self._cache: DynamicCache | None = None
        self._mask: torch.Tensor | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="transformers-decode", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Blocks until the worker has left its loop (the current step finishes first)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def submit(self, sequence: Sequence) -> None:
        self._pending.put(sequence)

    def between_steps(self, chore: Callable[[], None]) -> concurrent.futures.Future:
        """Run `chore` on the worker thread between two steps (no forward pass under way); its future tells
        when it has run, or what it raised."""
        done: concurrent.futures.Future = concurrent.futures.Future()
        if self._thread is None or not self._thread.is_alive():  # not started, or stopped: nothing runs meanwhile
            self._run_chore(chore, done)
        else:
            self._chores.put((chore, done))
        return done

    @staticmethod
    def _run_chore(chore: Callable[[], None], done: concurrent.futures.Future) -> None:
        try:
            with torch.inference_mode(False):  # weights loaded now are plain tensors, as those loaded at start
                chore()
        except BaseException as exc:
            done.set_exception(exc)
        else:
            done.set_result(None)

    def running_ids(self) -> set[str]:
        """The requests of the running batch's rows (read from other threads: from a copy)."""
        return {row.request_id for row in list(self._rows)}

    # ------------------------------------------------------------------ worker thread only

    def _run(self) -> None:
        self._decode_threads = torch.get_num_threads()
        with torch.inference_mode():
            while not self._stopping.is_set():
                while not self._chores.empty():
                    self._run_chore(*self._chores.get_nowait())
                try:
                    self._admit_pending()
                    self._fit_threads()
                    if self._rows:
                        self._decode_step()
                except Exception as exc:  # a failed step fails every request in it, not the engine
                    log.exception("decode step failed")
                    for row in self._rows:
                        row.deliver(exc)
                    self._reset()
        shutting_down = RuntimeError("the engine is shutting down")
        for row in self._rows:
            row.deliver(shutting_down)
        self._reset()
        while not self._pending.empty():  # requests that never got a row must not wait forever
            self._pending.get_nowait().deliver(shutting_down)
        while not self._chores.empty():
            self._chores.get_nowait()[1].set_exception(shutting_down)

    def _admit_pending(self) -> None:
        waiting: list[Sequence] = []
        while len(self._rows) + len(waiting) < self.max_batch:
            try:
                # Idle: wait (briefly, to notice `stop`); busy: take only what is already there.
                idle = not self._rows and not waiting
                sequence = self._pending.get(timeout=0.2) if idle else self._pending.get_nowait()
            except queue.Empty:
                break
            if sequence.cancelled.is_set():
                continue
            if sequence.max_tokens <= 0:
                sequence.deliver(EngineOutput(finish_reason="length"))
                continue
            waiting.append(sequence)
        for group in prefill_groups(waiting):
            try:
                self._prefill(group)
            except Exception as exc:
                log.exception("prefill failed for %s", ", ".join(s.request_id for s in group))
                for sequence in group:
                    sequence.deliver(exc)

    def _prefill(self, group: list[Sequence]) -> None:
        """One forward pass over the group's prompts, left-padded to the longest; the first token of
        each is sampled and the rows that go on join the batch."""
        device = self.model.device
        width = max(len(s.prompt_ids) for s in group)
        input_ids = torch.zeros((len(group), width), dtype=torch.long, device=device)
        mask = torch.zeros((len(group), width), dtype=torch.long, device=device)
        for index, sequence in enumerate(group):
            length = len(sequence.prompt_ids)
            input_ids[index, width - length:] = torch.tensor(sequence.prompt_ids, dtype=torch.long)
            mask[index, width - length:] = 1
        padded = not bool(mask.all())
        # Without padding (one prompt, or prompts of one length) the mask and positions say nothing:
        # leaving them out takes the plain causal path, as a prompt alone would.
        shape = {"attention_mask": mask, "position_ids": (mask.cumsum(dim=1) - 1).clamp(min=0)} if padded else {}
        top_n = group[0].sampler.params.prompt_logprobs  # (a scored prompt is always alone)
        images = group[0].model_inputs  # (so is a prompt with images)
        cache = DynamicCache(config=self.model.config)
        # Only the last position's logits are needed (the lm head over a whole prompt is costly),
        # unless the prompt is to be scored.
        with self._threads(self._capped(self.prefill_threads)):
            logits = self.adapters.model(input_ids=input_ids, past_key_values=cache, use_cache=True, **shape, **images,
                                         **self.adapters.forward_options([s.adapter for s in group]),
                                         **(self._last_logits_only if top_n is None else {})).logits
        group[0].model_inputs = {}  # (the image tensors are in the cache now)
        if top_n is not None:
            group[0].prompt_scores = self._score_prompt(group[0].prompt_ids, logits[0], top_n)
        log.debug("prefilled %d prompt(s), %d tokens padded to %d", len(group), int(mask.sum()), mask.numel())
        keep = [index for index, sequence in enumerate(group) if self._sample(sequence, logits[index, -1])]
        if not keep:
            return
        if len(keep) < len(group):
            mask = _take_rows(cache, mask, keep)
        self._join([group[index] for index in keep], cache, mask)

    def _capped(self, threads: int | None) -> int | None:
        cap = self.core_cap
        return threads if threads is None or cap is None else max(1, min(threads, cap))

    def _fit_threads(self) -> None:
        """torch's threads for decode steps within the engine's share of the cores (thread_budget.py)."""
        threads = self._capped(self._decode_threads) or self._decode_threads
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)

    @staticmethod
    @contextlib.contextmanager
    def _threads(count: int | None) -> Iterator[None]:
        """torch's intra-op threads at `count` for the block (None: unchanged), this thread's count restored after."""
        if count is None:
            yield
            return
        decode = torch.get_num_threads()
        torch.set_num_threads(count)
        try:
            yield
        finally:
            torch.set_num_threads(decode)

    def _score_prompt(self, prompt_ids: list[int], logits: torch.Tensor, top_n: int) -> tuple[TokenStep | None, ...]:
        """Each prompt token's logprob under the model (the raw distribution: no penalties or
        temperature), with its top `top_n` alternatives; the first token has none."""
        steps: list[TokenStep | None] = [None]
        for position in range(1, len(prompt_ids)):  # one row at a time: no [length, vocab] float copy
            logprobs = torch.log_softmax(logits[position - 1].float(), dim=-1)
            token_id = prompt_ids[position]
            top: tuple[TopLogprob, ...] = ()
            if top_n:
                values, ids = torch.topk(logprobs, top_n)
                top = tuple(TopLogprob(i, self.token_bytes(i), v) for i, v in zip(ids.tolist(), values.tolist()))
            steps.append(TokenStep(token_id, self.token_bytes(token_id), float(logprobs[token_id]), top))
        return tuple(steps)

    def _join(self, sequences: list[Sequence], cache: DynamicCache, mask: torch.Tensor) -> None:
        """Append prefilled rows (their cache and padding mask) to the batch, padding the narrower side."""
        if self._cache is None or self._mask is None:
            self._rows, self._cache, self._mask = sequences, cache, mask
            return
        width = max(self._mask.shape[1], mask.shape[1])
        old_pad, new_pad = width - self._mask.shape[1], width - mask.shape[1]
        for (batch_layer, keys, values), (_, new_keys, new_values) in zip(_filled_layers(self._cache),
                                                                          _filled_layers(cache)):
            batch_layer.keys = torch.cat([_left_pad(keys, old_pad, -2), _left_pad(new_keys, new_pad, -2)])
            batch_layer.values = torch.cat([_left_pad(values, old_pad, -2), _left_pad(new_values, new_pad, -2)])
        self._mask = torch.cat([_left_pad(self._mask, old_pad, 1), _left_pad(mask, new_pad, 1)])
        self._rows.extend(sequences)

    def _decode_step(self) -> None:
        assert self._cache is not None and self._mask is not None
        device = self.model.device
        input_ids = torch.tensor([[row.next_input] for row in self._rows], dtype=torch.long, device=device)
        positions = self._mask.sum(dim=1, keepdim=True)  # real tokens so far: the new token's position
        self._mask = torch.cat([self._mask, self._mask.new_ones((len(self._rows), 1))], dim=1)
        # With no padding anywhere (one row, say) the mask says nothing: leaving it out lets attention
        # take its plain causal path, a few percent faster per step on CPU.
        mask = None if bool(self._mask.all()) else self._mask
        logits = self.adapters.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                                     past_key_values=self._cache, use_cache=True,
                                     **self.adapters.forward_options([row.adapter for row in self._rows])).logits[:, -1]
        keep = [index for index, row in enumerate(self._rows) if self._sample(row, logits[index])]
        if len(keep) < len(self._rows):
            self._keep_rows(keep)

    def _sample(self, row: Sequence, logits: torch.Tensor) -> bool:
        """Sample, deliver, and tell whether the row goes on. A failure ends this row only."""
        if row.cancelled.is_set():
            return False
        try:
            return self._sample_unguarded(row, logits)
        except Exception as exc:
            log.exception("sampling failed for %s", row.request_id)
            row.deliver(exc)
            return False

    def _sample_unguarded(self, row: Sequence, logits: torch.Tensor) -> bool:
        sampler = row.sampler
        if sampler.constraint is not None and sampler.constraint.finished:
            row.deliver_output(EngineOutput(finish_reason="stop"))
            return False
        sampled = sampler.sample(logits)
        if sampled.token_id in self.eos_ids and not sampler.params.ignore_eos:
            row.deliver_output(EngineOutput(finish_reason="stop"))  # the end token itself is not output
            return False
        sampler.accept(sampled.token_id)
        row.generated += 1
        row.next_input = sampled.token_id
        reason: FinishReason | None
        if row.generated >= row.max_tokens:
            reason = "length"
        elif sampler.constraint is not None and sampler.constraint.finished:
            reason = "stop"  # the grammar is complete: only the end token could follow
        else:
            reason = None
        step = TokenStep(sampled.token_id, self.token_bytes(sampled.token_id), sampled.logprob,
                         tuple(TopLogprob(i, self.token_bytes(i), lp) for i, lp in sampled.top))
        row.deliver_output(EngineOutput((step,), reason))
        return reason is None

    def _keep_rows(self, keep: list[int]) -> None:
        if not keep:
            self._reset()
            return
        assert self._cache is not None and self._mask is not None
        self._mask = _take_rows(self._cache, self._mask, keep)
        self._rows = [self._rows[i] for i in keep]

    def _reset(self) -> None:
        self._rows, self._cache, self._mask = [], None, None

    def running(self) -> int:
        return len(self._rows)
