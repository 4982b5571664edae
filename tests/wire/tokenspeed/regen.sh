#!/usr/bin/env bash
# Remakes the TokenSpeed wire fixtures: our encoded messages (requests.json, by the Rust
# encoder), then TokenSpeed 0.1.1's own decoding of them and its own encodings
# (tokenspeed-0.1.1.json, by capture.py, which fetches the wheel into ~/.cache/shardgate).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo test --release --test wire_tokenspeed write_request_fixture -- --ignored --exact
python3 tests/wire/tokenspeed/capture.py
cargo test --release --test wire_tokenspeed
