#!/usr/bin/env python3
"""Goldens of shardgate-media's placeholder expansion, from vLLM's own prompt-update code
(`vllm/multimodal/processing/processor.py`, the real-vLLM venv) with Qwen2-VL's replacement
(`vllm/model_executor/models/qwen2_vl.py`: each `<|image_pad|>` becomes
`grid_t * grid_h * grid_w / merge_size**2` copies of itself) and Qwen3-VL's video replacement
(`qwen3_vl.py`, `get_video_repl`: each `<|video_pad|>` becomes, per frame group, its timestamp
text, `<|vision_start|>`, copies of `<|video_pad|>` and `<|vision_end|>`, the copies alone
embedding positions: `PromptUpdateDetails.select_token_id`).

    ~/.cache/real-vllm/venv/bin/python tools/goldens/placeholders.py [--check]

Writes `crates/media/tests/goldens/placeholders.json` (prompt ids, each item's replacement: a
count of copies or a token sequence, and the expanded ids and `PlaceholderRange`s with their
`is_embed` masks vLLM computes, or the fact that it refuses), which
`cargo test -p shardgate-media --test placeholders` checks. `--check` regenerates and fails
on any difference."""
import json, sys
from pathlib import Path

from vllm.multimodal.processing.processor import (
    PromptReplacement,
    PromptUpdateDetails,
    _apply_token_matches_with_placeholders,
)

OUT = Path(__file__).resolve().parents[2] / "crates/media/tests/goldens/placeholders.json"
# Qwen2-VL's vocabulary: <|vision_start|>, <|image_pad|>, <|vision_end|>; the rest is text.
START, PAD, END = 151652, 151655, 151653
IMAGE = [START, PAD, END]
VIDEO_PAD = 151656
VIDEO = [START, VIDEO_PAD, END]


def frame_groups(*groups):
    """A Qwen3-VL video's replacement: per frame group, its timestamp text's ids (here "<0.2
    seconds>" and the like, as Qwen3's tokenizer encodes them) and its copies of the pad."""
    out = []
    for text, copies in groups:
        out += [*text, START, *[VIDEO_PAD] * copies, END]
    return out


T0, T1 = [27, 15, 13, 17, 6486, 29], [27, 16, 13, 17, 6486, 29]

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
# Qwen3-VL videos: the item's replacement is a token sequence.
VIDEO_CASES = [
    ("one video", [9707, *VIDEO, 3555], [frame_groups((T0, 4), (T1, 4))]),
    ("two videos", [*VIDEO, 13, *VIDEO], [frame_groups((T0, 2)), frame_groups((T0, 1), (T1, 1), (T1, 1))]),
    ("fewer video pads than videos", [*VIDEO, 5], [frame_groups((T0, 2)), frame_groups((T1, 2))]),
    ("more video pads than videos", [*VIDEO, *VIDEO], [frame_groups((T1, 3))]),
]


def expand(prompt, token, items):
    """`items`: each a count of copies of `token` or its replacement sequence."""
    def replacement(item):
        if isinstance(item, int):
            return [token] * item
        return PromptUpdateDetails.select_token_id(item, token)

    updates = {"item": [[PromptReplacement(modality="item", target=[token],
                                           replacement=replacement(item)).resolve(i)] for i, item in enumerate(items)]}
    ids, _, placeholders = _apply_token_matches_with_placeholders(list(prompt), updates)
    ranges = [p.to_range() for p in placeholders.get("item", [])]
    if len(ranges) != len(items):
        # vLLM's _validate_mm_placeholders refuses the request.
        return {"error": f"{len(items)} items, {len(ranges)} placeholders"}
    return {"ids": ids, "ranges": [[r.offset, r.length, None if r.is_embed is None else [int(b) for b in r.is_embed]]
                                   for r in ranges]}


def main():
    cases = [{"name": name, "prompt": prompt, "replacements": items, "placeholder": token,
              **expand(prompt, token, items)}
             for token, table in ((PAD, CASES), (VIDEO_PAD, VIDEO_CASES)) for name, prompt, items in table]
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
