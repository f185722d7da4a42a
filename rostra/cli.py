"""`rostra serve [MODEL]`: flags in the spirit of `vllm serve`."""

from __future__ import annotations

import argparse
import logging
import math
import os
import socket
import sys
from pathlib import Path
from typing import Any

from rostra import __version__
from rostra.api_keys import ApiKey, read_key_file
from rostra.config import Settings
from rostra.engines.registry import ENGINES, FlagGroup, build_engine
from rostra.hub.commands import add_commands as add_hub_commands
from rostra.hub.commands import run as run_hub_command
from rostra.lora import LoraAdapter
from rostra.model_aliases import ModelAlias
from rostra.models.checks import MAX_PARALLEL, SettingError, check_ranges
from rostra.models.specs import ModelConfigError, parse_size
from rostra.parsing.reasoning import reasoning_parser_names
from rostra.parsing.tools import tool_parser_names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rostra", description="rostra: an OpenAI-compatible LLM server.")
    parser.add_argument("--version", action="version", version=f"rostra {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve", help="serve a model over the OpenAI API",
        description="Serve a model over the OpenAI API (Chat Completions, Completions, Responses, Models).")
    serve.add_argument("model", nargs="*", metavar="MODEL",
                       help="a GGUF file or a Hugging Face Hub GGUF repository, OWNER/NAME[:QUANT] (downloaded "
                            "once; default: the embedded SmolLM2-135M-Instruct); transformers engine: a "
                            "checkpoint directory or hub id. Several: each served under its own name, loaded when "
                            "a request names it (see --models-dir)")
    serve.add_argument("--engine", choices=list(ENGINES), default="llamacpp",
                       help="; ".join(f"{entry.name} ({entry.summary})" for entry in ENGINES.values()))
    for title, add_flags in FLAG_GROUPS:
        add_flags(serve.add_argument_group(title))
    for entry in ENGINES.values():
        if entry.add_flags is not None:
            entry.add_flags(serve.add_argument_group(f"{entry.name} engine"))
    serve.add_argument("--config", help="a YAML file of settings: the flags' names as keys (flags win)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _batch_command(commands)
    add_hub_commands(commands)
    return parser


def _lora(given: list[str]) -> list[LoraAdapter]:
    try:
        return [LoraAdapter.parse(text) for text in given]
    except ValueError as exc:
        raise SystemExit(f"rostra: {exc}") from None


def _model_aliases(given: list[str]) -> list[ModelAlias]:
    try:
        return [ModelAlias.parse(text) for text in given]
    except ValueError as exc:
        raise SystemExit(f"rostra: {exc}") from None


def _batch_command(commands: Any) -> None:
    """`rostra batch FILE.jsonl -o OUT.jsonl`: offline, with `serve`'s model flags."""
    batch = commands.add_parser("batch", help="answer a Batch API input file offline (vLLM's run-batch)",
                                description="Answer every line of a Batch API input file (JSONL) with a model, "
                                            "without a server; results in input order.")
    batch.add_argument("input", metavar="FILE.jsonl", help="the requests, one Batch API line each")
    batch.add_argument("-o", "--output", required=True, metavar="OUT.jsonl", help="where the results go")
    batch.add_argument("--model", dest="model", action="append", default=[], metavar="MODEL",
                       help="the model (as `serve MODEL`; default: the embedded SmolLM2-135M-Instruct)")
    batch.add_argument("--engine", choices=list(ENGINES), default="llamacpp")
    for title, add_flags in FLAG_GROUPS:
        add_flags(batch.add_argument_group(title))
    for entry in ENGINES.values():
        if entry.add_flags is not None:
            entry.add_flags(batch.add_argument_group(f"{entry.name} engine"))
    batch.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    batch.set_defaults(config=None)


def _server_flags(group: FlagGroup) -> None:
    """Where to listen."""
    group.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    group.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    group.add_argument("--no-ui", dest="ui", action="store_false",
                       help="no playground page at / (default: a chat page there that uses the API)")


def _model_flags(group: FlagGroup) -> None:
    """The model, whatever the engine."""
    group.add_argument("--served-model-name", nargs="+", default=[],
                       help="name(s) the API accepts for the model (default: the model file's name)")
    group.add_argument("--chat-template", help="a Jinja chat template, as a file or inline "
                                               "(default: the model's own)")
    group.add_argument("--max-model-len", type=int, help="context length (default: the model's)")
    group.add_argument("--parallel", type=int, default=4, help="concurrent sequences in the engine (default: 4)")
    group.add_argument("--threads", type=int, help="CPU threads for the engine (default: llama.cpp's choice; "
                       "transformers on CPU: all cores but one)")
    group.add_argument("--cache-ram", type=int, metavar="MIB",
                       help="llama.cpp engine: host memory for prompt states pushed out of their slot, reloaded "
                            "when their session returns (default: llama.cpp's, 8192 MiB; 0: none)")
    group.add_argument("--flash-attn", choices=["auto", "on", "off"], default="auto",
                       help="llama.cpp engine: flash attention (default auto: llama.cpp's choice, on for CPUs). On 2 "
                            "CPU cores off decoded 1.4-1.5x faster after 4.5k tokens of context but read long "
                            "prompts 1.6x slower (see README: Sessions and slots)")
    group.add_argument("--lora", action="append", default=[], metavar="NAME=PATH",
                       help="a LoRA adapter over the model, served as model NAME: a GGUF adapter on llama.cpp, "
                            "a PEFT adapter directory on transformers and vLLM (repeatable; docs/models.md: LoRA "
                            "adapters)")
    group.add_argument("--mmproj", metavar="MMPROJ.gguf",
                       help="llama.cpp engine: the model's multimodal projector, so it sees images (as llama.cpp's "
                            "own flag; with --models-dir an mmproj*.gguf beside a model is found)")
    group.add_argument("--mmap", action="store_true",
                       help="llama.cpp engine: memory-map the GGUF (no second copy in memory, the page cache shared "
                            "between processes) rather than read it in; a file overwritten in place while served "
                            "then ends the process (default: mapped for a model from the Hub, whose cached files "
                            "are never rewritten; read in for a path of your own)")
    group.add_argument("--dtype", choices=["auto", "bfloat16", "float16", "float32"], default="auto",
                       help="transformers and vllm engines: weight dtype (default auto: bfloat16 on CUDA, "
                            "float32 on CPU for transformers; the model's own for vllm)")
    group.add_argument("--task", choices=["auto", "generate", "embed", "rerank"], default="auto",
                       help="what the model serves: generate (Chat, Completions, Responses), embed "
                            "(/v1/embeddings), rerank (/v1/rerank, /v2/rerank, /v1/score) or auto (default: rerank "
                            "for ...ForSequenceClassification checkpoints and GGUFs with rank pooling; embed for "
                            "sentence-transformers checkpoints, encoder-only architectures and GGUFs that declare "
                            "another pooling type)")
    group.add_argument("--pooling", choices=["mean", "cls", "last", "max"],
                       help="embeddings: how token states become one vector (default: what the model declares; "
                            "encoders mean, decoders last)")
    group.add_argument("--matryoshka", action="store_true",
                       help="embeddings: the model was trained for shortened vectors, so requests may set "
                            "`dimensions` (default: when its config.json says is_matryoshka or matryoshka_dimensions)")
    group.add_argument("--speculative", choices=["auto", "on", "off"], default="auto",
                       help="speculative decoding from the prompt (n-gram drafts, every token verified by the "
                            "model): auto (default: llama.cpp measures the model at load and drafts only where a "
                            "draft's check costs little more than one token; vllm and transformers: off), on, off")
    group.add_argument("--speculative-draft", type=int, metavar="N",
                       help="tokens per draft (default: llama.cpp auto picks 4, 8 or 16 by measurement, "
                            "on: 8; vllm: 4)")
    group.add_argument("--tokenizer", help="scripted engine, raw upstreams: a GGUF, tokenizer.json or checkpoint "
                                           "directory to tokenize with (scripted default: the embedded model's)")


def _many_models_flags(group: FlagGroup) -> None:
    """Several models from one server, loaded when a request names one."""
    group.add_argument("--models-dir", metavar="DIR",
                       help="serve every model in DIR (GGUF files, checkpoint directories), each under its file's "
                            "name; rescanned on GET /v1/models")
    group.add_argument("--models-config", metavar="FILE",
                       help="a YAML file, `models:` a list of models each with its own settings (name, model, "
                            "engine, served_model_name, chat_template, max_model_len, parallel, tool_call_parser, "
                            "reasoning_parser, generation_config, override_generation_config, task, ttl, preload)")
    group.add_argument("--max-loaded-models", type=int,
                       help="models loaded at once; loading one more unloads the least recently used idle one "
                            "(default: no limit)")
    group.add_argument("--memory-budget", metavar="SIZE",
                       help="e.g. 12GB: when a load would exceed it (by the models' file sizes, an estimate) the "
                            "least recently used idle models are unloaded first (default: no limit)")
    group.add_argument("--model-ttl", type=float, metavar="SECONDS",
                       help="unload a model idle this long (default: never; per model: ttl in --models-config)")
    group.add_argument("--preload", action="append", default=[], metavar="NAME",
                       help="load this model at start-up (repeatable; default: each is loaded by its first request, "
                            "but a single MODEL is loaded at start-up as always)")


def _auth_flags(group: FlagGroup) -> None:
    """Who may call."""
    group.add_argument("--api-key", action="append", default=[],
                       help="require this Bearer key on every route but /health, /version and the playground page (repeatable; "
                            "also env ROSTRA_API_KEY, comma-separated); each key sees only the stored responses and "
                            "conversations it made")
    group.add_argument("--api-key-file",
                       help="a file of API keys: one per line, or a YAML list of {key, name, rpm, tpm, "
                            "max_concurrent, daily_tokens} (per-key limits; README: 'Per-key limits and usage')")
    group.add_argument("--restrict-priority", action="store_true",
                       help="a request's `priority` (lower is admitted first) only from keys whose --api-key-file "
                            "entry says `priority: true`, and admin keys; from others any priority but 0 is a 400")
    group.add_argument("--admin-key", action="append", default=[],
                       help="Bearer key for /admin/* routes (store maintenance; also env ROSTRA_ADMIN_KEY); "
                            "without one they are closed. It opens the API routes too, and sees every key's "
                            "stored responses and conversations")
    group.add_argument("--shared-store", action="store_true",
                       help="every API key sees every key's stored responses and conversations (default: each "
                            "key sees only its own, and those stored by a server without keys)")


def _parsing_flags(group: FlagGroup) -> None:
    """How the output is read: tool calls and reasoning."""
    group.add_argument("--tool-call-parser", metavar="NAME",
                       help="tool-call format: " + ", ".join(tool_parser_names()) +
                            " (default: the one the chat template speaks, else the lenient json parser)")
    group.add_argument("--strict-tool-parsing", action="store_true",
                       help="read tool calls only in the format's own markup (default: then also fenced or bare "
                            "JSON calls and other common shapes, to tools of the request only)")
    group.add_argument("--enable-auto-tool-choice", action="store_true",
                       help="accepted for `vllm serve` compatibility: tool_choice auto is always on")
    group.add_argument("--reasoning-parser", metavar="NAME", choices=reasoning_parser_names(),
                       help="separate the thinking from the answer: " + ", ".join(reasoning_parser_names()))
    group.add_argument("--reasoning-field", choices=["reasoning_content", "reasoning", "both"],
                       default="reasoning_content",
                       help="message field(s) the thinking goes to (default: reasoning_content)")


def _generation_flags(group: FlagGroup) -> None:
    """What a request that leaves sampling parameters out gets."""
    group.add_argument("--generation-config", default="auto", metavar="auto|openai|FILE",
                       help="defaults for the sampling parameters a request leaves unset: auto (default: what the "
                            "model recommends: generation_config.json, GGUF general.sampling.*, or the embedded "
                            "model's card), openai (OpenAI's: temperature 1, top_p 1, all the room left), or a "
                            "generation_config.json file or directory")
    group.add_argument("--override-generation-config", metavar="JSON",
                       help="defaults on top of --generation-config, e.g. '{\"temperature\": 0.5, \"max_tokens\": 512}' "
                            "(temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty, "
                            "frequency_penalty, max_tokens)")


def _store_flags(group: FlagGroup) -> None:
    """Where the Responses API keeps its state."""
    group.add_argument("--data-dir", help="where the Responses API store lives (default: env ROSTRA_DATA_DIR, "
                                          "else a per-user data directory)")
    group.add_argument("--store", metavar="URL",
                       help="the Responses API store: postgres://user:password@host:5432/db (shared by replicas) "
                            "or sqlite:///path/file.sqlite3 (default: env ROSTRA_STORE, else SQLite in --data-dir; "
                            "prefer the environment for a password: flags show in `ps`)")
    group.add_argument("--lease-seconds", type=float, default=10.0,
                       help="a background response whose replica stops renewing its lease this long is marked "
                            "failed by another replica (default 10)")
    group.add_argument("--max-file-bytes", type=int, default=512 * 1024 * 1024,
                       help="largest upload to /v1/files in bytes (default 536870912: 512 MiB)")
    group.add_argument("--batch-concurrency", type=int, default=2,
                       help="batch lines this process runs at once, behind online requests (default 2)")
    group.add_argument("--batch-chunk-lines", type=int, default=50,
                       help="lines of a batch a process leases at a time (default 50)")
    group.add_argument("--batch-window", type=float, default=24 * 3600.0,
                       help="seconds a batch may run before it expires (default 86400: OpenAI's '24h')")
    group.add_argument("--min-file-expiry", type=int, default=3600,
                       help="shortest expires_after (files) and output_expires_after (batches) accepted, in seconds "
                            "(default 3600, as OpenAI)")
    group.add_argument("--vector-store-model", metavar="NAME",
                       help="the served embedding model vector stores and file_search embed with (default: the "
                            "first served model whose task is embed)")
    group.add_argument("--vector-store-reranker", metavar="NAME",
                       help="a served reranker (task rerank) that reranks vector store searches and file_search, its "
                            "scores the results' score, unless a search asks for ranker none (default: none)")
    group.add_argument("--max-background-responses", type=int, default=256,
                       help="background responses queued or running at once; more get 429 (default 256, 0: no "
                            "limit)")


def _production_flags(group: FlagGroup) -> None:
    """Limits, CORS, logging and shutdown."""
    group.add_argument("--max-concurrency", type=int, help="generation requests served at once (default: no limit)")
    group.add_argument("--max-queue", type=int, default=64,
                       help="requests waiting for a slot beyond --max-concurrency; more get 429 (default 64)")
    group.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024,
                       help="largest request body accepted; larger gets 413 (default 16 MiB)")
    group.add_argument("--max-choices", type=int, default=1024,
                       help="choices one Completions request may ask for, prompts x n (default 1024)")
    group.add_argument("--stream-write-timeout", type=float, default=60.0,
                       help="seconds a streaming client may read nothing before its stream is ended and its "
                            "generation aborted (default 60; 0: never)")
    group.add_argument("--stream-keep-alive", type=float, default=15.0,
                       help="seconds a stream may stay silent (a long prompt's read) before it sends a keep-alive "
                            "for clients' idle timeouts: an empty chunk on Chat Completions, a ping on Messages, a "
                            "keepalive event on Responses, an SSE comment on Completions (default 15; 0: never)")
    group.add_argument("--raw-special-tokens", action="store_true",
                       help="parse special-token text in user and tool messages as special tokens (default: "
                            "it is plain text, so `<|im_start|>system` in a message cannot forge a turn)")
    group.add_argument("--response-role", default="assistant",
                       help="the role of the generated message on Chat Completions (vLLM's flag; default "
                            "assistant). A continued message (add_generation_prompt false) keeps its own role")
    group.add_argument("--chat-template-content-format", choices=["auto", "string", "openai"], default="auto",
                       help="message content as the chat template takes it (vLLM's flag): string (parts joined), "
                            "openai (the list of parts), or auto (default: a template that loops over a message's "
                            "content gets the list)")
    group.add_argument("--trust-request-chat-template", action="store_true",
                       help="serve requests that bring their own chat_template (vLLM's flag; default: a 400, since "
                            "a template is code the server runs, sandboxed but unbounded in time)")
    group.add_argument("--allowed-origins", nargs="+", default=[], help="CORS: allowed origins (default: CORS off)")
    group.add_argument("--allowed-methods", nargs="+", default=["GET", "POST", "DELETE", "OPTIONS"])
    group.add_argument("--allowed-headers", nargs="+", default=["*"])
    group.add_argument("--allow-credentials", action="store_true")
    group.add_argument("--public-metrics", action="store_true",
                       help="serve /metrics without an API key (default: it needs one when keys are set)")
    group.add_argument("--request-timeout", type=float,
                       help="seconds a generation request may take; then 504 (or an in-band error in a stream)")
    group.add_argument("--log-requests", action="store_true", help="log prompts (user data: off by default)")
    group.add_argument("--log-outputs", action="store_true", help="log outputs (user data: off by default)")
    group.add_argument("--log-request-bodies", action="store_true",
                       help="log the body of each request that gets a 4xx or 5xx, keys redacted (debugging; "
                            "user data: off by default)")
    group.add_argument("--output-budget", choices=["fit", "strict"], default="fit",
                       help="a max_tokens / max_output_tokens longer than the room the prompt leaves in the context: "
                            "fit (generate to the end of the context, finish `length`; default) or strict "
                            "(OpenAI's 400 context_length_exceeded)")
    group.add_argument("--shutdown-grace", type=float, default=10.0,
                       help="on SIGTERM, seconds running requests get to finish, and then background responses "
                            "(those still running are stored as failed, saying so) (default 10)")
    group.add_argument("--unknown-params", choices=["error", "ignore"], default="error",
                       help="request fields rostra does not know: error (400 naming the field, as OpenAI; "
                            "default) or ignore (log a warning naming them, then drop them)")
    group.add_argument("--model-alias", action="append", default=[], metavar="PATTERN=MODEL",
                       help="answer requests naming a model that matches the glob PATTERN (and is not served) with "
                            "MODEL, on every API, e.g. 'claude-*=qwen3-coder' for Claude Code's side tasks; "
                            "repeatable, the first match wins; /v1/models lists served names only")
    group.add_argument("--keep-attribution-line", action="store_true",
                       help="Messages API: keep the x-anthropic-billing-header line Claude Code puts at the top of "
                            "its system prompt (default: dropped; it changes every request and would defeat the "
                            "prefix cache)")


