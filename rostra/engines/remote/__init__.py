"""The remote engine: rostra as a gateway in front of OpenAI-compatible upstreams."""

from rostra.engines.remote.engine import RemoteEngine
from rostra.engines.remote.upstream import UpstreamConfig, parse_upstream

__all__ = ["RemoteEngine", "UpstreamConfig", "parse_upstream"]
