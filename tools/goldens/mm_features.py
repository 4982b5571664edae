#!/usr/bin/env python3
"""Goldens of shardgate-wire's `mm_features` encoding, from vLLM's own structs and encoder:
Qwen2-VL image items built by vLLM's field factory (`MultiModalKwargsItems.from_hf_inputs`
with `_create_qwen2vl_field_factory`), a Qwen3-VL video item by the same factory (raw `uint8`
`pixel_values_videos`, `video_grid_thw`, the `timestamps` list, its range's `is_embed` mask)
and LLaVA ones by its field config
(`LlavaMultiModalProcessor._get_mm_fields_config`: `pixel_values` batched), wrapped in `MultiModalFeatureSpec`s inside an
`EngineCoreRequest`, encoded by `MsgpackEncoder` (tensors of 256 bytes and more as aux frames).

    ~/.cache/real-vllm/venv/bin/python tools/goldens/mm_features.py [--check]
    ~/.cache/real-vllm/venv-0.27.1/bin/python tools/goldens/mm_features.py --check

Writes `crates/wire/tests/goldens/mm_features.json`: per case the request's inputs, the
`mm_features` element and the whole main frame in hex, and each aux frame's length and which tensor it is (the aux frames are the
tensors' bytes; this script asserts it). `cargo test --release -p shardgate-wire --test
mm_features` rebuilds every case and compares. `--check` regenerates and fails on any
difference; with another release's venv it compares the `mm_features` element and the aux
frames (the request around them has that release's fields). Pixel values are a pattern both sides compute exactly (`(i % 251) * 0.25` in f32)."""
import json, sys
from pathlib import Path

import numpy as np
import torch
import vllm
from transformers import BatchFeature
from vllm.model_executor.models.qwen2_vl import _create_qwen2vl_field_factory
from vllm.multimodal.inputs import MultiModalFeatureSpec, MultiModalFieldConfig, MultiModalKwargsItem, MultiModalKwargsItems, PlaceholderRange
from vllm.sampling_params import SamplingParams
from vllm.v1.engine import EngineCoreRequest
from vllm.v1.serial_utils import MsgpackEncoder

OUT = Path(__file__).resolve().parents[2] / "crates/wire/tests/goldens/mm_features.json"
PAD = 151655
LLAVA_IMAGE = 32000  # LLaVA-1.5's image_token_index
ROW = 3 * 2 * 14 * 14  # channels * temporal_patch_size * patch_size**2: Qwen2-VL's patch row
MERGE = 2

# name, grids (t, h, w) per image, prompt text ids around the images, mm_hash per image
CASES = [
    ("one image", [(1, 4, 4)], [9707, 11], ["a1" * 32]),
    ("two images", [(1, 2, 4), (1, 6, 2)], [3555, 374], ["b2" * 32, "c3" * 32]),
    ("one patch row", [(1, 2, 2)], [], ["d4" * 32]),
]
# name, images, each image's (channels, height, width), its placeholder tokens, prompt text ids
# around the images, mm_hash per image
LLAVA_CASES = [
    ("llava one image", 1, (3, 8, 8), 4, [1, 319], ["e5" * 32]),
    ("llava two images", 2, (3, 16, 12), 12, [1], ["f6" * 32, "a7" * 32]),
    ("llava one small image", 1, (3, 2, 4), 2, [1, 319, 29871], ["b8" * 32]),
]


# name, video_grid_thw, timestamps (one per frame group), prompt text ids before the video,
# the timestamp text's ids, mm_hash
VIDEO_CASES = [
    ("qwen3-vl video", (2, 4, 4), [0.25, 1.2], [9707, 151652], [27, 15, 13, 17, 6486, 29], "e9" * 32),
    ("qwen3-vl long video", (3, 8, 12), [0.5, 1.5, 2.5], [151652], [27, 16, 13, 20, 6486, 29], "fa" * 32),
]
VIDEO_PAD, START, END = 151656, 151652, 151653
VIDEO_ROW = 3 * 2 * 16 * 16  # Qwen3-VL's patch row