def _mcp_flags(group: FlagGroup) -> None:
    """MCP tools and stateless clients in the Responses API."""
    group.add_argument("--mcp-allow", nargs="+", action="extend", default=[], metavar="HOST",
                       help="hosts (or HOST:PORT, a whole URL for that endpoint and the paths under it, or *) a "
                            "request's mcp tool may name in server_url (default: none, remote MCP is off)")
    group.add_argument("--tool-server", action="append", default=[], metavar="LABEL=URL",
                       help="an MCP server configured here, enabled by requests with {\"type\": \"mcp\", "
                            "\"server_label\": LABEL} (repeatable)")
    group.add_argument("--mcp-timeout", type=float, default=30.0, help="seconds per MCP listing or call (default 30)")
    group.add_argument("--mcp-max-output", type=int, default=65536,
                       help="characters of an MCP tool's output kept; the rest is cut (default 65536)")
    group.add_argument("--reasoning-key", help="base64 of 32 bytes: the key that seals encrypted reasoning items "
                                               "(also env ROSTRA_REASONING_KEY; default: DATA_DIR/reasoning.key, "
                                               "made on first use)")


def _image_flags(group: FlagGroup) -> None:
    """Images in prompts: where rostra may fetch them from (rostra/images/)."""
    group.add_argument("--no-image-urls", dest="image_urls", action="store_false",
                       help="do not fetch http(s) image URLs: images come as data URLs (or base64) only")
    group.add_argument("--image-allow-hosts", nargs="+", action="extend", default=[], metavar="HOST",
                       help="private hosts image URLs may name: host names, IP addresses or networks "
                            "(10.0.0.0/8) (default: none; public addresses only)")


