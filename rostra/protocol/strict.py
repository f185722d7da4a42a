"""Request models that never drop a field silently.

OpenAI answers a field it does not know with 400 `Unrecognized request argument supplied: NAME`,
and a known field set to something the model cannot do with a 400 naming it. rostra does the
same: request models keep unknown fields aside (`extra="allow"`) so the server can refuse them
(or, with `--unknown-params ignore`, log and drop them), and each model lists the fields it
accepts but cannot honour beyond a harmless value (`unsupported()`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from rostra.errors import InvalidRequest


class StrictModel(BaseModel):
    """A nested request object whose unknown keys are reported as `parent.key`."""

    model_config = ConfigDict(extra="allow", strict=True)

    def unknown_fields(self, prefix: str = "") -> list[str]:
        names = [f"{prefix}{name}" for name in (self.model_extra or {})]
        given = self.model_fields_set
        for name in type(self).model_fields:  # in declaration order: the first unknown named is stable
            if name not in given:  # a default holds no unknown keys; most fields are left out
                continue
            value = getattr(self, name)
            if isinstance(value, StrictModel):
                names += value.unknown_fields(f"{prefix}{name}.")
        return names

    def drop_unknown_fields(self) -> None:
        if self.__pydantic_extra__:
            self.__pydantic_extra__.clear()
        given = self.model_fields_set
        for name in type(self).model_fields:
            if name not in given:
                continue
            value = getattr(self, name)
            if isinstance(value, StrictModel):
                value.drop_unknown_fields()


class RequestModel(StrictModel):
    """A top-level request body: top-level nulls mean "not given" (as OpenAI reads them)."""

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):  # unknown fields keep their nulls: they are still unknown
            return {key: value for key, value in data.items() if value is not None or key not in cls.model_fields}
        return data

    def unsupported(self) -> InvalidRequest | None:
        """The first field set to a value rostra cannot honour, as the 400 to answer."""
        return None


def refuse_if_set(request: BaseModel, reasons: dict[str, str]) -> InvalidRequest | None:
    """A 400 for the first field of `reasons` the request sets (to anything but null)."""
    for name, reason in reasons.items():
        if getattr(request, name) is not None:
            return InvalidRequest(f"{name} is not supported: {reason}", param=name)
    return None


def check_service_tier(tier: str | None) -> InvalidRequest | None:
    """One tier here: `auto` and `default` name it; asking for another would be promised in vain."""
    if tier is not None and tier not in ("auto", "default"):
        return InvalidRequest(f"Unsupported value: 'service_tier' does not support '{tier}' with this model. "
                              "Supported values are: 'auto' and 'default'.", param="service_tier",
                              code="unsupported_value")
    return None


def check_verbosity(verbosity: str | None, param: str) -> InvalidRequest | None:
    """A local model has no verbosity control: only the default, `medium`, is honoured."""
    if verbosity is not None and verbosity != "medium":
        return InvalidRequest(f"Unsupported value: '{param}' does not support '{verbosity}' with this model. "
                              "Supported values are: 'medium'.", param=param, code="unsupported_value")
    return None
