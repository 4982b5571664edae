"""Writes a tiny random-weight Qwen3-VL model directory a real vLLM engine can load: the
Qwen3-VL architecture (vision tower with learned position embeddings and a deepstack merger,
interleaved-MRoPE text model) at toy sizes, the real Qwen3 tokenizer files (its vocabulary has
Qwen3-VL's vision tokens: <|vision_start|> 151652, <|vision_end|> 151653, <|image_pad|> 151655,
<|video_pad|> 151656), and preprocessor_config.json / video_preprocessor_config.json written here
from the Qwen3-VL model card's values (Qwen/Qwen3-VL-2B-Instruct: patch 16, merge 2, mean and std
0.5), with the pixel bounds lowered so that an image costs at most 64 placeholder tokens and a
video's frame group at most 16 on two cores.

  make_qwen3_vl_model.py OUT_DIR TOKENIZER_DIR

Seeded, so the weights (and greedy outputs) are the same for a given torch version."""
import json
import os
import sys

import torch
from transformers import GenerationConfig, Qwen3VLConfig, Qwen3VLForConditionalGeneration

from make_model import copy_tokenizer  # the script's own directory is on sys.path

MEAN_STD = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
COMMON = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, **MEAN_STD,
          "processor_class": "Qwen3VLProcessor"}
PREPROCESSOR = {
    # The model card's bounds are 65536..16777216: 4 to 64 merged patches of 32x32 pixels here.
    "size": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
    **COMMON,
    "image_processor_type": "Qwen2VLImageProcessorFast",
}
VIDEO_PREPROCESSOR = {
    # Bounds on frames x height x width (the model card's are 4096..25165824): 16 merged patches
    # a frame group for 8 sampled frames.
    "size": {"shortest_edge": 4096, "longest_edge": 8 * 16 * 32 * 32},
    **COMMON,
    "video_processor_type": "Qwen3VLVideoProcessor",
}


def main():
    out, tokenizer_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    vocab = copy_tokenizer(out, tokenizer_dir)
    im_end, end_of_text = 151645, 151643
    config = Qwen3VLConfig(
        text_config={
            "vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 4096,
            "bos_token_id": end_of_text, "eos_token_id": im_end, "initializer_range": 0.5,
            # The three MRoPE sections (time, height, width) split head_dim's 16 frequencies.
            "rope_parameters": {"rope_type": "default", "mrope_section": [4, 6, 6], "mrope_interleaved": True,
                                "rope_theta": 10000.0},
        },
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                       "out_hidden_size": 64, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "num_position_embeddings": 256, "deepstack_visual_indexes": [0]},
        tie_word_embeddings=True,
    )
    Qwen3VLForConditionalGeneration(config).to(torch.float32).save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=end_of_text, eos_token_id=[im_end, end_of_text]).save_pretrained(out)
    for name, values in (("preprocessor_config.json", PREPROCESSOR),
                         ("video_preprocessor_config.json", VIDEO_PREPROCESSOR)):
        with open(os.path.join(out, name), "w") as f:
            json.dump(values, f, indent=2)
    print(json.dumps({"model": out, "vocab": vocab, "eos": [im_end, end_of_text]}))


if __name__ == "__main__":
    main()
