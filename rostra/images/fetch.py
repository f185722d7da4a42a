"""rostra's own image fetcher: http(s) only, public addresses only (unless allowed), bounded in size and time.

The address check happens where the connection is made, not before it: aiohttp connects to the addresses this
module's resolver returns, and the resolver returns only addresses it has checked, so a name that resolves to a
public address for the check and a private one for the connection (DNS rebinding) has no window. aiohttp takes
an IP literal without asking the resolver, so literals are checked here first, on every hop. Redirects are
followed by hand, each target checked the same way. No proxy from the environment, no cookies, no credentials.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Callable

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from rostra.images.addresses import HostPolicy, parse_ip
from rostra.images.limits import ImageLimits

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


class FetchRefused(Exception):
    """The URL is not one rostra fetches from (a scheme, an address the policy refuses)."""


class FetchFailed(Exception):
    """The fetch was allowed but did not give an image (an HTTP error, a timeout, too large)."""


class GuardedResolver(AbstractResolver):
    """Resolves once, and answers only the addresses the policy allows: the connection goes to one of them."""

    def __init__(self, policy: HostPolicy):
        self.policy = policy

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
        except socket.gaierror as exc:
            raise FetchFailed(f"the image URL's host {host!r} could not be resolved ({exc.strerror})") from None
        trusted = self.policy.allows_name(host)
        results: list[ResolveResult] = []
        for family_, _, proto, _, sockaddr in infos:
            address = parse_ip(str(sockaddr[0]))
            if address is not None and (trusted or self.policy.allows_address(address)):
                results.append(ResolveResult(hostname=host, host=str(address), port=port, family=family_,
                                             proto=proto, flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV))
        if not results:
            raise FetchRefused(f"the image URL's host {host!r} is not a public address: rostra fetches images "
                               "from public addresses only (--image-allow-hosts names trusted private hosts)")
        return results

    async def close(self) -> None:
        pass


class ImageFetcher:
    """One per server: a connection pool whose every connection went through the guard."""

    def __init__(self, limits: ImageLimits, accepts: tuple[str, ...] = ("image/",)):
        self.limits = limits
        self.accepts = accepts  # the content types (prefixes) taken: images, or a document's (messages/documents.py)
        self.policy = HostPolicy.of(limits.allow_hosts)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(resolver=GuardedResolver(self.policy), use_dns_cache=False, limit=32)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                                  cookie_jar=aiohttp.DummyCookieJar(),
                                                  headers={"User-Agent": "rostra", "Accept": self._accept_header()})
        return self._session

    def _accept_header(self) -> str:
        return ", ".join(kind + "*" * kind.endswith("/") for kind in self.accepts)  # image/* , application/pdf

    async def fetch(self, url: str, charge: Callable[[int], None] = lambda count: None) -> bytes:
        """The body of `url`, after at most `max_redirects` redirects, within `fetch_timeout` seconds in all;
        `charge` is told each chunk's size as it arrives (it raises to stop the download)."""
        try:
            async with asyncio.timeout(self.limits.fetch_timeout):
                return await self._follow(URL(url), charge)
        except TimeoutError:
            raise FetchFailed(f"the image download took longer than {self.limits.fetch_timeout:g} seconds") from None
        except (aiohttp.ClientError, ValueError) as exc:
            raise FetchFailed(f"the image could not be downloaded: {exc}") from None

    async def _follow(self, url: URL, charge: Callable[[int], None]) -> bytes:
        for _ in range(self.limits.max_redirects + 1):
            self.check_url(url)
            async with self._client().get(url, allow_redirects=False) as response:
                if response.status in _REDIRECTS and "Location" in response.headers:
                    url = url.join(URL(response.headers["Location"]))
                    continue
                if response.status != 200:
                    raise FetchFailed(f"the image URL answered HTTP {response.status}")
                return await self._body(response, charge)
        raise FetchFailed(f"the image URL redirected more than {self.limits.max_redirects} times")

    def check_url(self, url: URL) -> None:
        if url.scheme not in ("http", "https") or not url.host:
            raise FetchRefused(f"image URLs must be http(s) or data URLs, not {url.scheme or 'no'!r} scheme")
        literal = parse_ip(url.host)
        if literal is not None and not self.policy.allows_address(literal):
            raise FetchRefused(f"the image URL's host {url.host} is not a public address: rostra fetches images "
                               "from public addresses only (--image-allow-hosts names trusted private hosts)")

    async def _body(self, response: aiohttp.ClientResponse, charge: Callable[[int], None]) -> bytes:
        kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind and not kind.startswith(self.accepts) and kind not in ("application/octet-stream",
                                                                      "binary/octet-stream"):
            raise FetchFailed(f"the image URL answered {kind!r}, not an image")
        limit = self.limits.max_bytes
        if (response.content_length or 0) > limit:
            raise FetchFailed(f"the image is larger than this server's limit of {limit} bytes")
        body = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK):
            body += chunk
            charge(len(chunk))
            if len(body) > limit:
                raise FetchFailed(f"the image is larger than this server's limit of {limit} bytes")
        return bytes(body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
