"""One upstream OpenAI-compatible server, as the gateway sees it: where it is, how to talk to
it, and how it has been doing (requests in flight, failures, ejection)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from rostra.core import ModelInfo

MODES = ("passthrough", "raw")


@dataclass(frozen=True)
class UpstreamConfig:
    url: str  # the upstream's OpenAI base URL, e.g. http://127.0.0.1:8001/v1
    # passthrough: forward Chat/Completions requests, the upstream renders and parses;
    # raw: ask its /completions for the raw text of a prompt rendered here, parse it here.
    mode: str = "passthrough"
    api_key: str | None = field(default=None, repr=False)  # never printed
    models: tuple[str, ...] = ()  # declared model ids; none: discovered from GET /models

    @property
    def display_url(self) -> str:
        """The URL without credentials, for logs and /health."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"


def parse_upstream(spec: str, default_key: str | None = None) -> UpstreamConfig:
    """`URL[,mode=raw][,api_key_env=NAME][,model=ID]...` -> an UpstreamConfig.

    The key itself is never written on the command line (where `ps` shows it): `api_key_env`
    names the environment variable that holds it; without one the gateway-wide key is used."""
    url, *options = [part.strip() for part in spec.split(",")]
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--upstream {spec!r}: the URL must start with http:// or https://")
    mode, key, models = "passthrough", default_key, []
    for option in options:
        name, _, value = option.partition("=")
        if name == "mode" and value in MODES:
            mode = value
        elif name == "api_key_env":
            if value not in os.environ:
                raise ValueError(f"--upstream {url}: environment variable {value} (api_key_env) is not set")
            key = os.environ[value]
        elif name == "model" and value:
            models.append(value)
        else:
            raise ValueError(f"--upstream {url}: unknown option {option!r} "
                             f"(mode=passthrough|raw, api_key_env=NAME, model=ID)")
    return UpstreamConfig(url.rstrip("/"), mode, key, tuple(models))


class Upstream:
    """Live state of one upstream. Ejected after `eject_after` failures in a row; a health
    check that succeeds (or a request, when every upstream is ejected) brings it back."""

    def __init__(self, config: UpstreamConfig, eject_after: int):
        self.config = config
        self.eject_after = eject_after
        self.outstanding = 0  # requests sent and not yet finished (streams included)
        self.failures = 0  # in a row
        self.ejected = False
        # Declared models are served from the start; the others once GET /models has named them.
        self.models: dict[str, ModelInfo] = {name: ModelInfo(name, 0) for name in config.models}
        self.last_error: str | None = None
        self.last_checked: float | None = None

    @property
    def url(self) -> str:
        return self.config.url

    def serves(self, model: str) -> bool:
        return model in self.models

    def succeeded(self) -> None:
        self.failures = 0
        self.ejected = False
        self.last_error = None

    def failed(self, error: str) -> None:
        self.failures += 1
        self.last_error = error
        if self.failures >= self.eject_after:
            self.ejected = True

    def state(self) -> dict:
        return {"url": self.config.display_url, "mode": self.config.mode, "healthy": not self.ejected,
                "outstanding": self.outstanding, "failures": self.failures, "models": sorted(self.models),
                "last_error": self.last_error,
                "last_checked": round(self.last_checked, 3) if self.last_checked else None}

    def checked(self) -> None:
        self.last_checked = time.time()
