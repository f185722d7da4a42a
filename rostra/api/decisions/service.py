"""/v1/decisions: each question's prompt through the model's chat template, its answer labels scored by the engine,
the probabilities normalized over the labels into OpenAI's `Decision` object.

A label's probability is the model's, exact: the product of its tokens' conditional probabilities after the prompt
(teacher forcing, `Engine.score_continuations`), nothing sampled. They are normalized over the question's labels
(the model may put some mass on other text; that mass is left out). A predicate's probability is that of `Yes`; a
choice's answer the most probable choice, a score's the expected level (levels valued 0, 1, ... lowest first), and
`confidence` the probability of the most probable answer.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

from rostra.api.decisions.prompts import QuestionPrompt, choice_label, input_messages, question_prompt
from rostra.api.decisions.request import MAX_QUESTIONS, Choice, DecisionRequest, Predicate, Question
from rostra.core import Prompt
from rostra.errors import InvalidRequest
from rostra.prompt.messages import message_text
from rostra.serving.chat import ChatService
from rostra.serving.validation import check_model


class DecisionsService:
    def __init__(self, chat: ChatService):
        self.chat = chat

    async def create(self, body: DecisionRequest) -> dict[str, Any]:
        chat, engine = self.chat, self.chat.engine
        check_model(body.model, chat.served_names())
        if engine.relays(body.model):
            raise InvalidRequest(f"the model '{body.model}' is served by an upstream server: rostra cannot read its "
                                 "token probabilities, so it cannot answer decisions about it", param="model")
        if not 1 <= len(body.questions) <= MAX_QUESTIONS:
            raise InvalidRequest(f"questions must hold 1 to {MAX_QUESTIONS} questions, not {len(body.questions)}",
                                 param="questions")
        messages = input_messages(body)
        asked = [question_prompt(body, messages, index) for index in range(len(body.questions))]
        request_id = "dec_" + secrets.token_hex(12)
        answers, input_tokens = [], 0
        for index, question in enumerate(asked):
            prompt = await self._prompt(question, f"questions[{index}]")
            input_tokens += await engine.prompt_length(prompt)
            labels = [await self._label_ids(label) for label in question.labels]
            logprobs = await engine.score_continuations(f"{request_id}-{index}", prompt, labels)
            answers.append(answer(body.questions[index], question.labels, [math.fsum(steps) for steps in logprobs]))
        return {"model": body.model, "answers": answers,
                "usage": {"input_tokens": input_tokens,
                          "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                          "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": input_tokens}}

    async def _prompt(self, question: QuestionPrompt, param: str) -> Prompt:
        chat, turn = self.chat, question.turn
        images = await chat.load_images(turn)
        rendered = await chat.render(turn, images)
        token_ids = await rendered.tokenize(chat.tokenizer)
        last = turn.messages[-1]
        prompt = Prompt(token_ids, message_text(last, len(turn.messages) - 1, images), last.role, turn.model,
                        session_key=turn.session_key, images=images.images,
                        text=rendered.text if images.images else None)
        limit = chat.engine.model_info(turn.model).context_length
        if len(token_ids) + max(len(label) for label in question.labels) > limit:
            raise InvalidRequest(f"{param}: the input and the question are {len(token_ids)} tokens, more than the "
                                 f"model's context length ({limit}) leaves for the answer", param="input",
                                 code="context_length_exceeded")
        return prompt

    async def _label_ids(self, label: str) -> list[int]:
        """A label's tokens as they follow the assistant turn's opening: its text alone, no special tokens (markup
        typed into a label is plain characters)."""
        engine = self.chat.engine
        ids = await engine.tokenize_plain(label) if engine.special_texts else await engine.tokenize(label, False)
        if not ids:
            raise InvalidRequest(f"the answer {label!r} has no tokens", param="questions")
        return ids


def normalized(logprobs: list[float]) -> list[float]:
    """Probabilities over the labels alone, from their logprobs (a softmax: exact where they are tiny)."""
    top = max(logprobs)
    weights = [math.exp(value - top) for value in logprobs]
    total = math.fsum(weights)
    return [weight / total for weight in weights]


def answer(question: Question, labels: tuple[str, ...], logprobs: list[float]) -> dict[str, Any]:
    probabilities = normalized(logprobs)
    if isinstance(question, Predicate):
        return {"type": "predicate", "name": question.name, "probability": probabilities[0]}
    best = max(range(len(labels)), key=lambda index: probabilities[index])
    if isinstance(question, Choice):
        return {"type": "choice", "name": question.name, "choice": question.choices[best].value,
                "confidence": probabilities[best],
                "probabilities": [{"value": option.value, "probability": probability}
                                  for option, probability in zip(question.choices, probabilities)]}
    return {"type": "score", "name": question.name,
            "score": math.fsum(level * probability for level, probability in enumerate(probabilities)),
            "confidence": probabilities[best],
            "probabilities": [{"value": level, "label": label, "probability": probability}
                              for level, (label, probability) in enumerate(zip(labels, probabilities))]}


__all__ = ["DecisionsService", "answer", "choice_label", "normalized"]
