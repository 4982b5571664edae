"""Writes a tiny random-weight Qwen2-VL model directory a real vLLM engine can load: the
Qwen2-VL architecture (vision tower, merger, MRoPE text model) at toy sizes, the real Qwen3
tokenizer files (its vocabulary has Qwen2-VL's vision tokens at the same ids: <|vision_start|>
151652, <|vision_end|> 151653, <|image_pad|> 151655), and preprocessor_config.json written
here from the Qwen2-VL model card's values (Qwen/Qwen2-VL-2B-Instruct), with max_pixels lowered
so that an image costs at most 64 placeholder tokens on two cores.

  make_vl_model.py OUT_DIR TOKENIZER_DIR

Seeded, so the weights (and greedy outputs) are the same for a given torch version."""
import json
import os
import sys

import torch
from transformers import GenerationConfig, Qwen2VLConfig, Qwen2VLForConditionalGeneration

from make_model import copy_tokenizer  # the script's own directory is on sys.path

PREPROCESSOR = {
    "min_pixels": 3136,
    # 64 merged patches of 28x28 pixels: the model card's value is 12845056.
    "max_pixels": 64 * 28 * 28,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2VLProcessor",
}


def main():
    out, tokenizer_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    vocab = copy_tokenizer(out, tokenizer_dir)
    im_end, end_of_text = 151645, 151643
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 2048,
            "bos_token_id": end_of_text, "eos_token_id": im_end, "initializer_range": 0.5,
            # head_dim 32: the three MRoPE sections (time, height, width) split its 16 frequencies.
            "rope_parameters": {"rope_type": "default", "mrope_section": [4, 6, 6], "rope_theta": 10000.0},
        },
        vision_config={"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
        tie_word_embeddings=True,
    )
    Qwen2VLForConditionalGeneration(config).to(torch.float32).save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=end_of_text, eos_token_id=[im_end, end_of_text]).save_pretrained(out)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR, f, indent=2)
    print(json.dumps({"model": out, "vocab": vocab, "eos": [im_end, end_of_text]}))


if __name__ == "__main__":
    main()