FLAG_GROUPS = [("server", _server_flags), ("model", _model_flags), ("many models", _many_models_flags),
               ("authentication", _auth_flags),
               ("tool calls and reasoning", _parsing_flags), ("generation defaults", _generation_flags),
               ("Responses store", _store_flags), ("production", _production_flags),
               ("MCP tools and stateless clients (Responses API)", _mcp_flags), ("images", _image_flags)]


def _keys(given: list[str], env: str) -> list[str]:
    """Keys from the flag, plus those in the environment variable (comma-separated)."""
    return [*given, *(key.strip() for key in os.environ.get(env, "").split(",") if key.strip())]


def _check_numbers(args: argparse.Namespace) -> None:
    """The numeric flags' bounds, and the tool-call parser's name: a wrong one stops the start."""
    if args.max_choices < 1:
        raise SystemExit(f"--max-choices: must be at least 1, not {args.max_choices}")
    if not args.lease_seconds > 0:
        raise SystemExit(f"--lease-seconds: must be more than 0, not {args.lease_seconds}")
    if args.cache_ram is not None and args.cache_ram < -1:
        raise SystemExit(f"--cache-ram: MiB of host memory, 0 for none or -1 for no limit, not {args.cache_ram}")
    for flag, value in (("--batch-concurrency", args.batch_concurrency), ("--batch-chunk-lines", args.batch_chunk_lines),
                        ("--max-file-bytes", args.max_file_bytes), ("--min-file-expiry", args.min_file_expiry)):
        if value < 1:
            raise SystemExit(f"{flag}: must be at least 1, not {value}")
    if not args.batch_window > 0:
        raise SystemExit(f"--batch-window: must be more than 0, not {args.batch_window}")
    if args.max_background_responses < 0:
        raise SystemExit(f"--max-background-responses: must be 0 (no limit) or more, not {args.max_background_responses}")
    if args.tool_call_parser and args.tool_call_parser not in tool_parser_names():
        raise SystemExit(f"--tool-call-parser: unknown {args.tool_call_parser!r}; "
                         f"choose from {', '.join(tool_parser_names())}")
    if args.max_loaded_models is not None and args.max_loaded_models < 1:
        raise SystemExit(f"--max-loaded-models: must be at least 1, not {args.max_loaded_models}")
    if args.model_ttl is not None and not args.model_ttl > 0:
        raise SystemExit(f"--model-ttl: must be more than 0 seconds, not {args.model_ttl}")
    if not 1 <= args.parallel <= MAX_PARALLEL:
        raise SystemExit(f"--parallel: from 1 to {MAX_PARALLEL}, not {args.parallel}")