def pixels(rows):
    return (np.arange(rows * ROW, dtype=np.int64) % 251).astype(np.float32).reshape(rows, ROW) * np.float32(0.25)


def sampling():
    # __post_init__ fills list fields the front end's requests carry as unset: back to the
    # struct defaults, as the bytes a real engine accepted from the gateway have them.
    p = SamplingParams(temperature=0.0, max_tokens=4)
    for name in ("stop", "stop_token_ids", "bad_words", "skip_reading_prefix_cache"):
        setattr(p, name, None)
    return p


def request_of(items, lengths, keys, pad, text, hashes):
    """The request with each item's placeholders after `text`, each followed by a newline (13)."""
    prompt, features = list(text), []
    for item, n, mm_hash in zip(items, lengths, hashes):
        # vLLM builds the item's keys from a set (order varies per process); the engine reads
        # the map by key, so the golden fixes the order the gateway writes.
        item = MultiModalKwargsItem({k: item[k] for k in keys})
        features.append(MultiModalFeatureSpec(data=item, modality="image", identifier=mm_hash,
                                              mm_position=PlaceholderRange(offset=len(prompt), length=n),
                                              mm_hash=mm_hash))
        prompt += [pad] * n
        prompt.append(13)
    return prompt, EngineCoreRequest(
        request_id="mm-1", prompt_token_ids=prompt, mm_features=features,
        sampling_params=sampling(), pooling_params=None,
        arrival_time=1700000000.5, lora_request=None, cache_salt=None, data_parallel_rank=None)


