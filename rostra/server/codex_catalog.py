"""Codex's model catalog: what `GET /v1/models?client_version=...` answers beside OpenAI's list.

Codex (0.169) asks a provider for `/models?client_version=X.Y.Z` when the provider authenticates with a command
(`auth = { command = ... }` in its provider block) and reads a `models` array of its own shape (codex-rs
`ModelInfo`): the context window it plans compaction by, the input modalities it lets a user attach, the
reasoning efforts it offers and its tool settings. Without an entry Codex falls back to generic metadata (a
272k-token context, images allowed), wrong for most local models. Each entry here says what rostra knows of the
model (its context, whether a reasoning parser separates its thinking) and otherwise keeps the values of Codex's
own fallback, so Codex behaves as it does for any unknown model. Fields Codex added for its own hosted models
(plans, speed tiers, guardians...) are sent empty so an entry parses whatever of them a version requires.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

# The instructions Codex sends a model from this catalog (Codex's own are written for its models, and long).
INSTRUCTIONS = """\
You are a coding agent working in the user's terminal, in a workspace you share with them. Do what they ask, end to
end: read the code you need, make the change, run what checks it, and report what you did.

- Use the tools you are given to run commands, read files and edit them; prefer small, targeted edits.
- Work inside the workspace; do not undo changes you did not make.
- When you are done, answer briefly: what changed, and anything the user must know or do next.
"""
REASONING_EFFORTS = [("low", "Answers sooner, thinking less"), ("medium", "The model's usual thinking"),
                     ("high", "Thinks longer before answering")]
# A tool's output (a file, a command's log) takes at most this share of a small model's context.
TOOL_OUTPUT_SHARE = 10
TOOL_OUTPUT_TOKENS = 10_000  # the cap for large contexts (Codex's own default for its models)


class ReasoningLevel(BaseModel):
    effort: str
    description: str


class TruncationPolicy(BaseModel):
    mode: Literal["tokens", "bytes"]
    limit: int


class CodexModel(BaseModel):
    """One `models` entry, in Codex's field names."""

    slug: str
    display_name: str
    description: str
    priority: int
    context_window: int | None
    max_context_window: int | None
    truncation_policy: TruncationPolicy
    supported_reasoning_levels: list[ReasoningLevel]
    default_reasoning_level: str | None
    supports_reasoning_summaries: bool
    supports_reasoning_summary_parameter: bool
    default_reasoning_summary: Literal["auto", "none"]
    input_modalities: list[Literal["text", "image"]] = ["text"]
    # Every tool-call format rostra parses can carry several calls in one turn.
    supports_parallel_tool_calls: bool = True
    # Codex's fallback for unknown models from here on.
    shell_type: str = "default"
    visibility: Literal["list"] = "list"
    supported_in_api: bool = True
    minimal_client_version: str = "0.0.0"
    effective_context_window_percent: int = 95
    auto_compact_token_limit: int | None = None
    web_search_tool_type: str = "text"
    supports_search_tool: bool = False
    support_verbosity: bool = False
    default_verbosity: None = None
    supports_image_detail_original: bool = False
    supports_reasoning_effort_updates: bool = False
    supports_experimental_context: bool = False
    use_responses_lite: bool = False
    prefer_websockets: bool = False
    experimental_supported_tools: list[str] = []
    include_skills_usage_instructions: bool = False
    include_apps_usage_instructions: bool = False
    include_plugin_usage_instructions: bool = False
    node_repl_auto_review_required: bool = False
    node_repl_disabled: bool = False
    requires_sandboxed_review: bool = False
    available_in_plans: list[str] = []
    additional_speed_tiers: list[str] = []
    service_tiers: list[dict[str, str]] = []
    default_service_tier: None = None
    availability_nux: None = None
    upgrade: None = None
    comp_hash: None = None
    guardian: None = None
    tool_mode: None = None
    multi_agent_version: None = None
    multi_agent_reasoning_effort: None = None
    auto_review_model_override: None = None
    model_specialty: None = None
    # Codex's freeform (grammar) apply_patch is for its own models; without it the model edits through the shell.
    apply_patch_tool_type: None = None
    # Codex 0.169 requires this, with a template, in every entry, and sends the template as the model's
    # instructions in place of its own (which it keeps for its own models); a short one of rostra's, below.
    model_messages: dict[str, str] = {"instructions_template": INSTRUCTIONS}


def codex_model(name: str, priority: int, context_length: int | None, reasoning: bool,
                images: bool = False) -> CodexModel:
    """`context_length`: None while the model is not loaded (Codex then keeps its own default); `images`: the
    model takes image input (Codex then lets its user attach images and offers view_image)."""
    tool_output = TOOL_OUTPUT_TOKENS if context_length is None else min(TOOL_OUTPUT_TOKENS,
                                                                         context_length // TOOL_OUTPUT_SHARE)
    return CodexModel(
        slug=name, display_name=name, description=f"{name}, served by rostra", priority=priority,
        input_modalities=["text", "image"] if images else ["text"],
        context_window=context_length, max_context_window=context_length,
        truncation_policy=TruncationPolicy(mode="tokens", limit=tool_output),
        supported_reasoning_levels=[ReasoningLevel(effort=effort, description=text)
                                    for effort, text in REASONING_EFFORTS] if reasoning else [],
        default_reasoning_level="medium" if reasoning else None,
        supports_reasoning_summaries=reasoning, supports_reasoning_summary_parameter=reasoning,
        default_reasoning_summary="auto" if reasoning else "none")
