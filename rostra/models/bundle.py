"""One loaded model and everything built on its engine: template, parsers, generation defaults, the pipeline's
chat service and the APIs' per-model services (Completions, Messages, Embeddings, ...), which the composition root
builds on those and adds to `services` (this layer is below the APIs: it never names one). The Responses service
and the store are the server's, shared by every model (rostra/http/context.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from rostra import generation_defaults
from rostra.config import Settings
from rostra.engines.base import Capabilities, Engine
from rostra.errors import InvalidRequest
from rostra.generation_defaults import GenerationDefaults
from rostra.images.limits import ImageLimits
from rostra.images.loader import ImageLoader
from rostra.parsing.dialect import Dialect, detect_dialect
from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.reasoning.detect import detect_reasoning_parser
from rostra.parsing.tools import layered_tool_parser, tool_parser_class
from rostra.parsing.tools.base import ToolParser
from rostra.parsing.tools.derived import derived_parser_class
from rostra.prompt.chat_template import ChatTemplate
from rostra.service_set import ServiceSet
from rostra.prompt.harmony import HarmonyTemplate, speaks_harmony
from rostra.serving.chat import ChatService
from rostra.serving.job import Job
from rostra.serving.validation import check_model

log = logging.getLogger("rostra.server")
JobObserver = Callable[[Job, list[str]], None]
S = TypeVar("S")


@dataclass
class ModelBundle:
    name: str  # the canonical name (metrics' model_name)
    engine: Engine
    settings: Settings  # the server's, with this model's own (rostra/models/specs.py)
    template: ChatTemplate
    chat: ChatService
    # The names the API accepts: those given, else the engine's (a gateway's change as upstreams come and go).
    served_names: Callable[[], list[str]]
    # What a request that leaves sampling fields out gets (--generation-config, --override-generation-config).
    generation_defaults: GenerationDefaults
    # The APIs' services of this model (Completions, Messages over `chat`, Embeddings), by class:
    # `services.get(MessagesService)`.
    services: ServiceSet = field(default_factory=ServiceSet)
    # The tool-call and reasoning parsers serving it, and why (GET /v1/models shows them).
    parsers: Dialect = field(default_factory=lambda: Dialect("json", None, "not detected"))

    def capable(self, kind: type[S], model: str | None, check: Callable[[Capabilities, str], None]) -> S:
        """This model's service of `kind`, which the composition root gave it only where its engine has the
        capability `check` asks for (rostra/serving/validation.py): without it, the 400 that says what the model
        serves instead (an unknown model name a 404 first, as every service says it)."""
        name = model if model is not None else self.served_names()[0]
        try:
            check(self.engine.capabilities(), name)
        except InvalidRequest:
            check_model(name, self.served_names())
            raise
        return self.services.get(kind)


def build_bundle(name: str, engine: Engine, settings: Settings, on_finished: JobObserver) -> ModelBundle:
    """Raises GenerationConfigError for a bad --generation-config; does no IO but reading those files."""
    given_template = settings.chat_template_source()
    template = ChatTemplate(given_template or engine.chat_template, engine.bos_token, engine.eos_token,
                            engine.named_tokens)
    # gpt-oss: its prompt rendered in harmony by rostra (a --chat-template still wins), its output parsed as
    # harmony (a --reasoning-parser still wins).
    gpt_oss = speaks_harmony(engine.architecture, template.source)
    if gpt_oss:
        log.info("%s: gpt-oss: %s, harmony output parser", name,
                 "the given chat template" if given_template else "harmony prompts")
    parsers = chosen_parsers(template, settings, gpt_oss)
    log.info("%s: tool-call parser %s%s, reasoning parser %s: %s", name, parsers.tool_parser,
             "" if settings.strict_tool_parsing else " (then the lenient ones)", parsers.reasoning_parser or "none",
             parsers.reason)
    primary = (derived_parser_class(parsers.derived) if parsers.derived is not None
               else tool_parser_class(parsers.tool_parser))
    # The class itself, or (the default) a factory like it that layers the lenient parsers after it.
    tool_parser: Callable[..., ToolParser] = primary if settings.strict_tool_parsing else layered_tool_parser(primary)
    fields = ("reasoning_content", "reasoning") if settings.reasoning_field == "both" else (settings.reasoning_field,)
    reasoning = parsers.reasoning_parser

    defaults = generation_defaults.resolve(settings.generation_config, engine.recommended_sampling,
                                           settings.override_generation_config, engine.recommended_sampling_source)
    log.info("%s: generation defaults %s", name, defaults.describe())

    fit = settings.output_budget == "fit"

    def served_names() -> list[str]:
        """The model's names, then its LoRA adapters' (--lora NAME=PATH: the base with that adapter)."""
        return [*(settings.served_model_name or [model.id for model in engine.models()]), *engine.adapters]

    prompt = HarmonyTemplate(template.source) if gpt_oss and not given_template else template
    chat = ChatService(engine, prompt, served_names, tool_parser,
                       reasoning_parser_class(reasoning) if reasoning else None, fields, defaults,
                       raw_special_tokens=settings.raw_special_tokens, fit_budgets=fit,
                       images=ImageLoader(ImageLimits(fetch_urls=settings.image_urls,
                                                      allow_hosts=tuple(settings.image_allow_hosts))),
                       trust_request_templates=settings.trust_request_chat_template,
                       response_role=settings.response_role,
                       content_format=settings.chat_template_content_format)
    chat.on_finished = on_finished
    return ModelBundle(name, engine, settings, template, chat, served_names, defaults, parsers=parsers)


def chosen_parsers(template: ChatTemplate, settings: Settings, gpt_oss: bool) -> Dialect:
    """The parsers the flags name, else those the template speaks (rostra/parsing/dialect.py); gpt-oss's output
    is harmony's to read."""
    def render(messages: list[dict], tools: list[dict], add_generation_prompt: bool = False) -> str:
        return template.render(messages, add_generation_prompt=add_generation_prompt, tools=tools)

    if settings.tool_call_parser and (settings.reasoning_parser or gpt_oss):
        found = Dialect(settings.tool_call_parser, None, "--tool-call-parser")  # nothing left to detect
    else:
        found = detect_dialect(render, template.source)
    tool_parser, reasoning, reason, derived = found.tool_parser, found.reasoning_parser, found.reason, found.derived
    if settings.tool_call_parser and tool_parser != settings.tool_call_parser:
        tool_parser, derived = settings.tool_call_parser, None
        reason = "--tool-call-parser" + ("; reasoning parser from the chat template" if reasoning else "")
    if reasoning is None and not gpt_oss:  # the probe found no family's thinking: the template's markers may
        reasoning, why = detect_reasoning_parser(template.source)  # (reasoning/detect.py: <think>, [THINK], ...)
        reason += f"; reasoning parser {reasoning}: {why}" if reasoning else ""
    if gpt_oss:
        reasoning, reason = "gpt_oss", reason + "; gpt-oss: harmony"
    if settings.reasoning_parser:
        reasoning, reason = settings.reasoning_parser, reason + "; --reasoning-parser"
    return Dialect(tool_parser, reasoning, reason, derived)
