#!/usr/bin/env python3
"""Differential test of videos in chat requests: the tiny Qwen2-VL model (setup.sh's tiny-vl)
served by `vllm serve` (OpenCV decodes the MP4, its qwen2_vl loader samples 2 frames a second,
transformers' video processor runs) and by shardgate in front of a headless vLLM engine
(shardgate does all of that and sends pixel_values_videos in mm_features) must give the same
prompt token counts and greedy answers.

Opt-in (needs tools/real-vllm/setup.sh); run with the real-vLLM venv's python:

    ~/.cache/real-vllm/venv/bin/python tests/real_vllm/video.py [--gateway PATH] [--port-base N]

The videos are H.264 in MP4 made here by the media crate's make_video example (OpenH264's
encoder, a moving colour pattern) in sizes, aspect ratios and frame counts (odd and even)
that exercise the frame sampling and smart_resize; and videos with B-frames made by libx264
(tools/video/make_bframes.py in the venv tools/video/setup-encoder.sh makes, which this runs):
High and Main profile, CABAC and CAVLC, B-pyramid, an open GOP. The run itself is images.py's: one real
engine at a time, shardgate's first. Exit status 0 = identical."""
import base64, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import images  # noqa: E402
from differential import ROOT  # noqa: E402

ENGINE_ARGS = ["--gpu-memory-utilization", "0.3", "--limit-mm-per-prompt", json.dumps({"image": 0, "video": 2})]

# (width, height, frames, fps)
VIDEOS = [(64, 48, 20, 10), (100, 60, 9, 4), (320, 240, 31, 30), (36, 90, 16, 8), (128, 32, 61, 24)]
# (width, height, frames, fps, make_bframes.py options)
BFRAMES = [
    (160, 96, 45, 8, ["--bf", "3"]),
    (128, 72, 33, 6, ["--bf", "2", "--profile", "main", "--cavlc"]),
    (112, 64, 50, 4, ["--bf", "2", "--open-gop", "--gop", "12"]),
    (320, 240, 61, 24, ["--bf", "3", "--gop", "20"]),
]


def video_url(make):
    """A data URL of the MP4 `make(path)` writes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "v.mp4")
        make(out)
        with open(out, "rb") as f:
            return "data:video/mp4;base64," + base64.b64encode(f.read()).decode()


def openh264(width, height, frames, fps):
    cmd = ["cargo", "run", "-q", "--release", "-p", "shardgate-media", "--example", "make_video", "--"]
    return lambda out: subprocess.run(cmd + [out, str(width), str(height), str(frames), str(fps)], cwd=ROOT, check=True)


def x264(width, height, frames, fps, opts):
    setup = os.path.join(ROOT, "tools", "video", "setup-encoder.sh")
    python = subprocess.run([setup], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    make = [python, os.path.join(ROOT, "tools", "video", "make_bframes.py")]
    return lambda out: subprocess.run(make + [out, *map(str, (width, height, frames, fps, *opts))], check=True)


def cases():
    text = {"type": "text", "text": "What happens in the video?"}
    urls = [video_url(openh264(*v)) for v in VIDEOS]
    bframes = [video_url(x264(*v)) for v in BFRAMES]
    out = [("chat", {"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": u}}, text]}],
                     "temperature": 0, "max_tokens": 16}) for u in urls + bframes]
    for pair in [(urls[0], urls[1]), (bframes[0], urls[1])]:
        two = [{"type": "video_url", "video_url": {"url": u}} for u in pair]
        out.append(("chat", {"messages": [{"role": "user", "content": two + [text]}], "temperature": 0,
                             "max_tokens": 16}))
    return out


if __name__ == "__main__":
    images.main(cases(), ENGINE_ARGS, "video")
