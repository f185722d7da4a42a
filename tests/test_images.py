"""rostra/images/: decoding (formats, orientation, limits), data URLs, and the guarded fetcher (an SSRF corpus
against a local server that records every hit: it must see none)."""

from __future__ import annotations

import asyncio
import io
import socket
import time

import pytest
from PIL import Image

from images import RecordingServer, Route, data_url, encoded, pattern, pixels, png_data_url
from rostra.errors import InvalidRequest
from rostra.images.addresses import HostPolicy, is_public, parse_ip
from rostra.images.decode import decode_image
from rostra.images.limits import ImageLimits
from rostra.images.loader import ImageLoader, ImageSource

PARAM = "messages[0].content[1]"


def load(url: str, limits: ImageLimits = ImageLimits()):
    async def run():
        [image] = await ImageLoader(limits).load_all([ImageSource(PARAM, url=url)])
        return image
    return asyncio.run(run())


def refused(url: str, limits: ImageLimits = ImageLimits()) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        load(url, limits)
    assert caught.value.param == PARAM
    return caught.value


# --- decoding -------------------------------------------------------------------------------------------------

LOSSLESS = {"PNG": {}, "WEBP": {"lossless": True}, "BMP": {}, "TIFF": {}, "GIF": {}, "PPM": {}}


@pytest.mark.parametrize("fmt", sorted(LOSSLESS))
def test_every_lossless_format_gives_the_pixels_of_the_png(fmt):
    source = pattern()
    if fmt == "GIF":  # a palette format: the same palette image both ways
        source = source.quantize(64).convert("RGB")
    expected = decode_image(encoded(source, "PNG"), PARAM, ImageLimits())
    image = decode_image(encoded(source, fmt, **LOSSLESS[fmt]), PARAM, ImageLimits())
    assert (image.width, image.height) == (24, 16)
    assert pixels(image.data) == pixels(expected.data)
    assert image.data.startswith(b"\x89PNG")


def test_jpeg_decodes_to_its_size():
    image = decode_image(encoded(pattern(40, 30), "JPEG", quality=90), PARAM, ImageLimits())
    assert (image.width, image.height) == (40, 30)
    assert image.placeholder() == "[image 40x30]"


@pytest.mark.parametrize("fmt, mode, media_type", [("PNG", "RGB", "image/png"), ("PNG", "L", "image/png"),
                                                   ("JPEG", "RGB", "image/jpeg")])
def test_a_plain_png_or_jpeg_goes_to_the_engine_as_sent(fmt, mode, media_type):
    sent = encoded(pattern(40, 30).convert(mode), fmt)
    image = decode_image(sent, PARAM, ImageLimits())
    assert (image.data, image.media_type, image.width, image.height) == (sent, media_type, 40, 30)
    assert image.data_url().startswith(f"data:{media_type};base64,")


@pytest.mark.parametrize("source", [pattern().convert("RGBA"), pattern().quantize(16), pattern().convert("CMYK")],
                         ids=["alpha", "palette", "cmyk"])
def test_what_an_engine_might_read_otherwise_is_re_encoded(source):
    fmt = "JPEG" if source.mode == "CMYK" else "PNG"
    image = decode_image(encoded(source, fmt), PARAM, ImageLimits())
    assert image.media_type == "image/png" and image.data.startswith(b"\x89PNG")
    assert Image.open(io.BytesIO(image.data)).mode == "RGB"


def test_gif_first_frame_is_taken():
    red, blue = Image.new("RGB", (8, 8), (255, 0, 0)), Image.new("RGB", (8, 8), (0, 0, 255))
    out = io.BytesIO()
    red.save(out, format="GIF", save_all=True, append_images=[blue])
    image = decode_image(out.getvalue(), PARAM, ImageLimits())
    assert pixels(image.data)[1][:3] == bytes((255, 0, 0))


def test_exif_orientation_is_applied():
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90 degrees: viewers show it upright, taller than wide
    image = decode_image(encoded(pattern(40, 20), "JPEG", exif=exif.tobytes()), PARAM, ImageLimits())
    assert (image.width, image.height) == (20, 40)
    assert Image.open(io.BytesIO(image.data)).size == (20, 40)  # re-encoded upright, not passed on as sent


