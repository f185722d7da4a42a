"""A tiny LLaVA checkpoint for the transformers (and vLLM) engines' image path: no vision model can be downloaded here.

Built from transformers' configs with random weights from a fixed seed: a CLIP vision tower (32x32 pixels in 8x8
patches: 16 image tokens once its class token is dropped), a two-layer MLP projector, a small Llama text model; the
tokenizer is the embedded SmolLM2's (tests convert it from the GGUF) with an `<image>` token added; a LlavaProcessor
with a CLIP image processor; a ChatML template (SmolLM2's format) that writes `<image>` where an image stands. The
model sees nothing meaningful, but it is deterministic: the same image and prompt give the same tokens, so rostra's
output can be compared with transformers' own `generate` on the same files.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

IMAGE_TOKEN = "<image>"
IMAGE_SIZE, PATCH = 32, 8
IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2  # per image: the patches (the CLS token is dropped)
SEED = 4321
_DONE_MARKER = "rostra-tiny-llava"

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{ '<image>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


# llava-hf/llava-1.5-7b-hf's own chat template (its chat_template.json): every image first, as "<image>\n", then the
# text parts, each followed by a space: a spelling around the image that only the template knows.
LLAVA_15_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}{% endif %}"
    "{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] + ' '}}"
    "{% endfor %}{% else %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


def tiny_llava(text_checkpoint: Path, out_dir: Path, chat_template: str = CHAT_TEMPLATE) -> Path:
    """The checkpoint in `out_dir`, built once (a complete one is reused) from `text_checkpoint`'s tokenizer."""
    return built_once(out_dir, _DONE_MARKER, SEED, lambda staging: _write(text_checkpoint, staging, chat_template))


def built_once(out_dir: Path, done_marker: str, seed: int, write: Callable[[Path], None]) -> Path:
    """`out_dir`, written by `write` into a staging directory and renamed into place (complete or absent, never
    half there); reused while its marker file holds the seed it was built from."""
    marker = out_dir / done_marker
    if marker.is_file() and marker.read_text() == str(seed):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    write(staging)
    (staging / done_marker).write_text(str(seed))
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    return out_dir


def _write(text_checkpoint: Path, target: Path, chat_template: str) -> None:
    import torch
    from transformers import (AutoTokenizer, CLIPVisionConfig, GenerationConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tokenizer = AutoTokenizer.from_pretrained(text_checkpoint)
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                              image_size=IMAGE_SIZE, patch_size=PATCH, projection_dim=32)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, initializer_range=0.2)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_id=image_token_id,
                         image_seq_length=IMAGE_TOKENS, vision_feature_select_strategy="default",
                         vision_feature_layer=-2, projector_hidden_act="gelu")
    torch.manual_seed(SEED)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id,
                                               eos_token_id=tokenizer.eos_token_id)
    model.save_pretrained(target)
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": IMAGE_SIZE},
                                            crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=PATCH,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               image_token=IMAGE_TOKEN, chat_template=chat_template)
    processor.save_pretrained(target)
    tokenizer.chat_template = chat_template  # the template rostra reads from the tokenizer as from the processor
    tokenizer.save_pretrained(target)
