"""Cheap checks come before the costly work: a request refused for its parameters never renders a template."""

import pytest

from harness import MODEL, InProcessServer


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("fields, param", [({"logit_bias": {"99999999": 1}}, "logit_bias"),
                                           ({"stop_token_ids": [-1]}, "stop_token_ids"),
                                           ({"top_logprobs": 2}, "top_logprobs")])
async def test_a_bad_parameter_is_refused_before_the_template_is_rendered(tmp_path, fields, param):
    async with InProcessServer(tmp_path, []) as server:
        template = server.app.state.rostra.models.resolve(MODEL).bundle.template
        rendered = []
        render = template.render
        template.render = lambda *args, **kwargs: rendered.append(1) or render(*args, **kwargs)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}
        refused = await server.client.post("/v1/chat/completions", json=body)
        assert refused.status_code == 400 and refused.json()["error"]["param"] == param
        assert rendered == []
        served = await server.client.post("/v1/chat/completions", json={**body, **{k: None for k in fields}})
        assert served.status_code == 200 and rendered == [1]
