"""The engines `rostra serve --engine NAME` knows, registered like the parsers: each entry owns its own
command-line flags and builds its engine from the settings.

Nothing here imports an engine library: `load_engine` imports the chosen adapter only when it is built,
so an unused engine's dependencies are never needed (and `rostra --help` stays fast).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rostra.config import Settings
from rostra.engines import load_engine
from rostra.engines.base import Engine

FlagGroup = argparse._ArgumentGroup


@dataclass(frozen=True)
class EngineEntry:
    name: str
    summary: str  # for --engine's help
    build: Callable[[Settings], Engine]
    add_flags: Callable[[FlagGroup], None] | None = None  # the flags only this engine reads


def served_name(settings: Settings, default: str) -> str:
    return settings.served_model_name[0] if settings.served_model_name else default


# -- llama.cpp (the default) ----------------------------------------------------------------------------

def _data_dir(settings: Settings) -> Path:
    from rostra.store import default_data_dir

    return Path(settings.data_dir) if settings.data_dir else default_data_dir()


def _build_llamacpp(settings: Settings) -> Engine:
    from rostra.embedded import EMBEDDED_MODEL_NAME, embedded_model_path
    from rostra.generation_defaults import EMBEDDED_DEFAULTS, llamacpp_recommendation
    from rostra.hub.errors import HubError
    from rostra.hub.pull import resolve_model

    try:  # OWNER/NAME[:QUANT] that is not a path: from the Hub (its cache, or downloaded now)
        pulled = resolve_model(settings.model)
    except HubError as exc:
        raise SystemExit(f"rostra: {exc}") from None
    except OSError as exc:  # the cache folder unwritable, a full disk outside the download itself
        raise SystemExit(f"rostra: {settings.model}: {exc.strerror or exc}") from None
    path = pulled.model_path if pulled else Path(settings.model) if settings.model else embedded_model_path()
    default_name = pulled.reference.label if pulled else EMBEDDED_MODEL_NAME if not settings.model else path.stem
    mmproj = settings.mmproj or (pulled.projector_path if pulled else None)
    try:
        engine = load_engine("llamacpp", model_path=path, model_name=served_name(settings, default_name),
                             max_model_len=settings.max_model_len,
                             parallel=settings.parallel, threads=settings.threads, task=settings.task,
                             pooling=settings.pooling, matryoshka=settings.matryoshka,
                             cache_ram_mib=settings.cache_ram_mib, speculative=settings.speculative,
                             speculative_draft=settings.speculative_draft, flash_attn=settings.flash_attn,
                             mmproj=mmproj, calibration_dir=_data_dir(settings) / "speculation",
                             # the Hub cache's files are content-addressed, never rewritten in place: safe to map
                             mmap=settings.mmap or pulled is not None, lora=tuple(settings.lora))
    except ValueError as exc:  # a --pooling llama.cpp has not, a --speculative-draft out of range
        raise SystemExit(f"rostra: {exc}") from None
    if not settings.model:  # its GGUF recommends nothing: its model card does (complete: its length is measured)
        engine.recommended_sampling = {**EMBEDDED_DEFAULTS, **engine.recommended_sampling}
        engine.recommended_sampling_source = "its model card"
    else:
        recommended = llamacpp_recommendation(engine.recommended_sampling,
                                              pulled.generation_config_path if pulled else None,
                                              pulled.reference.repo if pulled else "")
        engine.recommended_sampling = recommended.values
        engine.recommended_sampling_source = recommended.source
    return engine


# -- scripted -------------------------------------------------------------------------------------------

def _scripted_flags(group: FlagGroup) -> None:
    group.add_argument("--script", help="scripted engine: JSONL file of {\"match\", \"output\"} lines")


def _build_scripted(settings: Settings) -> Engine:
    from rostra.embedded import embedded_model_path

    if settings.model:
        raise SystemExit("the scripted engine takes no MODEL; use --script (and --tokenizer)")
    return load_engine("scripted", script_path=settings.script,
                       tokenizer_path=settings.tokenizer or embedded_model_path(),
                       model_name=served_name(settings, "scripted"), max_model_len=settings.max_model_len)


# -- transformers ---------------------------------------------------------------------------------------

def _transformers_flags(group: FlagGroup) -> None:
    group.add_argument("--device", default="auto",
                       help="transformers engine: torch device, e.g. cpu, cuda, cuda:1 (default auto: CUDA if present)")


def _build_transformers(settings: Settings) -> Engine:
    from rostra.engines.embedding_recipe import RecipeError, is_embedding_checkpoint, is_reranker_checkpoint

    if not settings.model:
        raise SystemExit("the transformers engine needs MODEL: a checkpoint directory or a Hugging Face Hub id")
    if settings.speculative == "on":
        # transformers' prompt lookup (`prompt_lookup_num_tokens`) is an option of generate(), which decodes one
        # request at a time; rostra's engine runs its own batched decode loop (transformers_batch.py) and
        # samples each row itself, where a draft would need a variable-length step per row.
        raise SystemExit("--speculative on: the transformers engine does not draft (its batched decode loop is "
                         "not generate(), whose prompt_lookup_num_tokens it would need); use llamacpp or vllm")
    if settings.task == "generate" and settings.pooling:
        raise SystemExit("--pooling is for embedding models: it cannot go with --task generate")
    if settings.task == "rerank" or (settings.task == "auto" and not settings.pooling
                                     and is_reranker_checkpoint(settings.model)):
        return _transformers_reranker(settings)
    if settings.task == "embed" or (settings.task == "auto" and (settings.pooling or
                                                                 is_embedding_checkpoint(settings.model))):
        try:
            return load_engine("transformers_embed", model=settings.model,
                               model_name=settings.served_model_name[0] if settings.served_model_name else None,
                               max_model_len=settings.max_model_len, dtype=settings.dtype, device=settings.device,
                               threads=settings.threads, pooling=settings.pooling, matryoshka=settings.matryoshka)
        except RecipeError as exc:
            raise SystemExit(f"rostra: {exc}") from None
    try:
        return load_engine("transformers", model=settings.model,
                           model_name=settings.served_model_name[0] if settings.served_model_name else None,
                           max_model_len=settings.max_model_len, parallel=settings.parallel, dtype=settings.dtype,
                           device=settings.device, threads=settings.threads, lora=tuple(settings.lora))
    except (FileNotFoundError, ValueError) as exc:  # a --lora that is no PEFT LoRA adapter
        if not settings.lora:
            raise
        raise SystemExit(f"rostra: --lora: {exc}") from None


def _transformers_reranker(settings: Settings) -> Engine:
    """A cross-encoder (detected from its config), or a causal LM scored from its yes/no logits (--task rerank)."""
    if settings.pooling:
        raise SystemExit("--pooling is for embedding models: it cannot go with --task rerank")
    try:
        return load_engine("transformers_rerank", model=settings.model,
                           model_name=settings.served_model_name[0] if settings.served_model_name else None,
                           max_model_len=settings.max_model_len, dtype=settings.dtype, device=settings.device,
                           threads=settings.threads)
    except ValueError as exc:
        raise SystemExit(f"rostra: {exc}") from None


# -- vLLM -----------------------------------------------------------------------------------------------

def _vllm_flags(group: FlagGroup) -> None:
    group.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs each layer is split across (default 1)")
    group.add_argument("--pipeline-parallel-size", type=int, default=1,
                       help="GPUs or nodes the layers are split across (default 1)")
    group.add_argument("--gpu-memory-utilization", type=float,
                       help="fraction of each GPU's memory for weights and KV cache (default: vLLM's)")
    group.add_argument("--vllm-arg", action="append", default=[], metavar="KEY=VALUE",
                       help="any other vLLM engine argument, VALUE read as YAML, e.g. max_num_seqs=256 or "
                            "distributed_executor_backend=ray (repeatable)")
    group.add_argument("--trust-request-mm-kwargs", action="store_true",
                       help="let requests set mm_processor_kwargs (they change what an image costs), as vLLM's flag")


def _build_vllm(settings: Settings) -> Engine:
    if not settings.model:
        raise SystemExit("the vllm engine needs a MODEL: a Hugging Face model id or a model directory")
    if settings.pooling:
        raise SystemExit("--pooling: with vLLM, set its pooler with --vllm-arg pooler_config=...")
    try:
        return load_engine("vllm", model=settings.model,
                           model_name=served_name(settings, settings.model.rstrip("/")),
                           max_model_len=settings.max_model_len, tensor_parallel_size=settings.tensor_parallel_size,
                           pipeline_parallel_size=settings.pipeline_parallel_size,
                           gpu_memory_utilization=settings.gpu_memory_utilization, dtype=settings.dtype,
                           engine_args=settings.vllm_args, task=settings.task, matryoshka=settings.matryoshka,
                           speculative=settings.speculative, speculative_draft=settings.speculative_draft,
                           trust_request_mm_kwargs=settings.trust_request_mm_kwargs, lora=tuple(settings.lora))
    except (ImportError, ValueError) as exc:  # vLLM missing, a --vllm-arg it does not know, a --lora not PEFT
        raise SystemExit(f"rostra: {exc}") from exc


# -- remote (a gateway) ---------------------------------------------------------------------------------

def _remote_flags(group: FlagGroup) -> None:
    group.add_argument("--upstream", action="append", default=[], metavar="URL[,OPTION...]",
                       help="an OpenAI-compatible base URL, e.g. http://127.0.0.1:8001/v1 (repeatable); options: "
                            "mode=passthrough|raw, api_key_env=NAME (the variable holding its key), model=ID "
                            "(declare its models instead of asking GET /models)")
    group.add_argument("--upstream-api-key", help="Bearer key for every upstream (also env ROSTRA_UPSTREAM_API_KEY; "
                                                  "prefer the environment: flags show in `ps`)")
    group.add_argument("--upstream-retries", type=int, default=2,
                       help="retries on connection errors, 5xx and 429, each on another upstream if any (default 2)")
    group.add_argument("--upstream-timeout", type=float, default=600.0,
                       help="seconds an upstream may take to answer (default 600)")
    group.add_argument("--health-check-interval", type=float, default=5.0,
                       help="seconds between upstream health checks (GET /models; default 5)")


def _build_remote(settings: Settings) -> Engine:
    from rostra.engines.remote import parse_upstream

    if settings.model:
        raise SystemExit("the remote engine takes no MODEL: the upstreams' models are served (see --upstream)")
    if not settings.upstreams:
        raise SystemExit("the remote engine needs at least one --upstream URL")
    if settings.served_model_name:
        raise SystemExit("the remote engine serves the upstreams' model names (declare them with ,model=ID)")
    try:
        upstreams = [parse_upstream(spec, settings.upstream_api_key) for spec in settings.upstreams]
        return load_engine("remote", upstreams=upstreams, tokenizer_path=settings.tokenizer,
                           max_model_len=settings.max_model_len, retries=settings.upstream_retries,
                           health_interval=settings.health_check_interval, timeout=settings.upstream_timeout)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


ENGINES: dict[str, EngineEntry] = {entry.name: entry for entry in [
    # llama.cpp's own settings (--parallel, --threads) are shared with transformers: common model flags.
    EngineEntry("llamacpp", "GGUF through llama.cpp, default", _build_llamacpp),
    EngineEntry("scripted", "deterministic, from --script", _build_scripted, _scripted_flags),
    EngineEntry("transformers", "PyTorch; pip install 'rostra[transformers]'", _build_transformers,
                _transformers_flags),
    EngineEntry("vllm", "GPU; MODEL is a Hugging Face model id or directory; pip install 'rostra[vllm]'",
                _build_vllm, _vllm_flags),
    EngineEntry("remote", "a gateway in front of --upstream servers", _build_remote, _remote_flags),
]}


# The engines that serve `--lora` adapters (GGUF on llama.cpp, PEFT directories on transformers and vLLM).
LORA_ENGINES = frozenset({"llamacpp", "transformers", "vllm"})


def build_engine(settings: Settings) -> Engine:
    if settings.lora and settings.engine not in LORA_ENGINES:
        raise SystemExit(f"rostra: --lora: LoRA adapters are served by the {', '.join(sorted(LORA_ENGINES))} "
                         f"engines, not --engine {settings.engine}")
    return ENGINES[settings.engine].build(settings)
