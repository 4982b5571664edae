#!/usr/bin/env python3
"""The gateway's video frames against the ones vLLM's default loader gives (OpenCV over FFmpeg:
swscale's YUV to RGB), on videos the media crate's make_video example writes: the same frame
indices, fps and frame count, and the same RGB samples (tolerance 0; swscale's x86 SIMD path,
which any x86 machine with SSSE3 takes).

    ~/.cache/real-vllm/venv/bin/python tools/goldens/video_colour.py

Builds the two examples (make_video, decode_video) with cargo; prints one line per video and
exits 1 if the indices, counts or any sample differ."""
import json, os, subprocess, sys, tempfile

import numpy as np
from vllm.multimodal.video import Qwen2VLVideoBackend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VIDEOS = [(64, 48, 20, 10), (100, 60, 9, 4), (320, 240, 31, 30), (36, 90, 16, 8), (128, 32, 61, 24)]


def example(name, *args):
    cmd = ["cargo", "run", "-q", "--release", "-p", "shardgate-media", "--example", name, "--", *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def main():
    bad = False
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        mp4, raw = os.path.join(tmp, "v.mp4"), os.path.join(tmp, "v.rgb")
        for spec in VIDEOS:
            example("make_video", mp4, *spec)
            ours = json.loads(example("decode_video", mp4, raw))
            frames = np.fromfile(raw, dtype=np.uint8).reshape(len(ours["indices"]), ours["height"], ours["width"], 3)
            with open(mp4, "rb") as f:
                theirs, meta = Qwen2VLVideoBackend.load_bytes(f.read(), fps=2)
            same = (ours["indices"] == meta["frames_indices"] and ours["total_frames"] == meta["total_num_frames"]
                    and abs(ours["fps"] - meta["fps"]) < 1e-9 and frames.shape == theirs.shape)
            bad |= not same
            diff = np.abs(frames.astype(int) - theirs.astype(int)) if frames.shape == theirs.shape else np.array([999])
            worst = max(worst, int(diff.max()))
            print(f"{spec}: indices/count/fps {'same' if same else 'DIFFER'}; max abs {diff.max()}, "
                  f"mean {diff.mean():.3f}, samples differing {np.count_nonzero(diff) / diff.size:.1%}")
    print(f"worst max abs difference: {worst}")
    sys.exit(1 if bad or worst else 0)


if __name__ == "__main__":
    main()