@pytest.mark.parametrize("fmt, options", [("PNG", {}), ("WEBP", {"lossless": True}), ("TIFF", {})])
@pytest.mark.parametrize("orientation, upright", [(3, Image.Transpose.ROTATE_180), (6, Image.Transpose.ROTATE_270),
                                                  (8, Image.Transpose.ROTATE_90), (2, Image.Transpose.FLIP_LEFT_RIGHT)])
def test_exif_orientation_is_applied_to_every_format_that_carries_it(fmt, options, orientation, upright):
    """The pixels a viewer shows: the stored ones turned as the EXIF tag says (lossless formats: exact)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    image = decode_image(encoded(pattern(40, 20), fmt, exif=exif.tobytes(), **options), PARAM, ImageLimits())
    assert pixels(image.data) == pixels(encoded(pattern(40, 20).transpose(upright), "PNG"))


def test_transparency_is_shown_over_white():
    clear = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    image = decode_image(encoded(clear, "PNG"), PARAM, ImageLimits())
    assert set(pixels(image.data)[1]) == {255}


def test_a_decompression_bomb_is_refused_before_decoding():
    # 30000 x 30000 black pixels: under 1 MiB of PNG, 2.7 GB decoded
    bomb = encoded(Image.new("1", (30000, 30000)), "PNG")
    assert len(bomb) < 1024 * 1024
    started = time.monotonic()
    with pytest.raises(InvalidRequest) as caught:
        decode_image(bomb, PARAM, ImageLimits())
    assert caught.value.param == PARAM and caught.value.code == "image_too_large"
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("size", [(40000, 1), (1, 40000), (9000, 9000)])
def test_absurd_dimensions_are_refused(size):
    with pytest.raises(InvalidRequest) as caught:
        decode_image(encoded(Image.new("1", size), "PNG"), PARAM, ImageLimits())
    assert "pixels" in caught.value.message


@pytest.mark.parametrize("data", [b"not an image", encoded(pattern(), "PNG")[:60], b"%!PS-Adobe-3.0 EPSF-3.0\n"])
def test_garbage_truncated_and_unlisted_formats_are_refused(data):
    with pytest.raises(InvalidRequest) as caught:
        decode_image(data, PARAM, ImageLimits())
    assert caught.value.param == PARAM


# --- data URLs --------------------------------------------------------------------------------------------------

def test_data_url_loads():
    image = load(png_data_url(10, 7))
    assert (image.width, image.height) == (10, 7)


@pytest.mark.parametrize("url, code", [
    ("data:image/png;base64,iVBOR#*!", "invalid_base64"),
    ("data:image/png;base64,iVBORw0KGgo", "invalid_base64"),  # bad padding
    ("data:image/png;base64,", "invalid_image"),  # empty
    ("data:text/plain;base64,aGVsbG8=", "invalid_image_format"),
    ("data:;base64,aGVsbG8=", "invalid_image_format"),
    ("data:image/png,rawbytes", "invalid_image_url"),
    ("data:image/png;base64", "invalid_image_url"),
    ("data:image/png;base64,aGVsbG8=", "invalid_image_format"),  # base64 of "hello": not an image
    ("file:///etc/passwd", "invalid_image_url"),
    ("ftp://example.com/a.png", "invalid_image_url"),
    ("gopher://127.0.0.1:6379/_INFO", "invalid_image_url"),
])
def test_bad_data_urls_are_refused_naming_the_part(url, code):
    assert refused(url).code == code


def test_data_url_over_the_byte_limit_is_refused_before_decoding():
    url = data_url(encoded(pattern(64, 64), "BMP"))
    assert refused(url, ImageLimits(max_bytes=1000)).code == "image_too_large"


def test_too_many_images():
    sources = [ImageSource(f"messages[0].content[{i}]", url=png_data_url(4, 4)) for i in range(4)]

    async def run():
        loader = ImageLoader(ImageLimits(max_images=3))
        with pytest.raises(InvalidRequest) as caught:
            await loader.load_all(sources)
        assert caught.value.param == "messages[0].content[3]" and caught.value.code == "too_many_images"
        assert len(await loader.load_all(sources[:3])) == 3
    asyncio.run(run())


# --- addresses ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
    "224.0.0.1", "240.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1", "::1", "::", "fe80::1", "fc00::1",
    "fd00:ec2::254", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::",
    "64:ff9b::7f00:1", "2001:db8::1", "fec0::1", "[::1]",
])
def test_private_addresses_are_not_public(text):
    address = parse_ip(text)
    assert address is not None and not is_public(address)


@pytest.mark.parametrize("text", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses(text):
    address = parse_ip(text)
    assert address is not None and is_public(address)


def test_allow_list_names_and_networks():
    policy = HostPolicy.of(("images.internal", "10.0.0.0/8", "192.168.1.5"))
    assert policy.allows_name("IMAGES.internal.") and not policy.allows_name("other.internal")
    assert policy.allows_address(parse_ip("10.9.9.9")) and policy.allows_address(parse_ip("192.168.1.5"))
    assert not policy.allows_address(parse_ip("192.168.1.6")) and not policy.allows_address(parse_ip("127.0.0.1"))


# --- fetching -----------------------------------------------------------------------------------------------------

@pytest.fixture
def target():
    """The server a forged URL would reach: it must record no hit."""
    server = RecordingServer({"/secret.png": Route(body=encoded(pattern(), "PNG"),
                                                   headers={"Content-Type": "image/png"})})
    yield server
    server.close()


def spellings(port: int) -> list[str]:
    paths = ["127.0.0.1", "localhost", "2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1", "0177.0.0.01",
             "127.1", "127.0.1", "0", "0.0.0.0", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:7f00:1]",
             "LOCALHOST", "localhost.", "127.0.0.1.nip.io", "[::]"]
    return [f"http://{host}:{port}/secret.png" for host in paths] + [
        f"http://user:pass@127.0.0.1:{port}/secret.png", f"https://127.0.0.1:{port}/secret.png",
        "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/", "http://10.0.0.1/", "http://192.168.0.1/",
        "http://224.0.0.251/", "http://[ff02::1]/", "http://[fe80::1]/", "http://100.64.0.1/",  # multicast, CGNAT
        f"http://[64:ff9b::7f00:1]:{port}/secret.png", f"http://[2002:7f00:1::]:{port}/secret.png",  # NAT64, 6to4
    ]


def test_ssrf_corpus_reaches_nothing(target):
    urls = spellings(target.port)
    errors = [refused(url, ImageLimits(fetch_timeout=5)) for url in urls]
    assert target.hits == []
    assert all(error.code == "invalid_image_url" for error in errors)
    assert any("public address" in error.message for error in errors)


def test_redirects_to_private_addresses_are_refused(target):
    redirects = {f"/to{i}": Route(302, headers={"Location": url}) for i, url in enumerate(spellings(target.port))}
    redirector = RecordingServer(redirects)
    try:
        # the redirector is trusted by name (localhost); what it redirects to is judged on its own
        limits = ImageLimits(allow_hosts=("localhost",), fetch_timeout=5)
        for path in redirects:
            if redirects[path].headers["Location"].split("//")[1].split(":")[0].lower().rstrip(".") == "localhost":
                continue  # the trusted name itself
            error = refused(redirector.url(path, host="localhost"), limits)
            assert error.code == "invalid_image_url"
        assert target.hits == []
        assert len(redirector.hits) > 10
    finally:
        redirector.close()


def test_allowed_host_is_fetched_and_redirects_followed(target):
    target.routes["/hop"] = Route(307, headers={"Location": "/secret.png"})
    image = load(target.url("/hop"), ImageLimits(allow_hosts=("127.0.0.1",)))
    assert (image.width, image.height) == (24, 16)
    assert target.hits == ["/hop", "/secret.png"]
    network = load(target.url("/secret.png"), ImageLimits(allow_hosts=("127.0.0.0/8",)))
    assert network.width == 24


@pytest.mark.parametrize("answers", [["127.0.0.1", "127.0.0.2"], ["127.0.0.2", "127.0.0.1"],
                                     [("127.0.0.2", "127.0.0.1"), "127.0.0.2"]],
                         ids=["allowed-then-inside", "inside-then-allowed", "both-at-once"])
def test_dns_rebinding_the_connection_goes_to_the_checked_address(monkeypatch, answers):
    """A name whose lookups answer an allowed address, then one inside (DNS rebinding), or both in one answer: the
    connection goes to an address the check passed, never to the inside one. Here 127.0.0.1 stands for a public
    address (allowed by network) and 127.0.0.2, the same port, for the internal service: it must see no hit."""
    png = Route(body=encoded(pattern(), "PNG"), headers={"Content-Type": "image/png"})
    inside = RecordingServer({"/a.png": png}, address="127.0.0.2")
    outside = RecordingServer({"/a.png": png}, port=inside.port)
    lookups = iter(answers + answers[-1:] * 5)
    real = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        if host != "rebind.test":
            return real(host, *args, **kwargs)
        answer = next(lookups)
        return [info for address in ([answer] if isinstance(answer, str) else answer)
                for info in real(address, *args, **kwargs)]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    limits = ImageLimits(allow_hosts=("127.0.0.1/32",), fetch_timeout=5)
    try:
        url = f"http://rebind.test:{inside.port}/a.png"
        if answers[0] == "127.0.0.2":
            assert "not a public address" in refused(url, limits).message
        else:
            assert load(url, limits).width == 24
            assert outside.hits == ["/a.png"]
        assert inside.hits == []
    finally:
        inside.close()
        outside.close()


def test_fetch_limits(target):
    allowed = ("127.0.0.1",)
    target.routes.update({
        "/loop": Route(302, headers={"Location": "/loop"}),
        "/slow": Route(body=b"x", delay=3),
        "/big": Route(body=b"\0" * 5000, headers={"Content-Type": "image/png"}),
        "/big-unsized": Route(body=b"\0" * 300_000, headers={"Content-Type": "image/png"}, sized=False),
        "/html": Route(body=b"<html>", headers={"Content-Type": "text/html"}),
        "/gone": Route(404),
    })
    assert "redirected more than 2" in refused(target.url("/loop"), ImageLimits(allow_hosts=allowed,
                                                                                max_redirects=2)).message
    assert target.hits.count("/loop") == 3
    assert "longer than 0.5 seconds" in refused(target.url("/slow"), ImageLimits(allow_hosts=allowed,
                                                                                  fetch_timeout=0.5)).message
    assert "limit of 1000 bytes" in refused(target.url("/big"), ImageLimits(allow_hosts=allowed,
                                                                             max_bytes=1000)).message
    assert "limit of 1000 bytes" in refused(target.url("/big-unsized"), ImageLimits(allow_hosts=allowed,
                                                                                     max_bytes=1000)).message
    assert "not an image" in refused(target.url("/html"), ImageLimits(allow_hosts=allowed)).message
    assert "HTTP 404" in refused(target.url("/gone"), ImageLimits(allow_hosts=allowed)).message


def test_no_image_urls(target):
    error = refused(target.url("/secret.png"), ImageLimits(fetch_urls=False, allow_hosts=("127.0.0.1",)))
    assert error.code == "image_urls_disabled" and target.hits == []


# --- decoding off the event loop -------------------------------------------------------------------------------------

def test_every_decode_a_request_causes_runs_off_the_event_loop(monkeypatch, tmp_path):
    """Chat, Responses (and a previous_response_id turn reading the stored image back) and Messages, in process:
    each time Pillow opens or decodes an image, no event loop runs in that thread."""
    import threading

    from PIL import ImageFile

    from harness import MODEL, InProcessServer

    on_loop: list[str] = []
    calls: list[str] = []

    def watched(name, real):
        def call(*args, **kwargs):
            calls.append(name)
            try:
                asyncio.get_running_loop()
                on_loop.append(f"{name} in {threading.current_thread().name}")
            except RuntimeError:
                pass
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(Image, "open", watched("open", Image.open))
    monkeypatch.setattr(ImageFile.ImageFile, "load", watched("load", ImageFile.ImageFile.load))
    url = data_url(encoded(pattern().convert("RGBA"), "PNG"))  # re-encoded: decode, flatten and save all run
    b64 = url.split(",", 1)[1]

    async def run():
        async with InProcessServer(tmp_path, [{"match": "", "output": "seen"}]) as server:
            replies = [await server.client.post("/v1/chat/completions", json={"model": MODEL, "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]})]
            replies.append(await server.client.post("/v1/responses", json={"model": MODEL, "input": [
                {"role": "user", "content": [{"type": "input_image", "image_url": url}]}]}))
            replies.append(await server.client.post("/v1/responses", json={
                "model": MODEL, "input": "again", "previous_response_id": replies[-1].json()["id"]}))
            replies.append(await server.client.post("/v1/messages", json={"model": MODEL, "max_tokens": 8, "messages": [
                {"role": "user", "content": [{"type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": b64}}]}]}))
            assert [reply.status_code for reply in replies] == [200] * 4, [reply.text for reply in replies]
    asyncio.run(run())
    assert calls.count("load") >= 4 and on_loop == []