def _memory_budget(args: argparse.Namespace) -> int | None:
    try:
        return parse_size(args.memory_budget) if args.memory_budget else None
    except ModelConfigError as exc:
        raise SystemExit(f"rostra: {exc}") from None


def _auth_keys(args: argparse.Namespace) -> tuple[list[str], list[str], list[ApiKey]]:
    """(API keys, admin keys, the key file's keys with their names and limits) from the flags, the environment and
    --api-key-file; an empty key stops the start."""
    keys = _keys(args.api_key, "ROSTRA_API_KEY")
    details: list[ApiKey] = []
    if args.api_key_file:
        try:
            details = read_key_file(Path(args.api_key_file).read_text(), args.api_key_file)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"rostra: --api-key-file: {exc}") from None
        keys += [detail.key for detail in details]
    admin_keys = _keys(args.admin_key, "ROSTRA_ADMIN_KEY")
    for flag, given in (("--api-key", keys), ("--admin-key", admin_keys)):
        if any(not key.strip() for key in given):  # an empty bearer token must never open the server
            raise SystemExit(f"rostra: {flag}: empty keys are refused")
    return keys, admin_keys, details


def settings_from_args(args: argparse.Namespace) -> Settings:
    _check_numbers(args)
    memory_budget = _memory_budget(args)
    keys, admin_keys, key_details = _auth_keys(args)
    return Settings(model=args.model[0] if len(args.model) == 1 else None, models=args.model,
                    models_dir=args.models_dir, models_config=args.models_config,
                    max_loaded_models=args.max_loaded_models, memory_budget=memory_budget,
                    model_ttl=args.model_ttl, preload=args.preload, admin_keys=admin_keys,
                    shared_store=args.shared_store, restrict_priority=args.restrict_priority,
                    engine=args.engine, script=args.script,
                    tokenizer=args.tokenizer,
                    served_model_name=args.served_model_name, api_keys=keys, api_key_details=key_details,
                    chat_template=args.chat_template,
                    max_model_len=args.max_model_len, parallel=args.parallel, threads=args.threads,
                    cache_ram_mib=args.cache_ram, flash_attn=args.flash_attn, mmproj=args.mmproj, mmap=args.mmap,
                    dtype=args.dtype, device=args.device, task=args.task, pooling=args.pooling,
                    matryoshka=args.matryoshka, speculative=args.speculative,
                    speculative_draft=args.speculative_draft,
                    host=args.host, port=args.port, ui=args.ui, log_level=args.log_level,
                    tool_call_parser=args.tool_call_parser, strict_tool_parsing=args.strict_tool_parsing,
                    reasoning_parser=args.reasoning_parser,
                    reasoning_field=args.reasoning_field, data_dir=args.data_dir,
                    store=args.store or os.environ.get("ROSTRA_STORE") or None, lease_seconds=args.lease_seconds,
                    generation_config=args.generation_config,
                    override_generation_config=args.override_generation_config,
                    max_concurrency=args.max_concurrency, max_queue=args.max_queue,
                    max_file_bytes=args.max_file_bytes, batch_concurrency=args.batch_concurrency,
                    batch_chunk_lines=args.batch_chunk_lines, batch_window=args.batch_window,
                    min_file_expiry=args.min_file_expiry, vector_store_model=args.vector_store_model,
                    vector_store_reranker=args.vector_store_reranker,
                    max_body_bytes=args.max_body_bytes, max_choices=args.max_choices,
                    stream_write_timeout=args.stream_write_timeout,
                    stream_keep_alive=args.stream_keep_alive, raw_special_tokens=args.raw_special_tokens,
                    trust_request_chat_template=args.trust_request_chat_template,
                    response_role=args.response_role, chat_template_content_format=args.chat_template_content_format,
                    allowed_origins=args.allowed_origins,
                    allowed_methods=args.allowed_methods, allowed_headers=args.allowed_headers,
                    allow_credentials=args.allow_credentials, public_metrics=args.public_metrics,
                    request_timeout=args.request_timeout, log_requests=args.log_requests,
                    log_outputs=args.log_outputs, unknown_params=args.unknown_params,
                    model_aliases=_model_aliases(args.model_alias), lora=_lora(args.lora),
                    log_request_bodies=args.log_request_bodies, output_budget=args.output_budget,
                    keep_attribution_line=args.keep_attribution_line,
                    shutdown_grace=args.shutdown_grace, max_background_responses=args.max_background_responses,
                    upstreams=args.upstream,
                    upstream_api_key=args.upstream_api_key or os.environ.get("ROSTRA_UPSTREAM_API_KEY"),
                    upstream_retries=args.upstream_retries, upstream_timeout=args.upstream_timeout,
                    health_check_interval=args.health_check_interval,
                    tensor_parallel_size=args.tensor_parallel_size,
                    pipeline_parallel_size=args.pipeline_parallel_size,
                    gpu_memory_utilization=args.gpu_memory_utilization, vllm_args=args.vllm_arg,
                    trust_request_mm_kwargs=args.trust_request_mm_kwargs,
                    mcp_allow=args.mcp_allow, tool_servers=args.tool_server, mcp_timeout=args.mcp_timeout,
                    mcp_max_output=args.mcp_max_output,
                    image_urls=args.image_urls, image_allow_hosts=args.image_allow_hosts,
                    reasoning_key=args.reasoning_key or os.environ.get("ROSTRA_REASONING_KEY"))


