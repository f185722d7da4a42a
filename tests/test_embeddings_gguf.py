"""/v1/embeddings on the llama.cpp engine with a real embedding GGUF: all-MiniLM-L6-v2 written in llama.cpp's BERT
layout (tests/bert_gguf.py), served with no flag but the file (the pooling its metadata declares), every vector
checked against sentence-transformers' encode() on the checkpoint the GGUF was made from."""

from __future__ import annotations

import asyncio
import json
import random
import shutil

import pytest
from openai import AsyncOpenAI, OpenAI

from bert_gguf import write_bert_gguf
from embedding_models import minilm_gguf
from servers import RunningServer
from test_api_embeddings import MODEL, TEXTS, assert_close, decode_base64, embeddings, vectors_of
from wire import check_error, post

# Measured: F32 and F16 both within cosine 0.999998 of sentence-transformers on TEXTS (F16 rounds the weight
# matrices only; llama.cpp computes in F32 either way).


def gguf_server(path) -> RunningServer:
    return RunningServer([str(path), "--served-model-name", MODEL, "--parallel", "4"])


@pytest.fixture(scope="module", params=["f32", "f16"])
def gguf_minilm(request):
    server = gguf_server(minilm_gguf(request.param))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def reference(minilm_checkpoint):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_checkpoint), device="cpu")


def mixed_texts(count: int, seed: int = 3) -> list[str]:
    """Texts of 1 to 120 words (3 to ~130 tokens), so a batch mixes very different lengths."""
    rng = random.Random(seed)
    words = "retrieval needs every passage embedded the same way whether it arrives alone or in a crowd".split()
    return [" ".join(rng.choice(words) for _ in range(rng.choice([1, 2, 5, 20, 60, 120]))) for _ in range(count)]


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_gguf_vectors_are_sentence_transformers_own(gguf_minilm, reference, encoding_format):
    answer = embeddings(gguf_minilm, {"input": TEXTS, "encoding_format": encoding_format})
    assert_close(vectors_of(answer), reference.encode(TEXTS))
    # llama.cpp's WordPiece tokenizer on the GGUF's vocabulary counts as the checkpoint's own tokenizer does.
    lengths = reference.tokenize(TEXTS)["attention_mask"].sum(1).tolist()
    assert answer["usage"] == {"prompt_tokens": sum(lengths), "total_tokens": sum(lengths)}
    ids = [list(map(int, row[row > 0])) for row in reference.tokenize(TEXTS[:2])["input_ids"]]
    assert_close(vectors_of(embeddings(gguf_minilm, {"input": ids, "encoding_format": encoding_format})),
                 reference.encode(TEXTS[:2]))


def test_gguf_batch_of_mixed_lengths(gguf_minilm, reference):
    texts = mixed_texts(48)
    sdk = OpenAI(base_url=gguf_minilm.v1, api_key="unused", max_retries=0)
    answer = sdk.embeddings.create(model=MODEL, input=texts)
    assert [item.index for item in answer.data] == list(range(len(texts)))
    assert_close([item.embedding for item in answer.data], reference.encode(texts))


def test_gguf_concurrent_requests_each_get_their_own(gguf_minilm, reference):
    texts = mixed_texts(40, seed=5)
    requests = [texts[i:i + 1 + i % 4] for i in range(0, len(texts), 3)]  # 1 to 4 texts each, overlapping
    client = AsyncOpenAI(base_url=gguf_minilm.v1, api_key="unused", max_retries=0)

    async def together():
        async with client:
            return await asyncio.gather(*(client.embeddings.create(model=MODEL, input=batch, encoding_format=fmt)
                                          for batch, fmt in zip(requests, ["float", "base64"] * len(requests))))

    for batch, answer in zip(requests, asyncio.run(together())):
        # The SDK decodes base64 itself only when it chose the format: asked for explicitly, it is the string.
        vectors = [decode_base64(v) if isinstance(v := item.embedding, str) else v for item in answer.data]
        assert_close(vectors, reference.encode(batch))


def test_gguf_embedding_model_refuses_generation_and_long_inputs(gguf_minilm):
    base = gguf_minilm.base_url
    check_error(post(base, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}),
                400, "model")
    # The GGUF's context is the checkpoint's 512 positions.
    check_error(post(base, "/v1/embeddings", {"model": MODEL, "input": ["ok", "word " * 600]}), 400, "input[1]")
    check_error(post(base, "/v1/embeddings", {"model": MODEL, "input": "x", "dimensions": 64}), 400, "dimensions")


def test_gguf_declaring_cls_pooling_is_pooled_by_cls(minilm_checkpoint, tmp_path):
    """The same weights with a sentence-transformers config that pools the [CLS] token: the GGUF then declares
    CLS pooling, and rostra serves it so (a mean-pooled vector would be far from it)."""
    from sentence_transformers import SentenceTransformer

    checkpoint = tmp_path / "minilm-cls"
    shutil.copytree(minilm_checkpoint, checkpoint, ignore=shutil.ignore_patterns("model.safetensors"))
    (checkpoint / "model.safetensors").symlink_to(minilm_checkpoint / "model.safetensors")
    pooling = checkpoint / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**config, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))
    write_bert_gguf(checkpoint, tmp_path / "minilm-cls.gguf")
    reference = SentenceTransformer(str(checkpoint), device="cpu")
    server = gguf_server(tmp_path / "minilm-cls.gguf")
    try:
        assert_close(vectors_of(embeddings(server, {"input": TEXTS})), reference.encode(TEXTS))
    finally:
        server.stop()
