"""What can go wrong getting a model from the Hub: each a one-line message for the user, never a traceback."""

from __future__ import annotations


class HubError(Exception):
    """A model could not be had: unknown repository, nothing that matches, no network, a full disk, bad bytes."""


class RepositoryNotFound(HubError):
    """No such repository (or a private one without its token)."""