def _decide_core_sharing(settings: Settings) -> None:
    """Before any engine library loads (it reads OpenMP's settings once): whether the engines share the cores."""
    from rostra.engines.cpu_budget import busy_elsewhere
    from rostra.engines.thread_budget import share_the_cores

    if share_the_cores(settings.many_models, busy_elsewhere):
        logging.getLogger("rostra.engines").info("thread budget: the engines share the cores at run time")


def serve(settings: Settings) -> None:
    # uvicorn binds only after the app's start-up has loaded the model: claim the port first (before even the
    # imports, a second or so), so a port in use is said at once; uvicorn is handed the bound sockets.
    sockets = bind_sockets(settings.host, settings.port)
    import uvicorn

    from rostra.generation_defaults import GenerationConfigError
    from rostra.generation_defaults import resolve as resolve_defaults
    from rostra.server.app import create_app
    from rostra.models.specs import command_line_specs
    from rostra.store import SqliteResponseStore, StoreError, default_data_dir, open_store

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _decide_core_sharing(settings)
    try:  # before the engine: a mistyped store URL should not wait for a model to load
        store = open_store(Path(settings.data_dir) if settings.data_dir else default_data_dir(), settings.store)
    except StoreError as exc:
        raise SystemExit(f"rostra: --store: {exc}") from exc
    defaults: str | None = None
    try:
        if settings.many_models:
            app = create_app(None, settings, store, command_line_specs(settings))
            described = f"{len(app.state.rostra.models.slots)} models"
        else:  # a classic server: its one model is built now (a bad MODEL stops here) and loaded at start-up
            engine = build_engine(settings)
            if engine.task != "generate":  # it answers /v1/embeddings or /v1/rerank only: nothing of it outlives a request
                store = SqliteResponseStore.in_memory()
            app = create_app(engine, settings, store)
            described = f"{(settings.served_model_name or [engine.model.id])[0]} ({settings.engine})"
            defaults = resolve_defaults(settings.generation_config, engine.recommended_sampling,
                                        settings.override_generation_config,
                                        engine.recommended_sampling_source).describe()
    except (GenerationConfigError, ModelConfigError) as exc:
        raise SystemExit(f"rostra: {exc}") from None
    print(f"rostra {__version__}: serving {described} on http://{settings.host}:{settings.port}/v1",
          file=sys.stderr, flush=True)
    if settings.ui:
        print(f"playground: http://{settings.host}:{settings.port}/", file=sys.stderr, flush=True)
    if defaults is not None:
        print(f"generation defaults: {defaults}", file=sys.stderr, flush=True)
    # On SIGTERM uvicorn stops accepting, lets running requests (streams too) finish for the grace
    # period, then the app's shutdown cancels what is left and closes the engine and the store.
    # WebSockets (the Responses API's WebSocket mode) on the websockets library's sans-I/O protocol (uvicorn's
    # other one is deprecated); a message is bounded as a request body is (a larger one closes with 1009).
    server = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port, log_level=settings.log_level,
                                          timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),
                                          ws="websockets-sansio", ws_max_size=settings.max_body_bytes))
    try:
        server.run(sockets=sockets)
    except KeyboardInterrupt:
        pass
    finally:
        for sock in sockets:
            sock.close()
    if not server.started:
        raise SystemExit(3)  # uvicorn.run's exit status when start-up failed


