"""Settings of one `rostra serve`, as the CLI flags give them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from pathlib import Path

from rostra.api_keys import ApiKey
from rostra.lora import LoraAdapter
from rostra.model_aliases import ModelAlias


@dataclass
class Settings:
    model: str | None = None  # a GGUF path (transformers: a checkpoint dir or hub id); None: the embedded model
    # Many models (rostra/models/): every MODEL given (more than one: each its own model), a directory
    # of them, a YAML file of per-model settings, and when they are loaded and unloaded.
    models: list[str] = field(default_factory=list)
    models_dir: str | None = None
    models_config: str | None = None
    max_loaded_models: int | None = None  # None: no limit
    memory_budget: int | None = None  # bytes the loaded models' weights may take (an estimate); None: no limit
    model_ttl: float | None = None  # seconds idle before a model is unloaded; None: never
    preload: list[str] = field(default_factory=list)  # models loaded at start-up
    engine: str = "llamacpp"
    script: str | None = None  # scripted engine: the JSONL script
    tokenizer: str | None = None  # scripted engine: GGUF or tokenizer.json (default: the embedded model's)
    served_model_name: list[str] = field(default_factory=list)
    api_keys: list[str] = field(default_factory=list)
    # The keys of a YAML --api-key-file: names and limits (rostra/api_keys.py); never printed.
    api_key_details: list[ApiKey] = field(default_factory=list, repr=False)
    admin_keys: list[str] = field(default_factory=list)  # for /admin/* (store maintenance); none: no admin
    restrict_priority: bool = False  # only keys whose key-file entry says `priority: true` may set a priority
    shared_store: bool = False  # every API key sees every key's stored responses and conversations
    chat_template: str | None = None  # a file path or the template itself
    max_model_len: int | None = None
    parallel: int = 4
    threads: int | None = None
    cache_ram_mib: int | None = None  # llama.cpp's host-memory prompt cache; None: its default (8192 MiB)
    flash_attn: str = "auto"  # llama.cpp: auto (its choice), on or off
    mmproj: str | None = None  # llama.cpp: the multimodal projector GGUF (the model then sees images)
    mmap: bool = False  # llama.cpp: map the user's own GGUF rather than read it in (a Hub model is always mapped)
    dtype: str = "auto"  # transformers and vllm engines: auto, bfloat16, float16 or float32
    device: str = "auto"  # transformers engine: a torch device; auto: CUDA when present, else CPU
    # What the one served model does: auto (detected from the checkpoint), generate, or embed (/v1/embeddings).
    task: str = "auto"
    pooling: str | None = None  # embeddings: mean, cls, last or max instead of what the model declares
    matryoshka: bool = False  # embeddings: `dimensions` may shorten them (the model was trained for it)
    # Speculative decoding from the prompt (n-gram drafts): auto (llama.cpp: on where measured to pay), on, off.
    speculative: str = "auto"
    speculative_draft: int | None = None  # tokens per draft; None: the engine's choice
    host: str = "127.0.0.1"
    port: int = 8000
    ui: bool = True  # the playground at `/` (--no-ui: off)
    log_level: str = "info"
    tool_call_parser: str | None = None  # None: the format the chat template speaks, else `json`
    strict_tool_parsing: bool = False  # only that format's parser: no lenient recognisers after it
    reasoning_parser: str | None = None  # None: no thinking is separated from the answer
    reasoning_field: str = "reasoning_content"  # or "reasoning", or "both"
    # Defaults for the sampling a request leaves unset (rostra/generation_defaults.py): auto (the
    # model's recommendation), openai, or a generation_config.json FILE; then the override (JSON) on top.
    generation_config: str = "auto"
    override_generation_config: str | dict | None = None
    data_dir: str | None = None  # the Responses store; None: env ROSTRA_DATA_DIR, else a per-user directory
    store: str | None = None  # a store URL (postgres://... shared by replicas); None: SQLite in data_dir
    lease_seconds: float = 10.0  # a replica that stops renewing its lease this long is taken for dead
    max_concurrency: int | None = None  # generation requests at once; None: no limit
    # The Files and Batch APIs (rostra/api/batches/)
    max_file_bytes: int = 512 * 1024 * 1024  # an upload larger than this is refused (413)
    batch_concurrency: int = 2  # batch lines of this process running at once (behind online requests)
    batch_chunk_lines: int = 50  # lines per chunk: what one process leases at a time
    batch_window: float = 24 * 3600.0  # seconds a batch may run before it expires (OpenAI's "24h")
    # The embedding model vector stores use (rostra/api/vector_stores/); None: the first served one
    vector_store_model: str | None = None
    # The served reranker vector store searches (and file_search) are reranked by; None: not reranked
    vector_store_reranker: str | None = None
    min_file_expiry: int = 3600  # the shortest expires_after / output_expires_after accepted (OpenAI's: an hour)
    max_queue: int = 64  # waiting for a slot beyond that; more get a 429
    max_body_bytes: int = 16 * 1024 * 1024
    max_choices: int = 1024  # prompts x n in one Completions request
    stream_write_timeout: float = 60.0  # a stream whose reader takes nothing this long is ended; 0: never
    stream_keep_alive: float = 15.0  # a stream silent this long sends its API's keep-alive (rostra/http/sse.py); 0: never
    # User and tool content: special-token text in it is plain text (False), or parsed as the special
    # tokens it spells (True: as vLLM and llama.cpp's server do; lets a user forge turns).
    raw_special_tokens: bool = False
    # A request's own chat_template is rendered (sandboxed), rather than refused (vLLM's flag of that name).
    trust_request_chat_template: bool = False
    response_role: str = "assistant"  # Chat Completions' generated message's role (vLLM's --response-role)
    # How a message's content reaches the chat template: auto (as the template reads it), string or openai (parts).
    chat_template_content_format: Literal["auto", "string", "openai"] = "auto"
    allowed_origins: list[str] = field(default_factory=list)  # CORS, off when empty
    allowed_methods: list[str] = field(default_factory=lambda: ["GET", "POST", "DELETE", "OPTIONS"])
    allowed_headers: list[str] = field(default_factory=lambda: ["*"])
    allow_credentials: bool = False
    public_metrics: bool = False  # /metrics without an API key
    request_timeout: float | None = None  # seconds per generation request; None: no limit
    log_requests: bool = False  # prompts in the log (user data: off by default)
    log_outputs: bool = False  # outputs in the log (user data: off by default)
    log_request_bodies: bool = False  # the body of a request answered 4xx/5xx in the log, keys redacted
    # An output budget longer than the room the prompt leaves: "fit" (cut to that room, finish `length`)
    # or "strict" (OpenAI's 400 context_length_exceeded). Messages always fits, as Anthropic does.
    output_budget: str = "fit"
    # Request fields rostra does not know: "error" (a 400 naming them, as OpenAI) or "ignore" (logged, dropped).
    unknown_params: str = "error"
    # --model-alias: names no model is served under, answered by one that is (rostra/model_aliases.py).
    model_aliases: list[ModelAlias] = field(default_factory=list)
    lora: list[LoraAdapter] = field(default_factory=list)  # --lora NAME=PATH (rostra/lora.py)
    # Messages API: keep the attribution line Claude Code starts its system prompt with (default: dropped,
    # so that the prefix cache holds across turns; rostra/api/messages/history.py).
    keep_attribution_line: bool = False
    shutdown_grace: float = 10.0  # seconds running streams (then background responses) get to finish on SIGTERM
    max_background_responses: int = 256  # background responses queued or running at once; 0: no limit
    # The remote engine (gateway): upstream specs (URL[,mode=raw][,api_key_env=NAME][,model=ID]).
    upstreams: list[str] = field(default_factory=list)
    upstream_api_key: str | None = field(default=None, repr=False)  # never printed
    upstream_retries: int = 2
    upstream_timeout: float = 600.0
    health_check_interval: float = 5.0
    # The vllm engine
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: float | None = None  # None: vLLM's default
    vllm_args: list[str] = field(default_factory=list)  # KEY=VALUE, any other AsyncEngineArgs setting
    trust_request_mm_kwargs: bool = False  # requests may set mm_processor_kwargs (vLLM's flag of that name)
    # MCP tools in the Responses API
    mcp_allow: list[str] = field(default_factory=list)  # hosts a request's server_url may name; none: no remote MCP
    tool_servers: list[str] = field(default_factory=list)  # LABEL=URL: MCP servers configured on the server side
    mcp_timeout: float = 30.0  # seconds per MCP listing or call
    mcp_max_output: int = 65536  # characters of an MCP tool's output kept
    reasoning_key: str | None = field(default=None, repr=False)  # base64, 32 bytes; None: DATA_DIR/reasoning.key
    # Images: fetch http(s) image URLs (--no-image-urls: off), and from which private hosts (rostra/images/).
    image_urls: bool = True
    image_allow_hosts: list[str] = field(default_factory=list)

    @property
    def many_models(self) -> bool:
        """Served by the model manager from several sources, rather than the one MODEL of a classic server."""
        return bool(self.models_dir or self.models_config or len(self.models) > 1)

    def chat_template_source(self) -> str | None:
        if self.chat_template is None:
            return None
        path = Path(self.chat_template)
        if "{" not in self.chat_template and path.is_file():
            return path.read_text(encoding="utf-8")
        if "{" not in self.chat_template:
            raise FileNotFoundError(f"--chat-template: no such file: {self.chat_template}")
        return self.chat_template
