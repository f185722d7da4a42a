"""A tiny Idefics3 checkpoint (SmolVLM's architecture) for the vLLM and transformers engines' image path.

SmolVLM-256M pairs SmolLM2-135M with a SigLIP-style vision tower; this checkpoint does the same at toy size: its
text model is the embedded SmolLM2-135M (tests convert it from the GGUF), the vision tower (32x32 pixels in 8x8
patches, two layers) and the pixel-shuffle connector are random weights from a fixed seed. Its tokenizer is
SmolLM2's with SmolVLM's image tokens added (`<fake_token_around_image>`, `<image>`, `<end_of_utterance>`,
`<global-img>`, `<row_R_col_C>`), their embeddings random too. The processor is Idefics3's with its PIL image
processor (the default one needs torchvision, which vLLM's CPU install removes): an image is resized to at most
64 pixels on its longest edge, split into 32x32 tiles plus a global view, each tile 4 image tokens after the
connector's 2x2 pixel shuffle. The chat template is SmolLM2's ChatML, writing `<image>` where an image stands.

Why Idefics3: vLLM's module and transformers' processor for it import without torchvision (LLaVA's do not, see
tests/test_engine_vllm_images.py), and both transformers and vLLM run it. The model sees nothing meaningful, but it
is deterministic and its images change its answers, so rostra's output can be compared with vLLM's own server.
"""

from __future__ import annotations

from pathlib import Path

from llava_checkpoint import CHAT_TEMPLATE, built_once

IMAGE_TOKEN = "<image>"
TILE, PATCH, SCALE = 32, 8, 2
LONGEST_EDGE = 2 * TILE  # an image becomes at most 2x2 tiles and the global view
TOKENS_PER_TILE = (TILE // PATCH) ** 2 // SCALE ** 2
SEED = 2468
_DONE_MARKER = "rostra-tiny-idefics3"
# SmolVLM's added tokens, in its order: the processor looks each up by name
ADDED_TOKENS = (["<fake_token_around_image>", IMAGE_TOKEN, "<end_of_utterance>", "<global-img>"]
                + [f"<row_{row}_col_{col}>" for row in range(1, 7) for col in range(1, 7)])


def tiny_idefics3(text_checkpoint: Path, out_dir: Path) -> Path:
    """The checkpoint in `out_dir`, built once (a complete one is reused) from `text_checkpoint` (SmolLM2)."""
    return built_once(out_dir, _DONE_MARKER, SEED, lambda staging: _write(text_checkpoint, staging))


def _write(text_checkpoint: Path, target: Path) -> None:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Idefics3Processor, LlamaForCausalLM
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tokenizer = AutoTokenizer.from_pretrained(text_checkpoint)
    tokenizer.add_special_tokens({"additional_special_tokens": ADDED_TOKENS})
    text = LlamaForCausalLM.from_pretrained(text_checkpoint, dtype=torch.float32)
    model = _model(text, tokenizer)
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id,
                                               eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(target)
    image_processor = Idefics3ImageProcessorPil(size={"longest_edge": LONGEST_EDGE},
                                                max_image_size={"longest_edge": TILE})
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer,
                                  image_seq_len=TOKENS_PER_TILE, chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(target)
    tokenizer.chat_template = CHAT_TEMPLATE  # the template rostra reads from the tokenizer as from the processor
    tokenizer.save_pretrained(target)


def _model(text, tokenizer):
    """Idefics3 with SmolLM2's text weights, the new tokens' embeddings and the vision side random (seeded)."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3VisionConfig

    text_config = text.config.to_dict()
    text_config.update(vocab_size=len(tokenizer), tie_word_embeddings=False)
    vision = Idefics3VisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                  image_size=TILE, patch_size=PATCH, initializer_range=0.2)
    config = Idefics3Config(vision_config=vision.to_dict(), text_config=text_config, scale_factor=SCALE,
                            image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN), tie_word_embeddings=False,
                            pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(SEED)
    model = Idefics3ForConditionalGeneration(config).eval()
    vocab = text.config.vocab_size
    with torch.no_grad():
        text_weights = {name.removeprefix("model."): value for name, value in text.state_dict().items()
                        if name.startswith("model.")}
        embeddings = text_weights.pop("embed_tokens.weight")
        missing = model.model.text_model.load_state_dict(text_weights, strict=False).missing_keys
        assert missing == ["embed_tokens.weight"], missing
        scale = embeddings.std().item()
        model.model.text_model.embed_tokens.weight[:vocab] = embeddings
        model.model.text_model.embed_tokens.weight[vocab:].normal_(0.0, scale)
        model.lm_head.weight[:vocab] = embeddings  # SmolLM2 ties them; the image tokens are never an answer
        model.lm_head.weight[vocab:] = 0.0
        # the image embeddings at the text embeddings' scale, so that the images change the answers
        projection = model.model.connector.modality_projection.proj.weight
        projection.normal_(0.0, 2 * scale / projection.shape[1] ** 0.5)
    return model
