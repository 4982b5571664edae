#!/usr/bin/env python3
"""Writes an H.264 MP4 with B-frames through libx264 (PyAV's bundled FFmpeg): a synthetic
moving pattern of our own, so nothing third-party is stored or fetched.

    python make_bframes.py OUT.mp4 WIDTH HEIGHT FRAMES FPS [--bf N] [--cavlc] [--profile P]
                           [--open-gop] [--gop N] [--extra X264_PARAMS]

Run it with the venv tools/video/setup-encoder.sh makes."""
import argparse

import av
import numpy as np


def frame_rgb(i, width, height):
    # Gradients that move at different speeds plus a sliding square: motion for the B-frames
    # to predict, and edges in every colour for the YUV conversion to be checked on.
    y, x = np.mgrid[0:height, 0:width]
    r = (x * 255 // max(width - 1, 1) + 7 * i) % 256
    g = (y * 255 // max(height - 1, 1) + 3 * i) % 256
    b = ((x + y) * 2 + 11 * i) % 256
    rgb = np.stack([r, g, b], axis=-1).astype(np.uint8)
    side = max(min(width, height) // 4, 2)
    left, top = (5 * i) % max(width - side, 1), (3 * i) % max(height - side, 1)
    rgb[top:top + side, left:left + side] = (255 - 9 * i % 256, 40, 200)
    return rgb


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("width", type=int)
    p.add_argument("height", type=int)
    p.add_argument("frames", type=int)
    p.add_argument("fps", type=int)
    p.add_argument("--bf", type=int, default=3)
    p.add_argument("--cavlc", action="store_true")
    p.add_argument("--profile", default="high", choices=["main", "high"])
    p.add_argument("--open-gop", action="store_true")
    p.add_argument("--gop", type=int, default=250)
    p.add_argument("--extra", default="")
    a = p.parse_args()
    params = [f"bframes={a.bf}", f"keyint={a.gop}", f"min-keyint={min(a.gop, 25)}", "scenecut=0"]
    if a.extra:
        params.append(a.extra)
    if a.cavlc:
        params.append("cabac=0")
    if a.open_gop:
        params.append("open-gop=1")
    with av.open(a.out, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=a.fps)
        stream.width, stream.height, stream.pix_fmt = a.width, a.height, "yuv420p"
        stream.options = {"profile": a.profile, "preset": "medium", "x264-params": ":".join(params)}
        for i in range(a.frames):
            frame = av.VideoFrame.from_ndarray(frame_rgb(i, a.width, a.height), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


if __name__ == "__main__":
    main()
