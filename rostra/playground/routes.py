"""`/` and the playground's assets. The page is plain HTML, CSS and JavaScript shipped in the package
(no build step, no CDN): it calls the same public API a client does, with the key the user gives it.

The page and its assets answer without an API key (they hold nothing about the server or its use); every
API call the page makes needs one when keys are set. `--no-ui` turns the page off (404)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

from rostra.errors import NotFound
from rostra.http.context import server_context


@dataclass(frozen=True)
class PlaygroundConfig:
    """What the page is told about this server (/playground/config): the labels of the MCP tool servers configured
    here (--tool-server). The composition root builds it into the server's services, so the page needs no API."""
    tool_servers: tuple[str, ...] = ()


STATIC = Path(__file__).parent / "static"
MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
               ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
ASSETS = frozenset(path.name for path in STATIC.iterdir() if path.suffix in MEDIA_TYPES and path.name != "index.html")
# The paths the API-key middleware lets through without a key (app.py adds them while the page is on).
PUBLIC_PATHS = frozenset({"/", *(f"/playground/{name}" for name in ASSETS)})
# Defence in depth beside the page's own escaping: only the page's own scripts run, nothing is fetched
# from elsewhere, and the page cannot be framed.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidated: a new rostra's page is never mixed with an old one's scripts
}

router = APIRouter()


def _check_enabled(request: Request) -> None:
    if not server_context(request).settings.ui:
        raise NotFound("the playground is off (--no-ui)")


def _file(name: str) -> FileResponse:
    path = STATIC / name
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=SECURITY_HEADERS)


@router.get("/", include_in_schema=False)
async def page(request: Request) -> FileResponse:
    _check_enabled(request)
    return _file("index.html")


@router.get("/playground/config", include_in_schema=False)
async def config(request: Request) -> dict[str, object]:
    """What the page cannot learn from the OpenAI API: the MCP tool servers configured here (--tool-server),
    which a request enables by label. Behind the API key like every call."""
    _check_enabled(request)
    return {"tool_servers": sorted(server_context(request).services.get(PlaygroundConfig).tool_servers)}


@router.get("/playground/{name}", include_in_schema=False)
async def asset(request: Request, name: str) -> FileResponse:
    _check_enabled(request)
    if name not in ASSETS:
        raise NotFound(f"no playground file {name!r}")
    return _file(name)
