"""Services found by their class: how a lower layer holds what a higher one builds without importing it.

The composition root (rostra/server/app.py) builds each API's services and adds them to the server's set
(rostra/http/context.py) or to a model's (rostra/models/bundle.py); an API's routes take back their own service by
its class, typed, and the layers below never name an API.
"""

from __future__ import annotations

from typing import TypeVar

S = TypeVar("S")


class ServiceSet:
    def __init__(self, *services: object) -> None:
        self._by_class: dict[type, object] = {}
        for service in services:
            self.add(service)

    def add(self, service: object) -> None:
        """One service per class: a second of the same class is a wiring mistake, refused."""
        if type(service) in self._by_class:
            raise ValueError(f"a {type(service).__name__} is in this set already")
        self._by_class[type(service)] = service

    def get(self, kind: type[S]) -> S:
        service = self._by_class.get(kind)
        if not isinstance(service, kind):
            raise LookupError(f"no {kind.__name__} was built for this server")
        return service
