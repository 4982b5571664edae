#!/usr/bin/env python3
"""Per-image CPU cost, side by side: vLLM's Python stack against shardgate-media on the same
images, on the same machine, in one run.

    ~/.cache/real-vllm/venv/bin/python crates/media/benches/image_cost.py [--out DIR] [--quick]

Writes photo-like JPEG (quality 90, 4:2:0) and PNG images of 640x480, 1280x720 and 3000x2000 to
DIR (default `target/media-bench`, gitignored), times in Python what vLLM's API server does per
image (`ImageMediaIO.load_bytes`: open, EXIF transpose, RGB; then the Hugging Face processor
with `return_tensors="pt"`), and runs `cargo bench -p shardgate-media --bench image_cost` on
the same files, image by image in turn with the Python side (so a change in the machine's load
hits both), and prints one table: medians in milliseconds and Python / Rust.

Both sides run on one thread (`torch.set_num_threads(1)`; the Rust side is single-threaded),
the cost one request's image puts on one core."""
import argparse, io, json, os, statistics, subprocess, sys, time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "crates/media/tests/configs"
SIZES = [(640, 480, 30), (1280, 720, 15), (3000, 2000, 5)]
# (config, backend): the default Qwen2-VL and LLaVA processors vLLM runs, and Qwen2-VL's PIL one.
STEPS = [("qwen2-vl", "torchvision"), ("qwen2-vl", "pil"), ("llava-1.5", "torchvision")]


def photo(width, height, seed):
    """Smooth shapes, texture and mild sensor noise: closer to a photo's entropy than noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    u, v = x / width, y / height
    r = 128 + 100 * np.sin(6 * u + 2 * v)
    g = 128 + 90 * np.cos(4 * v - 3 * u * v)
    b = 128 + 80 * np.sin(25 * np.hypot(u - 0.4, v - 0.6))
    rgb = np.stack([r, g, b], axis=-1) + rng.normal(0, 3, (height, width, 3))
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


def write_images(out_dir, quick):
    images = []
    for width, height, iterations in SIZES:
        image = photo(width, height, width)
        for fmt, ext, options in (("JPEG", "jpg", {"quality": 90}), ("PNG", "png", {})):
            name = f"{width}x{height}.{ext}"
            buffer = io.BytesIO()
            image.save(buffer, format=fmt, **options)
            (out_dir / name).write_bytes(buffer.getvalue())
            images.append({"file": name, "iterations": 3 if quick else iterations, "bytes": len(buffer.getvalue())})
    return images


def processors():
    from transformers import CLIPImageProcessor, Qwen2VLImageProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    classes = {("qwen2-vl", "torchvision"): Qwen2VLImageProcessor, ("qwen2-vl", "pil"): Qwen2VLImageProcessorPil,
               ("llava-1.5", "torchvision"): CLIPImageProcessor, ("llava-1.5", "pil"): CLIPImageProcessorPil}
    for config, backend in STEPS:
        kwargs = {k: v for k, v in json.loads((CONFIGS / f"{config}.json").read_text()).items()
                  if k not in ("image_processor_type", "processor_class")}
        yield f"{config} {backend}", classes[(config, backend)](**kwargs)


def timed(iterations, work):
    work()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def python_side(out_dir, image, steps):
    from vllm.multimodal.media.image import ImageMediaIO

    loader = ImageMediaIO(image_mode="RGB")
    data = (out_dir / image["file"]).read_bytes()
    n = image["iterations"]
    results = {(image["file"], "decode"): timed(n, lambda: loader.load_bytes(data))}
    for step, processor in steps:
        results[(image["file"], step)] = timed(n, lambda: processor(loader.load_bytes(data).media, return_tensors="pt"))
    return results


def rust_side(out_dir, image):
    env = dict(os.environ, CARGO_TARGET_DIR=os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target")))
    command = ["cargo", "bench", "-q", "-p", "shardgate-media", "--bench", "image_cost", "--", str(out_dir), image["file"]]
    run = subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.PIPE, text=True)
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return {(row["image"], row["step"]): row["median_ms"] for row in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "target/media-bench"))
    parser.add_argument("--quick", action="store_true", help="3 iterations per image (a smoke run)")
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    images = write_images(out_dir, args.quick)
    manifest = {"images": images, "steps": [{"config": c, "backend": b} for c, b in STEPS]}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    import torch

    torch.set_num_threads(1)
    steps = list(processors())
    rust, python = {}, {}
    for image in images:
        rust.update(rust_side(out_dir, image))
        python.update(python_side(out_dir, image, steps))
    print(f"{'image':16} {'bytes':>9} {'step':24} {'Python ms':>10} {'Rust ms':>9} {'Python/Rust':>12}")
    for image in images:
        for step in ["decode"] + [f"{c} {b}" for c, b in STEPS]:
            key = (image["file"], step)
            print(f"{image['file']:16} {image['bytes']:9} {step:24} {python[key]:10.2f} {rust[key]:9.2f} "
                  f"{python[key] / rust[key]:12.2f}")


if __name__ == "__main__":
    sys.exit(main())
