#!/usr/bin/env python3
"""Goldens of shardgate's image decoding and image processors, from PIL and the Hugging Face
processors (transformers in the real-vLLM venv).

    ~/.cache/real-vllm/venv/bin/python tools/goldens/images.py [--out DIR]

Builds images of many sizes, aspect ratios and modes (tiny, huge, extreme ratios, grey, RGBA,
palette with and without transparency, GIF, lossless and lossy WebP, JPEG of every chroma
subsampling, progressive, with restart markers, CMYK, EXIF and XMP orientations 1-8) from seeded patterns, encodes them with PIL, then writes to DIR (default `target/media-goldens`,
gitignored; nothing here is committed):

- each encoded file, the RGB pixels vLLM's loader makes of it (`Image.open`, transparent
  images pasted on white, else `convert("RGB")`), raw `u8`, and vLLM's item hash for it
  (`MultiModalHasher`, blake3);
- for each lossless image, each config of `crates/media/tests/configs/` and each backend of
  the Hugging Face processor (`torchvision`: what `AutoImageProcessor` gives in transformers 5
  where torchvision is installed, so what vLLM runs; `pil`: the `...ImageProcessorPil` class),
  the `pixel_values` (raw little-endian `f32`), shape, `image_grid_thw` and the placeholder
  token count;
- Qwen2-VL's and Qwen3-VL's video processors on a few clips of seeded frames (raw `u8` frames,
  then its `pixel_values_videos`, shape, `video_grid_thw`, token count), for each
  `crates/media/tests/configs/*.video.json` (the class its `video_processor_type` names);
- the frame indices vLLM's `qwen2_vl` and `qwen3_vl` video loaders sample for a few lengths
  and rates;
- JPEGs cut short or corrupted, and what vLLM's loader makes of each: its pixels or its
  refusal;
- torchvision's `resize` alone (`antialias=True`, bilinear and bicubic, on the `uint8` tensor
  as the processors call it) of a few images to sizes below and above theirs, raw `u8` RGB;
- `manifest.json` listing them.

`cargo test --release -p shardgate-media --test hf_goldens` compares (tools/test.sh runs both
where the venv is)."""
import argparse, io, json, os, struct, sys
from pathlib import Path

import numpy as np
from PIL import Image, PngImagePlugin

ROOT = Path(__file__).resolve().parents[2]
# Images above this many pixels go only through the configs that bound the output (the others'
# tensors would be hundreds of megabytes, and test nothing the smaller images do not).
BIG_PIXELS = 2_000_000
BIG_CONFIGS = ("qwen2-vl-capped", "llava-1.5")
CONFIGS = ROOT / "crates/media/tests/configs"


