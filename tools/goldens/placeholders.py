#!/usr/bin/env python3
"""Goldens of shardgate-media's placeholder expansion, from vLLM's own prompt-update code
(`vllm/multimodal/processing/processor.py`, the real-vLLM venv) with Qwen2-VL's replacement
(`vllm/model_executor/models/qwen2_vl.py`: each `<|image_pad|>` becomes
`grid_t * grid_h * grid_w / merge_size**2` copies of itself).

    ~/.cache/real-vllm/venv/bin/python tools/goldens/placeholders.py [--check]

Writes `crates/media/tests/goldens/placeholders.json` (prompt ids, tokens per image, and the
expanded ids and `PlaceholderRange`s vLLM computes, or the fact that it refuses), which
`cargo test -p shardgate-media --test placeholders` checks. `--check` regenerates and fails
on any difference."""
import json, sys
from pathlib import Path

from vllm.multimodal.processing.processor import (
    PromptReplacement,
    _apply_token_matches_with_placeholders,
)

OUT = Path(__file__).resolve().parents[2] / "crates/media/tests/goldens/placeholders.json"
# Qwen2-VL's vocabulary: <|vision_start|>, <|image_pad|>, <|vision_end|>; the rest is text.
START, PAD, END = 151652, 151655, 151653
IMAGE = [START, PAD, END]

CASES = [
    ("one image", [9707, 11, *IMAGE, 3555, 374], [64]),
    ("two images", [*IMAGE, 320, *IMAGE, 13], [4, 2691]),
    ("image first and last", [*IMAGE, 1, 2, *IMAGE], [16, 16]),
    ("adjacent pads", [START, PAD, PAD, END], [4, 9]),
    ("more pads than images", [*IMAGE, 5, *IMAGE], [8]),
    ("fewer pads than images", [*IMAGE, 5], [8, 8]),
    ("no pad", [1, 2, 3], [4]),
    ("no image", [1, *IMAGE], []),
]


def expand(prompt, counts):
    updates = {"image": [[PromptReplacement(modality="image", target=[PAD],
                                            replacement=[PAD] * n).resolve(i)] for i, n in enumerate(counts)]}
    ids, _, placeholders = _apply_token_matches_with_placeholders(list(prompt), updates)
    ranges = [p.to_range() for p in placeholders.get("image", [])]
    if len(ranges) != len(counts):
        # vLLM's _validate_mm_placeholders refuses the request.
        return {"error": f"{len(counts)} images, {len(ranges)} placeholders"}
    return {"ids": ids, "ranges": [[r.offset, r.length] for r in ranges]}


def main():
    cases = [{"name": name, "prompt": prompt, "tokens_per_image": counts, "placeholder": PAD,
              **expand(prompt, counts)} for name, prompt, counts in CASES]
    text = '{"cases": [\n' + ",\n".join(json.dumps(case) for case in cases) + "\n]}\n"
    if "--check" in sys.argv:
        if OUT.read_text() != text:
            sys.exit(f"{OUT} differs from what vLLM computes: rerun without --check")
        print(f"{OUT.name}: {len(cases)} cases as vLLM computes them")
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
