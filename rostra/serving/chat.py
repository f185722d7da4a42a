"""Chat Completions: request -> prompt -> engine -> semantic events -> chunks, or their fold."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from rostra.engines.base import Engine
from rostra.core import Prompt, TokenStep
from rostra.errors import InvalidRequest, NotImplementedHere
from rostra.generation_defaults import GenerationDefaults
from rostra.guided.constraints import Constraint
from rostra.serving.think_first import think_first
from rostra.parsing.events import Event, Finish, Reasoning, Text, ToolCallArgs, ToolCallStart
from rostra.parsing.parser import ChoicePipeline, OutputParser
from rostra.parsing.reasoning.base import ReasoningParser
from rostra.parsing.tools.base import ToolParser
from rostra.prompt.chat_template import ChatTemplate, PromptRenderer, request_template
from rostra.prompt.content_format import resolve_content_format
from rostra.images.loader import ImageLoader
from rostra.prompt.messages import PartKey, PromptImages, image_parts, message_text, template_messages, text_only
from rostra.prompt.special_text import PromptTokenizer, RenderedPrompt, SpecialTextGuard
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.logprobs import wire_logprob
from rostra.serving.budget import completion_budget, sampling_params
from rostra.serving.choices import ChoiceRun, params_for_choice
from rostra.serving.generation import GenerationService
from rostra.serving.job import Job, job_id
from rostra.serving.rendering import STOP_FIELDS, GenerationStream, stop_fields, token_label, token_text
from rostra.serving.request_stats import RequestStats
from rostra.serving.extensions import (choice_decoder, engine_extensions, prompt_extensions, truncate_prompt,
                                       vllm_prompt_logprobs)
from rostra.serving.chat_turn import chat_turn, with_image_urls
from rostra.serving.relay import relay_body_job, relay_job
from rostra.serving.upstream_body import upstream_chat_body
from rostra.serving.tools import ToolPlan, mistral_history, plan_tools
from rostra.serving.template_stops import with_template_stops
from rostra.serving.validation import check_generative, check_logit_bias, check_model, check_stop_token_ids
from rostra.turn import ContentFormat, Turn


def _constraint(turn: Turn, plan: ToolPlan) -> Constraint | None:
    """The constraint on what the model writes. A forced tool choice (required, or a named tool) makes the whole
    output the call, so the call's constraint governs; a response_format or guided_* given beside it is still
    checked (a bad schema is a 400) and applies to any text, of which a forced turn has none. instructor's
    RESPONSES_TOOLS and TOOLS modes send both."""
    return plan.constraint or turn.constraint  # (the turn's was checked when the turn was made)


def logprobs_content(tokens: tuple[TokenStep, ...], as_ids: bool = False) -> list[dict[str, Any]]:
    """`as_ids`: tokens named `token_id:N` (vLLM's return_tokens_as_token_ids); bytes stay the text's."""
    return [
        {
            "token": token_label(step.token_id, step.token_bytes, as_ids),
            "logprob": wire_logprob(step.logprob) if step.logprob is not None else 0.0,
            "bytes": list(step.token_bytes),
            "top_logprobs": [
                {"token": token_label(top.token_id, top.token_bytes, as_ids), "logprob": wire_logprob(top.logprob),
                 "bytes": list(top.token_bytes)}
                for top in step.top_logprobs
            ],
        }
        for step in tokens
    ]


class ChatStream(GenerationStream):
    """A chat completion: events -> chat.completion.chunk deltas; the message is the fold of those deltas."""

    object_name = "chat.completion.chunk"
    null_usage = True

    def __init__(self, job: Job):
        super().__init__(job)
        self.choices = {run.index: _ChoiceState() for run in job.runs}

    def opening(self) -> list[dict[str, Any]]:
        chunks = [self.chunk([{"index": run.index, "delta": {"role": self.options.role, "content": ""},
                               "logprobs": None, "finish_reason": None}]) for run in self.job.runs]
        if self.options.return_token_ids and chunks:  # vLLM: the prompt's ids on the first chunk
            chunks[0]["prompt_token_ids"] = list(self.job.runs[0].prompt.token_ids)
        return chunks

    def render(self, index: int, event: Event) -> dict[str, Any] | None:
        if isinstance(event, Text):
            logprobs = ({"content": logprobs_content(event.logprobs, self.options.tokens_as_ids), "refusal": None}
                        if self.options.logprobs else None)
            chunk = self._delta(index, {"content": event.text}, logprobs)
            if self.options.return_token_ids:
                chunk["choices"][0]["token_ids"] = [step.token_id for step in event.logprobs]
            return chunk
        if isinstance(event, Reasoning):
            fields = self.job.reasoning_fields
            return self._delta(index, {name: event.text for name in fields}) if fields else None
        if isinstance(event, ToolCallStart):  # announced once: id, type and name never repeat
            return self._delta(index, {"tool_calls": [{"index": event.index, "id": event.id, "type": "function",
                                                       "function": {"name": event.name, "arguments": ""}}]})
        if isinstance(event, ToolCallArgs):
            return self._delta(index, {"tool_calls": [{"index": event.index, "function": {"arguments": event.text}}]})
        if isinstance(event, Finish):
            chunk = self.chunk([{"index": index, "delta": {}, "logprobs": None, "finish_reason": event.reason,
                                 **stop_fields(event)}])
            if self.options.prompt_logprobs:  # in streams: on each choice's last chunk
                chunk["prompt_logprobs"] = job_prompt_logprobs(self.job, index)
            return chunk
        return None

    def _delta(self, index: int, delta: dict[str, Any], logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.chunk([{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": None}])

    def fold_choice(self, choice: dict[str, Any]) -> None:
        """What a client's stream accumulator does with one chunk's choice."""
        state, delta = self.choices[choice["index"]], choice["delta"]
        state.role = delta.get("role", state.role)
        if delta.get("content"):
            state.content.append(delta["content"])
        if self.job.reasoning_fields and self.job.reasoning_fields[0] in delta:
            state.reasoning.append(delta[self.job.reasoning_fields[0]])
        for call in delta.get("tool_calls", ()):
            if "id" in call:
                state.tool_calls.append({"id": call["id"], "type": "function",
                                         "function": {"name": call["function"]["name"], "arguments": ""}})
            state.tool_calls[call["index"]]["function"]["arguments"] += call["function"]["arguments"]
        if choice["logprobs"]:
            state.logprobs.extend(choice["logprobs"]["content"])
        state.token_ids.extend(choice.get("token_ids", ()))
        if choice["finish_reason"]:
            state.finish_reason = choice["finish_reason"]
            state.stop = {key: choice[key] for key in STOP_FIELDS if key in choice}

    def response(self) -> dict[str, Any]:
        choices = [self._choice(index, state) for index, state in sorted(self.choices.items())]
        response = self.job.response("chat.completion", choices)
        if self.options.return_token_ids:
            response["prompt_token_ids"] = list(self.job.runs[0].prompt.token_ids)
        if self.options.prompt_logprobs:
            response["prompt_logprobs"] = job_prompt_logprobs(self.job)
        return response

    def _choice(self, index: int, state: _ChoiceState) -> dict[str, Any]:
        content = "".join(state.content)
        message: dict[str, Any] = {"role": state.role, "content": content, "refusal": None}
        if state.tool_calls:
            message["content"] = content or None  # OpenAI: no text beside the calls is null
            message["tool_calls"] = state.tool_calls
        if state.reasoning and self.job.reasoning_fields:
            message.update({name: "".join(state.reasoning) for name in self.job.reasoning_fields})
        logprobs = {"content": state.logprobs, "refusal": None} if self.options.logprobs else None
        choice = {"index": index, "message": message, "logprobs": logprobs, "finish_reason": state.finish_reason or "stop",
                  **dict.fromkeys(STOP_FIELDS), **state.stop}
        if self.options.return_token_ids:
            choice["token_ids"] = state.token_ids
        return choice


def chat_keep_alive(last: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a silent Chat stream sends (rostra/http/sse.py's KeepAlive): a chunk with an empty delta, the shape of
    OpenAI's own chunks that carry no text (its finish chunk's delta is `{}`), valid against the spec's
    CreateChatCompletionStreamResponse. A comment would keep the socket open but not a client that times chunks:
    Qwen Code gives up on a stream after 240 s without one (its `withStreamInactivityTimeout`, reset by each chunk
    the openai SDK yields, which skips comments). Clients fold an empty delta into nothing (the openai SDKs' and
    the AI SDK's accumulators read only the fields a delta has; a null finish_reason changes nothing), so the
    answer stays the fold of the real chunks. Before any chunk (none exists to take the envelope from) or after
    an in-band error: a comment."""
    if last is None or last.get("object") != "chat.completion.chunk":
        return None
    chunk = {key: last[key] for key in ("id", "object", "created", "model", "system_fingerprint") if key in last}
    index = last["choices"][0]["index"] if last["choices"] else 0
    chunk["choices"] = [{"index": index, "delta": {}, "logprobs": None, "finish_reason": None}]
    if "usage" in last:  # include_usage: null on every chunk but the last; continuous usage: the running count
        chunk["usage"] = last["usage"]
    return chunk


def job_prompt_logprobs(job: Job, index: int = 0) -> list[dict[str, Any] | None] | None:
    run = job.runs[index]  # chat choices are numbered in order
    if run.relayed_prompt_logprobs is not None:
        return run.relayed_prompt_logprobs
    return vllm_prompt_logprobs(run.prompt_logprobs, token_text)


@dataclass
class _ChoiceState:
    role: str = "assistant"
    token_ids: list[int] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    stop: dict[str, Any] = field(default_factory=dict)  # stop_reason and stop_str, as the finishing chunk said


class ChatService(GenerationService):
    output = ChatStream

    def __init__(self, engine: Engine, template: PromptRenderer, served_names: Callable[[], list[str]],
                 tool_parser: Callable[..., ToolParser], reasoning_parser: type[ReasoningParser] | None = None,
                 reasoning_fields: tuple[str, ...] = ("reasoning_content",),
                 defaults: GenerationDefaults = GenerationDefaults(), raw_special_tokens: bool = False,
                 fit_budgets: bool = True, images: ImageLoader | None = None,
                 trust_request_templates: bool = False, response_role: str = "assistant",
                 content_format: ContentFormat = "auto"):
        super().__init__(engine, defaults)
        # An output budget longer than the room the prompt leaves: cut to it (True), or a 400 (--output-budget strict).
        self.fit_budgets = fit_budgets
        self.images = images or ImageLoader()
        # Special-token text in user and tool content is tokenized as plain text, unless told otherwise.
        self.special_guard = SpecialTextGuard(() if raw_special_tokens else engine.special_texts)
        self.tokenizer = PromptTokenizer(engine.tokenize, engine.tokenize_plain)  # what the prompt layer reads with
        self.template = template
        self.trust_request_templates = trust_request_templates  # a request's own chat_template is rendered
        self.served_names = served_names
        self.response_role = response_role  # --response-role
        self.content_format = content_format  # --chat-template-content-format
        self.tool_parser = tool_parser
        self.reasoning_parser = reasoning_parser
        self.reasoning_fields = reasoning_fields

    async def count_prompt_tokens(self, turn: Turn) -> int:
        """The prompt's tokens as `prepare_turn` counts them (template and tools included), for counting routes:
        no output budget is checked (a prompt longer than the context is counted, not refused), and nothing
        is generated. A model relayed to an upstream (a gateway's) has no tokenizer here: refused (501)
        rather than counted by a generation upstream; an embedding model has no chat template: a 400."""
        check_model(turn.model, self.served_names())
        check_generative(self.engine.capabilities(), turn.model)
        if self.engine.relays(turn.model):
            raise NotImplementedHere(f"the model '{turn.model}' is served by an upstream server: rostra cannot "
                                     "count its tokens (count them with the upstream's own tokenizer)",
                                     param="model", code="count_not_supported")
        images = await self.load_images(turn)
        rendered = await self.render(turn, images)
        token_ids = await rendered.tokenize(self.tokenizer, turn.template.add_special_tokens)
        return await self.engine.prompt_length(Prompt(token_ids, images=images.images, text=rendered.text))

    async def prepare(self, request: ChatCompletionRequest) -> Job:
        """A Chat Completions request: relayed whole to an upstream that serves its model, else as its turn."""
        check_model(request.model, self.served_names())
        if self.engine.relays(request.model):
            return await self._relayed(request)
        return await self.prepare_turn(chat_turn(request, self.response_role))

    async def prepare_turn(self, turn: Turn) -> Job:
        """A turn of any API, ready to run: the prompt rendered and tokenized, the budget and sampling resolved,
        a parser chain per choice."""
        check_model(turn.model, self.served_names())
        if self.engine.relays(turn.model):
            return await self._relayed_turn(turn)
        turn = await with_template_stops(turn, self.template, self.engine)  # (harmony's <|call|>, <|return|>)
        engine, sampling = self.engine, turn.sampling
        # The cheap checks first: a bad request never costs a template rendering or a tokenization.
        check_logit_bias(sampling.logit_bias, engine.vocab_size)
        check_stop_token_ids(sampling.stop_token_ids, engine.vocab_size)
        if turn.top_logprobs is not None and not turn.logprobs:
            raise InvalidRequest("top_logprobs requires logprobs to be true", param="top_logprobs")
        plan = plan_tools(turn.tools, turn.tool_choice, turn.parallel_tool_calls, self.tool_parser)
        constraint = _constraint(turn, plan)
        images = await self.load_images(turn)
        rendered = await self.render(turn, images)
        context_length = engine.model_info(turn.model).context_length
        token_ids = truncate_prompt(await rendered.tokenize(self.tokenizer, turn.template.add_special_tokens),
                                    sampling.truncate_prompt_tokens, context_length)
        # An image counts as the engine counts it (its tokens after the projector), not as its marker's text.
        prompt_tokens = await engine.prompt_length(Prompt(token_ids, images=images.images, text=rendered.text))
        max_tokens = self._budget(turn, prompt_tokens, context_length)
        top_logprobs = (turn.top_logprobs or 0) if turn.logprobs else None
        params = sampling_params(sampling, max_tokens, top_logprobs, constraint, self.defaults,
                                 **await engine_extensions(engine, sampling, turn.model))
        engine.check_params(params)
        last = turn.messages[-1]
        prompt = Prompt(token_ids, message_text(last, len(turn.messages) - 1, images), last.role, turn.model,
                        session_key=turn.session_key, images=images.images,
                        text=rendered.text if images.images else None, **prompt_extensions(engine, sampling))
        # vLLM's chat `echo`: the continued assistant message is repeated in front of the answer.
        prefix = prompt.last_message_text if sampling.echo and last.role == "assistant" else ""
        # A constraint the engine enforces binds the answer after the thinking (serving/think_first.py), where the
        # reasoning parser has markers; else it binds from the first token and the whole output is the answer.
        enforced = bool(constraint and engine.enforces_constraints)
        thinks_first = think_first(self.reasoning_parser, rendered.text, turn.template.thinking(), enforced, max_tokens,
                                   plan.forced)
        params = dataclasses.replace(params, think_first=thinks_first)
        thinking = turn.template.thinking() and (thinks_first is not None or not enforced)
        make_parsers = self._parsers(rendered.text, thinking, plan)
        read_markup = bool(self.reasoning_parser or plan.make_parser)
        runs = [
            ChoiceRun(index, prompt, params_for_choice(params, index),
                      ChoicePipeline(choice_decoder(sampling, engine, read_markup), make_parsers(),
                                     with_logprobs=turn.logprobs or sampling.return_token_ids),
                      prefix)
            for index in range(sampling.n)
        ]
        stats = RequestStats(prompt_tokens=prompt_tokens, reasoning_tokens=0 if self.reasoning_parser else None)
        stats.note_budget(turn.budget.requested, max_tokens)
        return Job(turn, job_id("chatcmpl", turn), turn.model, runs, stats,
                   reasoning_fields=self.reasoning_fields if turn.include_reasoning else ())

    def _parsers(self, prompt_text: str, thinking: bool, plan: ToolPlan) -> Callable[[], list[OutputParser]]:
        def parsers() -> list[OutputParser]:  # fresh ones per choice: reasoning first, then tools on the answer
            chain: list[OutputParser] = []
            if self.reasoning_parser:
                chain.append(self.reasoning_parser(prompt_text, enabled=thinking))
            if plan.make_parser:
                chain.append(plan.make_parser())
            chain.append(plan.make_emitter())  # every call, whoever recognised it, passes here
            return chain
        return parsers

    async def _relayed(self, request: ChatCompletionRequest) -> Job:
        """The job of a Chat request relayed whole to an upstream (the remote engine's raw mode)."""
        turn = chat_turn(request)
        urls = await self.inline_images(turn)  # fetched here, never by the upstream
        if urls:
            request = request.model_copy(update={"messages": with_image_urls(request.messages, urls)})
        last = turn.messages[-1]
        # The upstream parses its own output; its calls still pass this request's emitter.
        plan = plan_tools(turn.tools, turn.tool_choice, turn.parallel_tool_calls, self.tool_parser)
        return await relay_job(self.engine, request, "chat/completions", "chatcmpl", request.n,
                               message_text(last, len(turn.messages) - 1, text_only(turn.messages)),
                               self.reasoning_fields if request.include_reasoning else (),
                               make_emitter=plan.make_emitter)

    async def _relayed_turn(self, turn: Turn) -> Job:
        """The job of another API's turn on a model an upstream serves: sent as the Chat request it amounts to."""
        plan = plan_tools(turn.tools, turn.tool_choice, turn.parallel_tool_calls, self.tool_parser)
        body = upstream_chat_body(turn, await self.inline_images(turn))
        last = turn.messages[-1]
        return await relay_body_job(self.engine, turn, body, "chat/completions", "chatcmpl", turn.sampling.n,
                                    message_text(last, len(turn.messages) - 1, text_only(turn.messages)),
                                    self.reasoning_fields if turn.include_reasoning else (),
                                    make_emitter=plan.make_emitter)

    async def load_images(self, turn: Turn) -> PromptImages:
        """The conversation's images, fetched and decoded (off the event loop), each with the engine's marker; a
        400 naming the first image part when the model does not see images."""
        parts = image_parts(turn.messages)
        if not parts:
            return PromptImages()
        if not self.engine.takes_images(turn.model):
            raise InvalidRequest(f"the model {turn.model!r} does not take images (it reads text only)",
                                 param=parts[0].source.param, code="image_input_not_supported")
        images = await self.images.load_all([part.source for part in parts])
        return PromptImages({part.key: self.engine.image_marker(image) for part, image in zip(parts, images)},
                            tuple(images))

    async def inline_images(self, turn: Turn) -> dict[PartKey, str]:
        """For an upstream: each image checked, decoded and sent as a data URL (an http(s) URL is fetched by
        rostra, under its address policy, not by the upstream), by where it stands."""
        parts = image_parts(turn.messages)
        if not parts:
            return {}
        images = await self.images.load_all([part.source for part in parts])
        return {part.key: image.data_url() for part, image in zip(parts, images)}

    def _budget(self, turn: Turn, prompt_tokens: int, context_length: int) -> int:
        """The output budget the turn gets: what it asked for, cut to the room left (or refused), or the default."""
        budget = turn.budget
        fit = self.fit_budgets if budget.fit is None else budget.fit
        return completion_budget(prompt_tokens, budget.requested, self.defaults, context_length, budget.prompt_param,
                                 budget.param, min_tokens=turn.sampling.min_tokens, fit=fit)

    async def _template_for(self, turn: Turn) -> PromptRenderer:
        """The server's template, or the request's own (vLLM's chat_template), compiled off the event loop."""
        source = turn.template.chat_template
        if source is None:
            return self.template
        if not self.trust_request_templates:
            raise InvalidRequest("chat_template: this server renders its own chat template only (start it with "
                                 "--trust-request-chat-template to accept a request's)", param="chat_template")
        engine = self.engine
        return await asyncio.to_thread(request_template, source, engine.bos_token, engine.eos_token,
                                       tuple(sorted(engine.named_tokens.items())))

    async def render(self, turn: Turn, images: PromptImages | None = None) -> RenderedPrompt:
        """The conversation through the chat template (off the event loop), special-token text of
        user and tool messages marked as plain text, each image as the engine's marker."""
        if images is None:
            images = await self.load_images(turn)
        options = turn.template
        kwargs = dict(options.variables)
        if turn.reasoning_effort is not None:
            kwargs.setdefault("reasoning_effort", turn.reasoning_effort)
        if options.documents is not None:
            kwargs["documents"] = options.documents
        template = await self._template_for(turn)
        # Harmony renders its own format from strings; a Jinja template takes the parts where it loops over them.
        parts = isinstance(template, ChatTemplate) and resolve_content_format(
            options.content_format or self.content_format, template.source) == "openai"
        if parts and images.images and self.engine.template_writes_image_marker:
            # The checkpoint's own spelling around each image; unless the template writes no marker for them
            rendered = await self._render_text(turn, template, dataclasses.replace(images, as_image_parts=True),
                                               kwargs)
            if rendered.text.count(self.engine.image_marker(images.images[0])) != len(images.images):
                rendered = await self._render_text(turn, template, images, kwargs, parts)
        else:
            rendered = await self._render_text(turn, template, images, kwargs, parts)
        if options.response_prefix:  # tabby's: the answer's first words, given (as plain text: it forges no turn)
            return RenderedPrompt((*rendered.pieces, (options.response_prefix, True)))
        return rendered

    async def _render_text(self, turn: Turn, template: PromptRenderer, images: PromptImages, kwargs: dict[str, Any],
                           parts: bool = True) -> RenderedPrompt:
        options = turn.template
        messages = template_messages(turn.messages, images, as_parts=parts)
        if getattr(self.tool_parser, "name", "") == "mistral":
            messages = mistral_history(messages)  # ids from other servers, as Mistral templates take them
        messages, masked = self.special_guard.mask(messages)
        tools = [dict(tool.template) for tool in turn.tools] or None
        try:
            text = await asyncio.to_thread(
                template.render, messages, add_generation_prompt=options.add_generation_prompt,
                continue_final_message=options.continue_final_message, tools=tools, **kwargs)
        except InvalidRequest as exc:
            if exc.param == "messages":  # the template's refusal of the whole list, named as the client's API does
                exc.param = turn.budget.prompt_param
            raise
        return masked.unmask(text)