def build(grids, text, hashes):
    rows = [t * h * w for t, h, w in grids]
    hf = BatchFeature({"pixel_values": torch.from_numpy(pixels(sum(rows))),
                       "image_grid_thw": torch.tensor(grids, dtype=torch.int64)})
    items = MultiModalKwargsItems.from_hf_inputs(hf, _create_qwen2vl_field_factory(MERGE)(hf))["image"]
    lengths = [t * h * w // MERGE // MERGE for t, h, w in grids]
    prompt, request = request_of(items, lengths, ("pixel_values", "image_grid_thw"), PAD, text, hashes)
    return prompt, rows, request


def llava_case(name, images, shape, tokens, text, hashes):
    """LLaVA's items: each `pixel_values` its own (3, height, width) entry of the batch; the
    pattern runs over the batch's elements."""
    size = int(np.prod(shape))
    batch = (np.arange(images * size, dtype=np.int64) % 251).astype(np.float32) * np.float32(0.25)
    hf = BatchFeature({"pixel_values": torch.from_numpy(batch.reshape(images, *shape))})
    # What LlavaMultiModalProcessor._get_mm_fields_config gives (its `image_embeds` entry aside);
    # built here, as importing vLLM's LLaVA module fails in some releases' venvs (0.27.1).
    fields = {"pixel_values": MultiModalFieldConfig.batched("image")}
    items = MultiModalKwargsItems.from_hf_inputs(hf, fields)["image"]
    prompt, request = request_of(items, [tokens] * images, ("pixel_values",), LLAVA_IMAGE, text, hashes)
    expect = [batch[i * size:(i + 1) * size].tobytes() for i in range(images)]
    out = encoded(name, request, expect)
    return {"name": name, "family": "llava", "images": images, "shape": list(shape), "tokens": tokens,
            "prompt": prompt, "mm_hashes": hashes, **out}


def encoded(name, request, expect):
    """The request's frames, each aux frame checked to be the next item's pixel values (those of
    256 bytes and more: smaller tensors go inline)."""
    frames = MsgpackEncoder().encode(request)
    aux = []
    expect = [e for e in expect if len(e) >= 256]
    for i, want in enumerate(expect):
        assert bytes(frames[1 + i]) == want, f"{name}: aux frame {1 + i} is not image {i}'s pixel values"
        aux.append({"tensor": f"pixel_values[{i}]", "bytes": len(want)})
    assert len(frames) == 1 + len(expect), f"{name}: {len(frames)} frames"
    alone = MsgpackEncoder().encode(request.mm_features)
    assert [bytes(f) for f in alone[1:]] == [bytes(f) for f in frames[1:]]
    return {"mm_features": bytes(alone[0]).hex(), "main": bytes(frames[0]).hex(), "aux": aux}


def case(name, grids, text, hashes):
    prompt, rows, request = build(grids, text, hashes)
    all_pixels = pixels(sum(rows))
    starts = np.cumsum([0] + rows)
    expect = [all_pixels[starts[i]:starts[i + 1]].tobytes() for i in range(len(rows))]
    return {"name": name, "grids": [list(g) for g in grids], "prompt": prompt, "mm_hashes": hashes,
            **encoded(name, request, expect)}


def video_case(name, grid, timestamps, text, stamp, mm_hash):
    """A Qwen3-VL video: its replacement is, per frame group, the timestamp text (`stamp` for
    every group here), <|vision_start|>, the group's pads and <|vision_end|>; only the pads are
    embedding positions."""
    t, h, w = grid
    rows = t * h * w
    values = (np.arange(rows * VIDEO_ROW, dtype=np.int64) % 251).astype(np.uint8).reshape(rows, VIDEO_ROW)
    hf = BatchFeature({"pixel_values_videos": torch.from_numpy(values),
                       "video_grid_thw": torch.tensor([grid], dtype=torch.int64), "timestamps": [timestamps]})
    items = MultiModalKwargsItems.from_hf_inputs(hf, _create_qwen2vl_field_factory(MERGE)(hf))["video"]
    item = MultiModalKwargsItem({k: items[0][k] for k in ("pixel_values_videos", "video_grid_thw", "timestamps")})
    replacement = []
    for _ in range(t):
        replacement += [*stamp, START, *[VIDEO_PAD] * (h * w // MERGE // MERGE), END]
    is_embed = torch.tensor([token == VIDEO_PAD for token in replacement])
    prompt = [*text, *replacement, END, 13]
    feature = MultiModalFeatureSpec(data=item, modality="video", identifier=mm_hash,
                                    mm_position=PlaceholderRange(offset=len(text), length=len(replacement),
                                                                 is_embed=is_embed),
                                    mm_hash=mm_hash)
    request = EngineCoreRequest(
        request_id="mm-1", prompt_token_ids=prompt, mm_features=[feature],
        sampling_params=sampling(), pooling_params=None,
        arrival_time=1700000000.5, lora_request=None, cache_salt=None, data_parallel_rank=None)
    return {"name": name, "family": "qwen3-vl-video", "grid": list(grid), "timestamps": timestamps,
            "offset": len(text), "is_embed": [int(b) for b in is_embed], "prompt": prompt, "mm_hashes": [mm_hash],
            **encoded(name, request, [values.tobytes()])}


def text_of(cases, version):
    return (f'{{"vllm": "{version}", "cases": [\n' + ",\n".join(json.dumps(c) for c in cases) + "\n]}\n")


def main():
    cases = ([case(*c) for c in CASES] + [llava_case(*c) for c in LLAVA_CASES]
             + [video_case(*c) for c in VIDEO_CASES])
    if "--check" in sys.argv:
        golden = json.loads(OUT.read_text())
        if golden["vllm"] != vllm.__version__:
            # Other releases' EngineCoreRequest has other fields after mm_features (the codec
            # writes 0.33's); the mm_features element itself must be the same.
            for c in cases:
                del c["main"]
            for c in golden["cases"]:
                del c["main"]
            if golden["cases"] != cases:
                sys.exit(f"{OUT}: vLLM {vllm.__version__} encodes mm_features differently")
            print(f"{OUT.name}: {len(cases)} cases' mm_features as vLLM {vllm.__version__} encodes them")
            return
        if OUT.read_text() != text_of(cases, vllm.__version__):
            sys.exit(f"{OUT} differs from what vLLM {vllm.__version__} encodes")
        print(f"{OUT.name}: {len(cases)} cases as vLLM {vllm.__version__} encodes them")
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text_of(cases, vllm.__version__))
    print(f"wrote {OUT} ({len(cases)} cases, vLLM {vllm.__version__})")


if __name__ == "__main__":
    main()
