"""Prints KV-event batches encoded by vLLM's own publisher structs and encoder, as hex.

Run with the real-vLLM venv's python; the tests of `crates/wire/src/vllm/kv_events.rs` decode the output
(the bytes a `ZmqEventPublisher` sends as its payload frame). Block hashes in both of vLLM's
forms: sha256 bytes (the default) and 64-bit ints (`VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`).
"""

import msgspec

from vllm.distributed.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch

H0 = bytes(range(32))
H1 = bytes(range(32, 64))
CASES = {
    "stored_bytes": KVEventBatch(
        ts=1700000000.25,
        events=[
            BlockStored(
                block_hashes=[H0, H1],
                parent_block_hash=None,
                token_ids=list(range(100, 132)),
                block_size=16,
                lora_id=None,
                medium="GPU",
                lora_name=None,
            )
        ],
        data_parallel_rank=1,
    ),
    "chain_removed_cleared_int": KVEventBatch(
        ts=1700000001.5,
        events=[
            BlockStored(
                block_hashes=[7],
                parent_block_hash=2**64 - 3,
                token_ids=[5, 6, 7, 8],
                block_size=4,
                lora_id=None,
                medium=None,
                lora_name=None,
                extra_keys=[("salt",)],
                group_idx=0,
            ),
            BlockRemoved(block_hashes=[7, 2**64 - 3], medium="GPU"),
            AllBlocksCleared(),
        ],
    ),
}

if __name__ == "__main__":
    enc = msgspec.msgpack.Encoder()
    for name, batch in CASES.items():
        print(name, enc.encode(batch).hex())