def pattern(width, height, seed):
    """Smooth gradients with noise and a sharp edge: what resampling errors show up on."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 255 * x / max(width - 1, 1)
    g = 255 * (0.5 + 0.5 * np.sin(x / 7.0 + y / 11.0))
    b = np.where((x // 8 + y // 8) % 2 == 0, 230.0, 20.0)
    rgb = np.stack([r, g, b], axis=-1) + rng.normal(0, 12, (height, width, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def encode(image, fmt, **options):
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def rgba(width, height, seed):
    alpha = (np.arange(width * height).reshape(height, width) * 37 % 256).astype(np.uint8)
    return Image.fromarray(np.dstack([pattern(width, height, seed), alpha]), "RGBA")


def palette(width, height, seed, transparency=None):
    image = Image.fromarray(pattern(width, height, seed)).quantize(colors=64)
    if transparency is not None:
        image.info["transparency"] = transparency
    return image


def exif(orientation=None, image_id=None, big_endian=False):
    """EXIF bytes (with the JPEG segment's `Exif` header) holding these tags."""
    if big_endian:
        # PIL writes little-endian only: a one-entry big-endian IFD by hand.
        ifd = struct.pack(">HHHIHH", 1, 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0)
        return b"Exif\0\0MM\0\x2a" + struct.pack(">I", 8) + ifd
    tags = Image.Exif()
    if orientation is not None:
        tags[0x0112] = orientation
    if image_id is not None:
        tags[0x800D] = image_id
    return tags.tobytes()


def xmp(orientation):
    return (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
            b'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="%d"/></rdf:RDF></x:xmpmeta>'
            % orientation)


def oriented():
    """Images carrying an orientation each way PIL reads one (vLLM turns them with
    `ImageOps.exif_transpose`): EXIF in JPEG, PNG `eXIf` and WebP, XMP in JPEG and PNG `iTXt`."""
    rgb = lambda w, h, s: Image.fromarray(pattern(w, h, s))
    for o in range(1, 9):
        yield f"oriented-{o}-40x24.png", encode(rgb(40, 24, 30 + o), "PNG", exif=exif(o)), True
        yield f"oriented-{o}-40x24.jpg", encode(rgb(40, 24, 40 + o), "JPEG", quality=95, exif=exif(o)), False
    yield "oriented-6-lossless-40x24.webp", encode(rgb(40, 24, 50), "WEBP", lossless=True, exif=exif(6)), True
    yield "oriented-8-big-endian-40x24.jpg", encode(rgb(40, 24, 51), "JPEG", quality=95, exif=exif(8, big_endian=True)), False
    yield "oriented-5-xmp-40x24.jpg", encode(rgb(40, 24, 52), "JPEG", quality=95, xmp=xmp(5)), False
    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", xmp(7).decode())
    yield "oriented-7-xmp-40x24.png", encode(rgb(40, 24, 53), "PNG", pnginfo=info), True
    # An EXIF ImageID: vLLM hashes the id instead of the bytes only when PIL gives a UUID, which
    # no file can (the tag is text): the hash stays the bytes'.
    yield "image-id-6-40x24.jpg", encode(rgb(40, 24, 54), "JPEG", quality=95,
                                          exif=exif(6, image_id="0123456789abcdef0123456789abcdef")), False


# (name, encoded bytes, lossless): lossless ones also go through every processor.
def images():
    rgb = lambda w, h, s: Image.fromarray(pattern(w, h, s))
    yield "tiny-3x2.png", encode(rgb(3, 2, 1), "PNG"), True
    yield "one-pixel.png", encode(rgb(1, 1, 2), "PNG"), True
    yield "odd-37x53.png", encode(rgb(37, 53, 3), "PNG"), True
    yield "landscape-640x480.png", encode(rgb(640, 480, 4), "PNG"), True
    yield "portrait-333x500.png", encode(rgb(333, 500, 5), "PNG"), True
    yield "wide-1500x60.png", encode(rgb(1500, 60, 6), "PNG"), True
    yield "extreme-12x2000.png", encode(rgb(12, 2000, 7), "PNG"), True
    yield "too-extreme-4x804.png", encode(rgb(4, 804, 23), "PNG"), True
    yield "huge-3000x2000.png", encode(rgb(3000, 2000, 8), "PNG", compress_level=1), True
    yield "grey-300x200.png", encode(rgb(300, 200, 9).convert("L"), "PNG"), True
    yield "rgba-200x150.png", encode(rgba(200, 150, 10), "PNG"), True
    yield "palette-120x90.png", encode(palette(120, 90, 11), "PNG"), True
    yield "palette-transparent-120x90.png", encode(palette(120, 90, 12, transparency=3), "PNG"), True
    yield "grey-alpha-64x48.png", encode(rgba(64, 48, 13).convert("LA"), "PNG"), True
    yield "grey16-50x40.png", encode(Image.fromarray((pattern(50, 40, 14).astype(np.uint16) * 257)[..., 0]).convert("I;16"), "PNG"), True
    yield "frame-100x80.gif", encode(palette(100, 80, 15), "GIF"), True
    yield "frame-transparent-100x80.gif", encode(palette(100, 80, 16), "GIF", transparency=5), True
    yield "lossless-320x240.webp", encode(rgb(320, 240, 17), "WEBP", lossless=True), True
    yield "lossless-rgba-160x120.webp", encode(rgba(160, 120, 18), "WEBP", lossless=True), True
    yield "lossy-320x240.webp", encode(rgb(320, 240, 19), "WEBP", quality=90), False
    yield "photo-640x480.jpg", encode(rgb(640, 480, 20), "JPEG", quality=90), False
    yield "grey-200x100.jpg", encode(rgb(200, 100, 21).convert("L"), "JPEG", quality=90), False
    yield "subsampled-99x77.jpg", encode(rgb(99, 77, 22), "JPEG", quality=75, subsampling=2), False
    yield from jpegs(rgb)
    yield from oriented()


def resampled(data, width, height, luma_sampling):
    """The JPEG with its frame header's size and luma sampling factors replaced: a 4:2:2 file
    of W x H (multiples of 16 and 8) read as h1v2 at W/2 x 2H has the same blocks in the same
    order, so it is a valid 4:4:0 JPEG (of scrambled content), which PIL cannot write."""
    at = data.index(b"\xff\xc0")
    header = bytearray(data)
    header[at + 5:at + 9] = struct.pack(">HH", height, width)
    assert header[at + 10] == 1 and header[at + 11] == 0x21, "luma of a 4:2:2 file"
    header[at + 11] = luma_sampling
    return bytes(header)


def jpegs(rgb):
    """JPEG beyond the photo above: each chroma subsampling, progressive, restart intervals,
    optimised Huffman tables, CMYK, odd and tiny sizes. Decoding them must equal PIL's
    libjpeg-turbo exactly."""
    yield "444-101x67.jpg", encode(rgb(101, 67, 24), "JPEG", quality=85, subsampling=0), False
    yield "422-97x61.jpg", encode(rgb(97, 61, 25), "JPEG", quality=85, subsampling=1), False
    yield "440-48x80.jpg", resampled(encode(rgb(96, 40, 26), "JPEG", quality=85, subsampling=1), 48, 80, 0x12), False
    yield "progressive-333x250.jpg", encode(rgb(333, 250, 27), "JPEG", quality=80, progressive=True), False
    yield "progressive-444-65x47.jpg", encode(rgb(65, 47, 28), "JPEG", quality=92, progressive=True, subsampling=0), False
    yield "progressive-grey-77x31.jpg", encode(rgb(77, 31, 29).convert("L"), "JPEG", progressive=True), False
    yield "restart-blocks-150x90.jpg", encode(rgb(150, 90, 30), "JPEG", restart_marker_blocks=3), False
    yield "restart-rows-progressive-90x150.jpg", encode(rgb(90, 150, 31), "JPEG", restart_marker_rows=1, progressive=True), False
    yield "optimized-q30-123x45.jpg", encode(rgb(123, 45, 32), "JPEG", quality=30, optimize=True), False
    yield "cmyk-64x48.jpg", encode(rgb(64, 48, 33).convert("CMYK"), "JPEG", quality=90), False
    yield "one-pixel.jpg", encode(rgb(1, 1, 34), "JPEG"), False
    yield "thin-1x37.jpg", encode(rgb(1, 37, 35), "JPEG", quality=95), False
    yield "q100-17x9.jpg", encode(rgb(17, 9, 36), "JPEG", quality=100), False


# The model id the item hashes are computed for (any string; vLLM hashes the engine's --model).
# The manifest's layout; hf_goldens.rs reads this one (bump both together).
GOLDENS_FORMAT = 4
HASH_MODEL_ID = "Qwen/Qwen2-VL-2B-Instruct"


def damaged_jpegs():
    """(name, bytes) of JPEGs cut short or corrupted: PIL decodes through corrupt entropy data
    and refuses any file whose bytes end before its EOI marker."""
    rgb = lambda w, h, s: Image.fromarray(pattern(w, h, s))
    base = encode(rgb(120, 80, 40), "JPEG", quality=90)
    progressive = encode(rgb(120, 80, 41), "JPEG", quality=90, progressive=True)
    restarts = encode(rgb(120, 80, 42), "JPEG", quality=90, restart_marker_rows=1)
    scan = base.index(b"\xff\xda")

    def flipped(data, at):
        out = bytearray(data)
        out[at] ^= 0x5A
        return bytes(out)

    yield "damaged-truncated-half.jpg", base[:len(base) // 2]
    yield "damaged-no-eoi.jpg", base[:-2]
    yield "damaged-no-eoi-progressive.jpg", progressive[:-2]
    yield "damaged-truncated-progressive.jpg", progressive[:len(progressive) * 2 // 3]
    yield "damaged-cut-in-header.jpg", base[:scan - 30]
    yield "damaged-flipped-data.jpg", flipped(base, scan + 200)
    yield "damaged-flipped-progressive.jpg", flipped(progressive, len(progressive) * 3 // 4)
    yield "damaged-restart-marker.jpg", flipped(restarts, restarts.index(b"\xff\xd3") + 1)
    yield "damaged-early-eoi.jpg", base[:scan + 40] + b"\xff\xd9"
    yield "damaged-trailing-garbage.jpg", base + b"bytes after the end"


def vllm_load(data):
    """What vLLM's image loader makes of the bytes, and its item hash for them."""
    from vllm.multimodal.hasher import MultiModalHasher
    from vllm.multimodal.media.image import ImageMediaIO

    item = ImageMediaIO(image_mode="RGB").load_bytes(data)
    return item.media, MultiModalHasher.hash_kwargs("blake3", model_id=HASH_MODEL_ID, image=item)


def processors():
    """(config name, backend, processor, config, model config) for every config and backend."""
    from transformers import CLIPImageProcessor, Qwen2VLImageProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    classes = {
        "Qwen2VLImageProcessor": {"torchvision": Qwen2VLImageProcessor, "pil": Qwen2VLImageProcessorPil},
        "CLIPImageProcessor": {"torchvision": CLIPImageProcessor, "pil": CLIPImageProcessorPil},
    }
    for path in sorted(CONFIGS.glob("*.json")):
        if path.name.endswith((".config.json", ".video.json")):
            continue
        config = json.loads(path.read_text())
        kind = config["image_processor_type"].removesuffix("Fast")
        kwargs = {k: v for k, v in config.items() if k not in ("image_processor_type", "processor_class")}
        model_path = path.with_suffix(".config.json")
        model = json.loads(model_path.read_text()) if model_path.exists() else {}
        for backend, cls in classes[kind].items():
            processor = cls(**kwargs)
            assert processor.backend == backend, (cls, processor.backend)
            yield path.stem, backend, processor, config, model


# torchvision's resize alone: (image, (width, height) targets). Bilinear is in no config here
# but a config may name it (`resample` 2).
RESIZES = [
    ("odd-37x53.png", [(28, 56), (112, 84)]),
    ("landscape-640x480.png", [(448, 336), (1000, 700)]),
    ("wide-1500x60.png", [(1512, 56), (300, 60)]),
    ("extreme-12x2000.png", [(28, 1988), (12, 100)]),
    ("tiny-3x2.png", [(56, 56)]),
]


def torchvision_resizes(out_dir, rgb_images):
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as tvF

    for name, targets in RESIZES:
        tensor = torch.from_numpy(rgb_images[name].copy()).permute(2, 0, 1).contiguous()
        for width, height in targets:
            for filter_name, mode in (("bilinear", InterpolationMode.BILINEAR), ("bicubic", InterpolationMode.BICUBIC)):
                out = tvF.resize(tensor, [height, width], interpolation=mode, antialias=True)
                file = f"{name}.{width}x{height}.{filter_name}.rgb"
                (out_dir / file).write_bytes(out.permute(1, 2, 0).contiguous().numpy().tobytes())
                yield {"image": name, "width": width, "height": height, "filter": filter_name, "rgb": file}


def damaged(out_dir):
    """Each damaged JPEG, and the RGB pixels vLLM's loader makes of it, or its refusal."""
    for name, data in damaged_jpegs():
        (out_dir / name).write_bytes(data)
        try:
            image, _ = vllm_load(data)
        except ValueError as error:
            yield {"file": name, "error": str(error)}
            continue
        (out_dir / f"{name}.rgb").write_bytes(np.asarray(image, dtype=np.uint8).tobytes())
        yield {"file": name, "rgb": f"{name}.rgb", "width": image.width, "height": image.height}


def tokens(kind, out, config, model):
    if kind == "qwen":
        t, h, w = out["image_grid_thw"][0]
        return int(t * h * w // config.get("merge_size", 2) ** 2)
    patch = model["vision_config"]["patch_size"]
    return int((out["pixel_values"].shape[-2] // patch) * (out["pixel_values"].shape[-1] // patch))


# Video clips: (name, frames, width, height). Five and seven frames leave the last to be
# repeated up to the temporal patch; 20x12 is smaller than Qwen3-VL's 32-pixel patch block.
VIDEOS = [("clip-5x64x48", 5, 64, 48), ("clip-4x320x240", 4, 320, 240), ("clip-7x300x100", 7, 300, 100),
          ("clip-2x20x12", 2, 20, 12)]


def videos(out_dir):
    """Qwen2-VL's and Qwen3-VL's video processors (torchvision, their only backend) on frames
    as vLLM hands them over (a `(frames, height, width, 3)` uint8 array,
    `do_sample_frames=False`)."""
    from transformers import Qwen2VLVideoProcessor, Qwen3VLVideoProcessor

    classes = {"Qwen2VLVideoProcessor": Qwen2VLVideoProcessor, "Qwen3VLVideoProcessor": Qwen3VLVideoProcessor}

    for name, count, width, height in VIDEOS:
        frames = np.stack([pattern(width, height, 60 + i) for i in range(count)])
        (out_dir / f"{name}.frames.rgb").write_bytes(frames.tobytes())
        for path in sorted(CONFIGS.glob("*.video.json")):
            config_name = path.name.removesuffix(".video.json")
            config = json.loads(path.read_text())
            kwargs = {k: v for k, v in config.items() if k not in ("video_processor_type", "processor_class")}
            processor = classes[config["video_processor_type"]](**kwargs)
            try:
                out = processor(videos=[frames], do_sample_frames=False, return_tensors="np")
            except ValueError as error:
                # A refusal is recorded, so that the port's is checked too.
                yield {"frames": f"{name}.frames.rgb", "count": count, "width": width, "height": height,
                       "config": config_name, "error": str(error)}
                continue
            values = np.ascontiguousarray(out["pixel_values_videos"], dtype="<f4")
            tensor = f"{name}.{config_name}.video.f32"
            (out_dir / tensor).write_bytes(values.tobytes())
            t, h, w = (int(v) for v in out["video_grid_thw"][0])
            yield {"frames": f"{name}.frames.rgb", "count": count, "width": width, "height": height,
                   "config": config_name, "pixel_values": tensor, "shape": list(values.shape),
                   "grid_thw": [t, h, w], "tokens": t * h * w // kwargs.get("merge_size", 2) ** 2}


# Frame sampling: (total frames, source fps, requested fps).
SAMPLINGS = [(451, 30.0, 2.0), (300, 29.97, 2.0), (10, 25.0, 2.0), (5, 30.0, 2.0), (3, 30.0, 2.0),
             (9000, 30.0, 2.0), (120, 24.0, 60.0), (1000, 59.94, 1.0), (64, 1.0, 2.0), (2, 10.0, 2.0)]


def samplings():
    """vLLM's `qwen2_vl` and `qwen3_vl` video loaders' frame indices."""
    from vllm.multimodal.video import Qwen2VLVideoBackend, Qwen3VLVideoBackend
    from vllm.multimodal.video_decoders.base import VideoSourceMetadata, VideoTargetMetadata

    for loader, backend in (("qwen2_vl", Qwen2VLVideoBackend), ("qwen3_vl", Qwen3VLVideoBackend)):
        for total, source_fps, fps in SAMPLINGS:
            source = VideoSourceMetadata(total_frames_num=total, original_fps=source_fps, duration=total / source_fps)
            target = VideoTargetMetadata(num_frames=-1, fps=fps, max_duration=300)
            indices = backend.compute_frames_index_to_sample(source, target, temporal_patch_size=2)
            yield {"loader": loader, "total": total, "source_fps": source_fps, "fps": fps,
                   "indices": [int(i) for i in indices]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "target/media-goldens"))
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.iterdir():
        old.unlink()
    procs = list(processors())
    # `format` tells crates/media/tests/hf_goldens.rs whether these files are of its layout
    # (goldens written by an older checkout are stale, not wrong).
    manifest = {"format": GOLDENS_FORMAT, "hash_model_id": HASH_MODEL_ID, "images": [], "cases": [], "resizes": []}
    rgb_images = {}
    for name, data, lossless in images():
        (out_dir / name).write_bytes(data)
        image, item_hash = vllm_load(data)
        pixels = np.asarray(image, dtype=np.uint8)
        rgb_images[name] = pixels
        (out_dir / f"{name}.rgb").write_bytes(pixels.tobytes())
        manifest["images"].append({"file": name, "width": image.width, "height": image.height,
                                   "rgb": f"{name}.rgb", "exact": lossless or name.endswith(".jpg"),
                                   "hash": item_hash})
        if not lossless:
            continue
        for config_name, backend, processor, config, model in procs:
            if image.width * image.height > BIG_PIXELS and config_name not in BIG_CONFIGS:
                continue
            kind = "qwen" if "Qwen2VL" in type(processor).__name__ else "clip"
            case = {"image": name, "config": config_name, "backend": backend}
            try:
                out = processor(image, return_tensors="np")
            except ValueError as error:
                case["error"] = str(error)
                manifest["cases"].append(case)
                continue
            values = np.ascontiguousarray(out["pixel_values"][0] if kind == "clip" else out["pixel_values"], dtype="<f4")
            tensor = f"{name}.{config_name}.{backend}.f32"
            (out_dir / tensor).write_bytes(values.tobytes())
            case.update(pixel_values=tensor, shape=list(values.shape), tokens=tokens(kind, out, config, model),
                        grid_thw=[int(v) for v in out["image_grid_thw"][0]] if kind == "qwen" else None)
            manifest["cases"].append(case)
    manifest["damaged"] = list(damaged(out_dir))
    manifest["resizes"] = list(torchvision_resizes(out_dir, rgb_images))
    manifest["videos"] = list(videos(out_dir))
    manifest["samplings"] = list(samplings())
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(manifest['images'])} images, {len(manifest['damaged'])} damaged JPEGs, {len(manifest['cases'])} processor cases, "
          f"{len(manifest['resizes'])} resizes, {len(manifest['videos'])} videos -> {out_dir}")


if __name__ == "__main__":
    sys.exit(main())
