#!/usr/bin/env python3
"""The gateway's video frames against the ones vLLM's default loader gives (OpenCV over FFmpeg:
swscale's YUV to RGB), on videos the media crate's make_video example writes (OpenH264,
Baseline) and on videos with B-frames that libx264 writes (tools/video/make_bframes.py in the
venv tools/video/setup-encoder.sh makes: High and Main profile, CABAC and CAVLC, 1 to 3
B-frames, B-pyramid, open GOP): the same frame indices, fps and frame count, and the same RGB
samples (tolerance 0; swscale's x86 SIMD path, which any x86 machine with SSSE3 takes).

    ~/.cache/real-vllm/venv/bin/python tools/goldens/video_colour.py

Builds the two examples (make_video, decode_video) with cargo; prints one line per video and
exits 1 if the indices, counts or any sample differ."""
import json, os, subprocess, sys, tempfile

import numpy as np
from vllm.multimodal.video import Qwen2VLVideoBackend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VIDEOS = [(64, 48, 20, 10), (100, 60, 9, 4), (320, 240, 31, 30), (36, 90, 16, 8), (128, 32, 61, 24)]
# (width, height, frames, fps, make_bframes.py options): at 2 fps the loader (sampling at 2 fps)
# takes every frame, so each B-frame's place is checked; the last one is sampled.
BFRAMES = [
    (64, 48, 14, 2, ["--bf", "0"]),  # High profile without B-frames: OpenH264 still delays one
    (64, 48, 20, 2, ["--bf", "1"]),
    (64, 48, 40, 2, ["--bf", "2"]),
    (160, 96, 45, 2, ["--bf", "3"]),
    (96, 64, 30, 2, ["--bf", "3", "--cavlc"]),
    (128, 72, 33, 2, ["--bf", "2", "--profile", "main"]),
    (80, 48, 48, 2, ["--bf", "3", "--profile", "main", "--cavlc"]),
    (112, 64, 50, 2, ["--bf", "2", "--open-gop", "--gop", "12"]),
    (48, 96, 17, 2, ["--bf", "3", "--extra", "b-pyramid=none:ref=1"]),
    (320, 240, 61, 24, ["--bf", "3", "--gop", "20"]),
]


def example(name, *args):
    cmd = ["cargo", "run", "-q", "--release", "-p", "shardgate-media", "--example", name, "--", *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def encoder():
    """The python of the venv with libx264 (tools/video/setup-encoder.sh makes it if absent)."""
    setup = os.path.join(ROOT, "tools", "video", "setup-encoder.sh")
    return subprocess.run([setup], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]


def videos(tmp):
    """Each test video's description and path, written as it is asked for."""
    mp4 = os.path.join(tmp, "v.mp4")
    for spec in VIDEOS:
        example("make_video", mp4, *spec)
        yield spec, mp4
    python = encoder()
    for (w, h, n, fps, opts) in BFRAMES:
        make = [python, os.path.join(ROOT, "tools", "video", "make_bframes.py"), mp4, w, h, n, fps, *opts]
        subprocess.run(list(map(str, make)), check=True)
        yield (w, h, n, fps, " ".join(opts)), mp4
    # The B-frame videos committed for plain `cargo test` (crates/media/tests/video.rs pins
    # their frames' hashes; this is where those frames are checked against OpenCV's).
    committed = os.path.join(ROOT, "crates", "media", "tests", "videos")
    for name in sorted(os.listdir(committed)):
        yield name, os.path.join(committed, name)


def main():
    bad = False
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "v.rgb")
        for spec, mp4 in videos(tmp):
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
