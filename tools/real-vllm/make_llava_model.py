"""Writes a tiny random-weight LLaVA-1.5 model directory a real vLLM engine can load: the
LlavaForConditionalGeneration architecture (a CLIP vision tower at LLaVA-1.5's 336-pixel input
and 14-pixel patches, the two-layer GELU projector, a Llama text model) at toy widths, the
tokenizer of tiny-llama (make_model.py's) with LLaVA's `<image>` token added, and
preprocessor_config.json / processor_config.json written here from LLaVA-1.5's public values
(llava-hf/llava-1.5-7b-hf). The chat template reads `content` as a string, so an image part
reaches it as vLLM's `<image>` placeholder in front of the text.

  make_llava_model.py OUT_DIR TINY_LLAMA_DIR

Seeded, so the weights (and greedy outputs) are the same for a given torch version."""
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (CLIPVisionConfig, GenerationConfig, LlamaConfig, LlavaConfig,
                          LlavaForConditionalGeneration, PreTrainedTokenizerFast)

IMAGE_TOKEN = "<image>"
PREPROCESSOR = {
    "crop_size": {"height": 336, "width": 336},
    "do_center_crop": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_processor_type": "CLIPImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "processor_class": "LlavaProcessor",
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"shortest_edge": 336},
}
# What the processor's own expansion of <image> needs to agree with vLLM's count (576).
PROCESSOR = {
    "image_token": IMAGE_TOKEN,
    "num_additional_image_tokens": 1,
    "patch_size": 14,
    "processor_class": "LlavaProcessor",
    "vision_feature_select_strategy": "default",
}
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{{ '<|' + m['role'] + '|>' + (m['content'] if m['content'] is string else '') + '<|end|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def publish_tower_names(path):
    """transformers 5 saves the CLIP tower's weights without its `vision_model.` level; the
    published LLaVA-1.5 checkpoints (and vLLM's loader) have it."""
    weights = load_file(path)
    tower = "vision_tower."
    renamed = {(tower + "vision_model." + k[len(tower):] if k.startswith(tower) and ".vision_model." not in k
                else k): v for k, v in weights.items()}
    save_file(renamed, path, metadata={"format": "pt"})


def main():
    out, tokenizer_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(out)
    image_token = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    text = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        # Large initial weights make greedy answers depend on the image, not one token repeated.
        initializer_range=0.5,
    )
    vision = CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=2, image_size=336, patch_size=14, projection_dim=64)
    config = LlavaConfig(vision_config=vision.to_dict(), text_config=text.to_dict(),
                         image_token_index=image_token, vision_feature_select_strategy="default",
                         vision_feature_layer=-2, projector_hidden_act="gelu",
                         tie_word_embeddings=False)
    LlavaForConditionalGeneration(config).to(torch.float32).save_pretrained(out, safe_serialization=True)
    publish_tower_names(os.path.join(out, "model.safetensors"))
    GenerationConfig(bos_token_id=tokenizer.bos_token_id,
                     eos_token_id=[tokenizer.eos_token_id, end]).save_pretrained(out)
    for name, values in (("preprocessor_config.json", PREPROCESSOR), ("processor_config.json", PROCESSOR)):
        with open(os.path.join(out, name), "w") as f:
            json.dump(values, f, indent=2)
    print(json.dumps({"model": out, "vocab": len(tokenizer), "image_token": image_token, "end": end}))


if __name__ == "__main__":
    main()
