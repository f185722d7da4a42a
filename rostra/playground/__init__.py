"""The playground: a chat page at `/` that talks to rostra's own public API (static files in static/)."""