LISTEN_BACKLOG = 2048  # uvicorn's default


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Sockets bound and listening on every address `host` names, as asyncio's create_server binds
    them; a port in use, or a host that is not this machine's, stops the server with one line."""
    sockets: list[socket.socket] = []
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in dict.fromkeys(addresses):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait out TIME_WAIT
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # "::" and "0.0.0.0" apart, as asyncio
            sock.bind(address)
            # Listening now, not when uvicorn starts: on Linux two sockets with SO_REUSEADDR that are bound but not
            # listening do not conflict, so two servers started together would both load and then share the port.
            # A client connecting while the model loads waits in the backlog and is answered once it is loaded.
            sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise SystemExit(f"rostra: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sockets


def serve_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `serve` command's own parser (where --config sets defaults)."""
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    serve: argparse.ArgumentParser = commands.choices["serve"]
    return serve


def apply_config_file(parser: argparse.ArgumentParser, argv: list[str] | None) -> None:
    """`--config FILE`: its settings become the defaults of `serve`, so flags given still win."""
    args, _ = parser.parse_known_args(argv)
    if getattr(args, "config", None) is None:
        return
    import yaml

    values = yaml.safe_load(Path(args.config).read_text()) or {}
    if not isinstance(values, dict):
        raise SystemExit(f"--config {args.config}: expected a mapping of settings")
    serve = serve_parser(parser)
    actions = {action.dest: action for action in serve._actions}
    defaults = {str(key).replace("-", "_"): value for key, value in values.items()}
    unknown = sorted(set(defaults) - set(actions))
    if unknown:
        raise SystemExit(f"--config {args.config}: unknown settings {', '.join(unknown)}")
    try:
        serve.set_defaults(**{name: typed_setting(actions[name], value) for name, value in defaults.items()})
    except ValueError as exc:
        raise SystemExit(f"--config {args.config}: {exc}") from None


# Settings that take a mapping in a config file as well as the flag's JSON text.
_MAPPINGS = frozenset({"override_generation_config"})


def typed_setting(action: argparse.Action, value: Any) -> Any:
    """A config file's value, checked against its flag: the type a command line would give it. A YAML
    scalar where a list belongs (`api_key: s3cret`) would otherwise be read character by character
    (every letter a valid key); a list where one value belongs would reach code expecting a string."""
    key = action.dest
    if value is None:
        return None
    if action.dest in _MAPPINGS and isinstance(value, dict):
        return value
    if action.dest == "model" and isinstance(value, str):  # `model: FILE`: the one MODEL
        value = [value]
    takes_list = action.nargs in ("+", "*") or isinstance(action, (argparse._AppendAction, argparse._ExtendAction))
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ValueError(f"{key}: expected true or false, got {type(value).__name__} {value!r}")
        return value
    if takes_list:
        if not isinstance(value, list):
            raise ValueError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
        return [_typed_scalar(action, item, f"{key}[{index}]") for index, item in enumerate(value)]
    return _typed_scalar(action, value, key)


def _typed_scalar(action: argparse.Action, value: Any, key: str) -> Any:
    kind = action.type if action.type in (int, float) else str
    if isinstance(value, bool) or isinstance(value, (list, dict)):
        raise ValueError(f"{key}: expected {'a number' if kind is not str else 'a string'}, "
                         f"got {type(value).__name__} {value!r}")
    if kind is int and not isinstance(value, int):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    if kind is float and not isinstance(value, (int, float)):
        raise ValueError(f"{key}: expected a number, got {value!r}")
    if kind is str and not isinstance(value, str):
        value = str(value)  # YAML reads `served_model_name: 7b` or `host: 0.0.0.0`-like values as numbers
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    if isinstance(value, str) and callable(action.type) and action.type not in (int, float, str):
        return action.type(value)
    return float(value) if kind is float else value


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    apply_config_file(parser, argv)
    args = parser.parse_args(argv)
    if args.command == "serve":
        settings = settings_from_args(args)
        try:
            check_ranges(settings, "rostra serve")
        except SettingError as exc:
            raise SystemExit(f"rostra: {exc}") from None
        serve(settings)
    elif args.command == "batch":
        from rostra.server.batch_command import run_batch_file

        logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
        run_batch_file(settings_from_args(args), Path(args.input), Path(args.output))
    else:  # pull, ls, rm: the Hub cache
        run_hub_command(args)


if __name__ == "__main__":
    main()
