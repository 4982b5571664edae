"""Writes a tiny random-weight model directory a real vLLM engine can load.

  make_model.py OUT_DIR                        Llama; a 1k-vocabulary byte-level BPE trained here
                                               on Python files of the installed vLLM (no download)
  make_model.py OUT_DIR --qwen3 TOKENIZER_DIR  Qwen3; the real tokenizer.json and
                                               tokenizer_config.json (chat template included)

Writes config.json, generation_config.json, model.safetensors and the tokenizer files. Seeded, so
the weights (and greedy outputs) are the same for a given torch version."""
import glob
import json
import os
import shutil
import sys

import torch
from transformers import GenerationConfig


def copy_tokenizer(out, tokenizer_dir):
    """Copies the tokenizer files into `out`; the embedding size for them (every id, rounded up to
    a multiple of 128 as the Qwen checkpoints pad it)."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(out, name))
    spec = json.load(open(os.path.join(tokenizer_dir, "tokenizer.json")))
    ids = list(spec["model"]["vocab"].values()) + [t["id"] for t in spec.get("added_tokens", [])]
    return (max(ids) + 1 + 127) // 128 * 128


def qwen3(out, tokenizer_dir):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    vocab = copy_tokenizer(out, tokenizer_dir)
    im_end, end_of_text = 151645, 151643
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=2048,
        bos_token_id=end_of_text, eos_token_id=im_end, tie_word_embeddings=True,
        # Large initial weights make greedy decoding wander over the vocabulary instead of
        # repeating one token, which exercises detokenization and stops.
        initializer_range=0.5,
    )
    Qwen3ForCausalLM(config).to(torch.float32).save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=end_of_text, eos_token_id=[im_end, end_of_text]).save_pretrained(out)
    return {"model": out, "vocab": vocab, "eos": [im_end, end_of_text]}


def llama(out):
    import vllm
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    corpus = sorted(glob.glob(os.path.join(os.path.dirname(vllm.__file__), "v1", "engine", "*.py")))
    special = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train(corpus, trainers.BpeTrainer(
        vocab_size=1024, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", additional_special_tokens=special[3:])
    fast.chat_template = (
        "{{ bos_token }}{% for m in messages %}"
        "{{ '<|' + m['role'] + '|>' + (m['content'] if m['content'] is string else '') + '<|end|>' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
    )
    fast.save_pretrained(out)
    end = fast.convert_tokens_to_ids("<|end|>")
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=1024,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(out, safe_serialization=True)
    # A second stop id in generation_config.json, as many chat models list.
    GenerationConfig(bos_token_id=fast.bos_token_id,
                     eos_token_id=[fast.eos_token_id, end]).save_pretrained(out)
    return {"model": out, "vocab": len(fast), "bos": fast.bos_token_id,
            "eos": fast.eos_token_id, "end": end}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    if len(sys.argv) > 3 and sys.argv[2] == "--qwen3":
        print(json.dumps(qwen3(out, sys.argv[3])))
    else:
        print(json.dumps(llama(out)))


if __name__ == "__main__":
    main()
