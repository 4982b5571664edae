#!/usr/bin/env python3
"""Golden token ids of Kimi's tokenizer (`tiktoken.model` with the checkpoints' Python class
`tokenization_kimi.py`), from the reference: Python `tiktoken` with the class's split pattern
and its 256 special tokens above the ranks, encoding with every special token allowed as the
class does.

    ~/.cache/real-vllm/venv/bin/python tools/goldens/kimi_tokenizer.py [--check]

The vocabulary comes from `tools/kimi/fetch-vocab.sh` (the checkpoints' file, checked by its
SHA-256). `kimi_tokenizer.json`: the special tokens named (Kimi-K2's `added_tokens_decoder`,
the others `<|reserved_token_ID|>`) and, for each text, its ids; shardgate's tiktoken backend
(`crates/text/src/tokenizer/tiktoken_file.rs`) must give the same ids and decode them back."""
import subprocess, sys

from reference import REPO, write_or_check

PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# Kimi-K2's named special tokens (id → text).
NAMED = {163584: "[BOS]", 163585: "[EOS]", 163586: "<|im_end|>", 163587: "<|im_user|>",
         163588: "<|im_assistant|>", 163590: "<|start_header_id|>", 163591: "<|end_header_id|>",
         163593: "[EOT]", 163594: "<|im_system|>", 163595: "<|tool_calls_section_begin|>",
         163596: "<|tool_calls_section_end|>", 163597: "<|tool_call_begin|>",
         163598: "<|tool_call_argument_begin|>", 163599: "<|tool_call_end|>", 163601: "<|im_middle|>",
         163602: "<|media_begin|>", 163603: "<|media_content|>", 163604: "<|media_end|>",
         163605: "<|media_pad|>", 163606: "<think>", 163607: "</think>", 163838: "[UNK]", 163839: "[PAD]"}

TEXTS = [
    "Hello world", "Hello, world!", "你好世界", "1234567890", "中文English混合", "汉字abc", "北京市 Pascal",
    "I'm sure they'll say it's fine, WE'VE DONE IT'S", "don't", "The quick brown fox jumps over the lazy dog.",
    "    indented\n\n\n  lines  \n", "tabs\tand\r\nCRLF\r\n", "trailing spaces   ", "   ", "\n", "",
    "naïve café résumé", "Ünïcödé ÀÉÎÕÜ", "日本語のテキストとカタカナ", "한국어 텍스트", "Русский текст", "العربية",
    "emoji 🎉👍🏽🧑‍🚀 done", "math: ∑_{i=1}^{n} x_i ≤ ∞", "3.14159 and 2,718,281 and 1e-9",
    "def f(x):\n    return x ** 2  # square\n", '{"city": "Paris", "days": [1, 2, 3]}',
    "<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>",
    "<think>reasoning</think>answer", "[BOS]text[EOS]", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>{\"city\": \"北京\"}<|tool_call_end|><|tool_calls_section_end|>",
    "<|reserved_token_163700|> and <|not_special|>", "<|im_end", "MixedCASEWordsAndCamelCase HTTPServer",
    "x" * 300, "ab" * 150, "中" * 120, " " * 50 + "x", "a\u0301e\u0301 combining marks", "ÄÖÜäöüß",
    "ᄀᄁ hangul jamo", "\u00a0non-breaking\u2003em space", "zero\u200bwidth", "URL: https://example.com/path?q=1&r=2#frag",
    "email@example.org, @handle #tag $100 50% ^caret", "line1\nline2\n\nline4", "中文，标点。“引号”！",
    "混合123数字456", "K2.5 和 K3 的 tokenizer", "'s 's 'S 'T 're", "   leading", "end.\n\n",
    "A" * 5 + "ɐɑɒ" * 3, "ℕ ℤ ℚ ℝ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\t\t\t", "a\n\tb\n\t\tc",
]


def vocab_path():
    return subprocess.run([str(REPO / "tools/kimi/fetch-vocab.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()


def main():
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    check = "--check" in sys.argv[1:]
    ranks = load_tiktoken_bpe(vocab_path())
    base = len(ranks)
    special = {NAMED.get(i, f"<|reserved_token_{i}|>"): i for i in range(base, base + 256)}
    enc = tiktoken.Encoding(name="kimi", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=special)
    cases = [{"text": t, "ids": enc.encode(t, allowed_special="all")} for t in TEXTS]
    doc = {"tokenizer": "kimi tiktoken.model", "reference": f"tiktoken {tiktoken.__version__}",
           "named_special_tokens": {str(k): v for k, v in NAMED.items()}, "cases": cases}
    sys.exit(0 if write_or_check("kimi_tokenizer", doc, check) else 1)


if __name__ == "__main__":
    main()
