"""Makes a second tiny vision model directory whose chat template reads `content` as a list of
parts (vLLM's "openai" content format): tiny-vl's files, hard-linked, plus a real Qwen-VL-family
template as chat_template.jinja. The template is Qwen3.5's (the Qwen-VL line's current one:
`<|vision_start|><|image_pad|><|vision_end|>` for an image part, where the part is), taken
from the copy llama.cpp keeps of it (models/templates/Qwen3.5-4B.jinja), in the
llama-cpp-python sdist on PyPI: pinned, and checked by hash before use.

  list_template_model.py TINY_VL_DIR OUT_DIR"""
import hashlib
import io
import os
import sys
import tarfile
import urllib.request

SDIST = ("https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/"
         "llama_cpp_python-0.3.36.tar.gz")
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
MEMBER = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/Qwen3.5-4B.jinja"
TEMPLATE_SHA256 = "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"


def fetch_template():
    with urllib.request.urlopen(SDIST, timeout=300) as r:
        data = r.read()
    got = hashlib.sha256(data).hexdigest()
    if got != SDIST_SHA256:
        sys.exit(f"{SDIST}: sha256 {got}, expected {SDIST_SHA256}")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        template = tar.extractfile(MEMBER).read()
    if hashlib.sha256(template).hexdigest() != TEMPLATE_SHA256:
        sys.exit(f"{MEMBER}: unexpected contents")
    return template


def main():
    tiny_vl, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(tiny_vl):
        target = os.path.join(out, name)
        if not os.path.exists(target):
            os.link(os.path.join(tiny_vl, name), target)
    with open(os.path.join(out, "chat_template.jinja"), "wb") as f:
        f.write(fetch_template())
    print(out)


if __name__ == "__main__":
    main()
