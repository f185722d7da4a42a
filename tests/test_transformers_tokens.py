"""Token bytes of Hugging Face tokenizers in the SentencePiece alphabet (the byte-level one is
covered on the real model in test_engine_transformers.py)."""

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from rostra.engines.transformers_tokens import token_bytes_table


def sentencepiece_style_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, "</s>": 1, "\u2581": 2, "\u2581a": 3, "b": 4, "<0xC3>": 5, "<0xA9>": 6, "a": 7}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("\u2581", "a")], unk_token="<unk>", byte_fallback=True))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>")


def test_sentencepiece_spaces_and_byte_fallback():
    tokenizer = sentencepiece_style_tokenizer()
    table = token_bytes_table(tokenizer, silent_ids=[tokenizer.eos_token_id])
    assert table[3] == b" a" and table[4] == b"b"
    assert table[5] == b"\xc3" and table[6] == b"\xa9"  # halves of "é", exact
    assert table[tokenizer.eos_token_id] == b""
    ids = tokenizer.encode("ab é", add_special_tokens=False)
    assert 5 in ids and 6 in ids  # "é" is not in the vocabulary: byte fallback
    assert b"".join(table[i] for i in ids).decode() == " ab é"  # SentencePiece's leading space, as llama.cpp keeps it
