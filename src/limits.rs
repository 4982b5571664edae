#![allow(non_upper_case_globals)]

//! Every bound and default of the gateway, in one place.
//!
//! Names carry their unit last (`_s`, `_ms`, `_bytes`) and their qualifier after it
//! (`_max`, `_min`), so related limits line up. Nothing else in the crate hard-codes a limit.

/// How long a busy `--port`/`--metrics-port` is retried at startup before it is refused (a
/// just-exited gateway's listener lingers while its io_uring is torn down).
pub const port_busy_wait_ms_max: u64 = 3_000;

/// HTTP: a request head (request line + headers) larger than this is answered 431.
pub const http_header_bytes_max: usize = 64 * 1024;
/// HTTP: header lines per request.
pub const http_header_count_max: usize = 128;
/// HTTP: request body larger than this is answered 413 (a 6,000-token prompt is ~30 KiB;
/// token-id prompts in JSON are ~7 bytes per token, so 32 MiB leaves room for long contexts).
pub const http_body_bytes_max: usize = 32 * 1024 * 1024;
/// HTTP: a request body at least this large hands the shard's freed memory back to the OS once
/// the request is over (a purge costs about a millisecond: not worth it for every request).
pub const http_body_release_bytes_min: usize = 1024 * 1024;
/// JSON bodies: top-level members read from a list (scanned); a body with more is read
/// through a hashed map, so millions of keys cannot make every field read a full scan.
pub const request_listed_members_max: usize = 64;
/// HTTP: time allowed from accepting a connection to the end of its first request's head (a
/// connection that sends nothing is closed then, silently), and from the first byte of a
/// later request to the end of its head (408).
pub const http_header_read_timeout_s: u64 = 10;
/// HTTP: time allowed to receive a whole request body once its head is in (408).
pub const http_body_read_timeout_s: u64 = 30;
/// HTTP: an idle keep-alive connection (one that has been answered) is closed after this long.
/// Above the 90-120 s pool idle time of common clients, so the server never closes a socket a
/// client is about to reuse.
pub const http_keepalive_idle_timeout_s: u64 = 180;
/// HTTP: the longest chunk-size line of a chunked request body (hex digits plus extensions).
pub const http_chunk_size_line_bytes_max: usize = 4096;
/// HTTP: requests a client may pipeline ahead of the one being answered.
pub const http_pipelined_requests_max: usize = 32;
/// HTTP: initial read buffer per connection.
pub const http_read_buffer_bytes: usize = 8 * 1024;
/// HTTP: open connections per shard, at most (the descriptor budget, `http::fd_budget`, may
/// set a lower cap).
pub const http_connections_per_shard_max: usize = 16 * 1024;
/// HTTP: connections a shard at its cap still takes, to answer health probes only (anything
/// else gets a 503); beyond them, connections are closed as soon as they are accepted.
pub const http_over_cap_connections_per_shard: usize = 16;
/// HTTP: an over-cap connection must deliver its head within this long.
pub const http_over_cap_header_timeout_ms: u64 = 1_000;
/// HTTP/2: streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS); a
/// client opening more gets RST_STREAM(REFUSED_STREAM). Admission still bounds generations.
pub const http2_concurrent_streams_max: u32 = 256;
/// HTTP/2: the largest frame payload accepted (SETTINGS_MAX_FRAME_SIZE; the protocol's minimum:
/// requests are small, and a larger frame is a FRAME_SIZE_ERROR that closes the connection).
pub const http2_frame_bytes_max: u32 = 16 * 1024;
/// HTTP/2: a request's header list (decoded, 32 bytes counted per field as RFC 9113 does); the
/// same bound as an HTTP/1.1 head. Larger: 431 before the request is read further.
pub const http2_header_list_bytes_max: u32 = http_header_bytes_max as u32;
/// HTTP/2: receive window per stream (request bodies), and for the whole connection.
pub const http2_stream_window_bytes: u32 = 1024 * 1024;
pub const http2_connection_window_bytes: u32 = 4 * 1024 * 1024;
/// HTTP/2: response bytes one stream may have queued beyond what the client's window lets out.
pub const http2_send_buffer_bytes: usize = 64 * 1024;
/// HTTP/2: send capacity a streaming response asks for at once, when what it had is used up
/// (dozens of SSE chunks; 256 streams hold at most 1 MiB of the client's connection window).
pub const http2_stream_reserve_bytes: usize = 4 * 1024;
/// HTTP/2 rapid reset (CVE-2023-44487): a client that resets more than this many of its
/// streams within `http2_client_resets_window_s` gets GOAWAY(ENHANCE_YOUR_CALM) and its
/// connection closed. Cancelling is normal (a proxy's users leave), thousands a second is not.
pub const http2_client_resets_max: u32 = 500;
pub const http2_client_resets_window_s: u64 = 10;
/// HTTP/2: streams reset by the client before the server took them, at once (the `h2`
/// crate's own rapid-reset guard; beyond: GOAWAY(ENHANCE_YOUR_CALM)).
pub const http2_pending_accept_resets_max: usize = 20;
/// HTTP/2: streams the server had to reset for the client's protocol errors, per connection
/// (beyond: GOAWAY(ENHANCE_YOUR_CALM)).
pub const http2_local_error_resets_max: usize = 1024;
/// HTTP/2 PING and SETTINGS floods: a client sending more of them (acknowledgements aside)
/// within `http2_control_frames_window_s` has its connection closed. A client needs one
/// SETTINGS per connection and a keep-alive PING every few seconds.
pub const http2_control_frames_max: u32 = 1_000;
pub const http2_control_frames_window_s: u64 = 10;
/// HTTP/2: time for a new connection's preface and first SETTINGS (then closed silently).
pub const http2_handshake_timeout_s: u64 = http_header_read_timeout_s;
/// TLS: time for a new connection's handshake (then closed, the failure logged).
pub const tls_handshake_timeout_s: u64 = http_header_read_timeout_s;
/// Metrics listener: open connections; beyond them, closed as soon as they are accepted.
pub const metrics_connections_max: usize = 64;
/// Refused connections and failed accepts are logged at most once per this interval, with a
/// count (a flood would otherwise write thousands of lines a second).
pub const refusal_log_interval_ms: u64 = 1_000;

/// Descriptors kept out of the connection budget: engine sockets and libzmq's own, model files,
/// logs, the metrics listener and its connections, workers added at run time.
pub const fds_reserved_base: usize = 256;
/// Descriptors kept per shard: its io_uring or epoll, eventfds, listener, pipes.
pub const fds_reserved_per_shard: usize = 64;
/// Descriptors kept per engine configured at startup, on each shard (its `ipc://` sockets).
pub const fds_reserved_per_engine_per_shard: usize = 4;
/// Descriptors an HTTP/1.1 connection inside TLS holds: its socket and the socket pair that
/// bridges it to the HTTP/1.1 server (`http::tls`).
pub const fds_per_tls_connection: usize = 3;
/// The descriptor limit assumed when `RLIMIT_NOFILE` cannot be read.
pub const fds_assumed_when_unknown: usize = 1024;

/// ZMQ: the handshake waits this long for each message (HELLO, registration, READY).
pub const handshake_timeout_s: u64 = 600;
/// TokenSpeed: ADDs other shards may queue for the owner shard before a 503.
pub const relay_request_queue_depth: usize = 4096;
/// ZMQ: how long the handshake keeps listening for an extra engine after the last READY.
pub const handshake_settle_ms: u64 = 300;
/// ZMQ: a request send that cannot complete for this long marks the connection dead.
pub const send_block_ms_max: u64 = 10_000;
/// ZMQ: after an engine's connection closes, how long its output reader may still report the
/// engine's own last message (ENGINE_CORE_DEAD) before the link fails for the close.
pub const engine_lost_grace_ms: u64 = 50;
/// ZMQ: outputs that fail to decode in a row before the connection is marked dead.
pub const output_decode_failures_max: u32 = 3;
/// Workers: how often a ready worker's engines are pinged (a send to a vanished engine fails
/// at once).
pub const worker_liveness_ping_interval_s: u64 = 1;
/// ZMQ: silence from an engine with requests in flight before it is declared dead (SMG's
/// 300 s; `--engine-silence-timeout-secs`).
pub const engine_silence_s_default: u64 = 300;

/// Deadline of one gRPC Generate stream (sent as `grpc-timeout`): far above any generation,
/// only so that a stream never outlives a worker that forgot it.
pub const grpc_generate_deadline_ms: u64 = 3_600_000;
/// How often one shard asks an SMG gRPC worker for its per-rank loads (`GetLoads`).
pub const grpc_loads_interval_ms: u64 = 1_000;
/// Workers: interval of the health probe that re-binds dead or timed-out ZMQ workers.
pub const health_check_interval_s_default: u64 = 10;
/// Workers: engines behind one grouped worker.
pub const engines_per_worker_max: usize = 1024;

/// HTTP workers: a TCP connect to an upstream that takes longer fails (the request goes to
/// another worker if there is one).
pub const upstream_connect_timeout_ms: u64 = 5_000;
/// HTTP workers: time to the first byte of an upstream's response head, and the longest silence
/// inside its body (`--http-worker-timeout-secs`; a one-shot answer comes after the whole
/// generation, so it is long by default).
pub const upstream_timeout_s_default: u64 = 300;
/// HTTP workers: an upstream response head larger than this is malformed.
pub const upstream_head_bytes_max: usize = 64 * 1024;
/// HTTP workers: a one-shot (not streamed) upstream body larger than this is refused (streamed
/// bodies are relayed as they come and have no bound).
pub const upstream_body_bytes_max: usize = 64 * 1024 * 1024;
/// HTTP workers: idle keep-alive connections a shard keeps per upstream.
pub const upstream_idle_connections_max: usize = 32;
/// HTTP workers: a `/health` or `/v1/models` probe that takes longer fails.
pub const upstream_probe_timeout_s: u64 = 5;
/// HTTP workers: failed requests in a row (refused, reset, stalled, malformed, 5xx) that mark a
/// worker unhealthy until its `/health` answers again.
pub const upstream_failures_max: u32 = 3;
/// gRPC workers: HealthCheck answers in a row that fail (an unreachable or unhealthy engine)
/// before a ready worker is declared lost; one slow answer under load is not a dead engine.
pub const grpc_health_failures_max: u32 = 3;

/// Requests: `n` (choices per request).
pub const choices_per_request_max: u32 = 128;
/// Requests: stop strings per request.
pub const stop_strings_max: usize = 64;
/// Requests: bytes of one stop string.
pub const stop_string_bytes_max: usize = 1024;
/// Requests: vLLM's default `max_logprobs`.
pub const logprobs_max: i64 = 20;
/// Requests: `logit_bias` entries.
pub const logit_bias_entries_max: usize = 4096;
/// Requests: `stop_token_ids` entries.
pub const stop_token_ids_max: usize = 4096;
/// Requests: `bad_words` entries (each is tokenized twice).
pub const bad_words_max: usize = 4096;
/// Requests: bytes of one bad word.
pub const bad_word_bytes_max: usize = 1024;
/// Requests: `allowed_token_ids` entries (more than any vocabulary has).
pub const allowed_token_ids_max: usize = 1 << 20;
/// Requests: prompts in one completions request.
pub const prompts_per_request_max: usize = 1024;

/// Tokenizer caches (per shard): L0 exact prompts, L1 prefixes at special-token boundaries.
pub const tokenizer_cache_l0_bytes_max_default: usize = 64 * 1024 * 1024;
pub const tokenizer_cache_l0_entries_max_default: usize = 10_000;
pub const tokenizer_cache_l1_bytes_max_default: usize = 64 * 1024 * 1024;

/// Admission: requests waiting for a slot under `--max-concurrent-requests`, and for how long.
pub const admission_queue_default: usize = 1024;
pub const admission_queue_timeout_s_default: u64 = 60;
/// SIGTERM: time streams get to finish before the rest are aborted.
pub const shutdown_timeout_s_default: u64 = 30;
/// SIGTERM: after aborting what is left, time for the ABORTs and error events to go out.
pub const shutdown_abort_flush_ms: u64 = 300;
/// A stream client that accepts no bytes for this long is cut off.
pub const stream_write_timeout_s_default: u64 = 30;
/// SSE comment sent while a stream waits for its first token or stalls (clients and proxies
/// drop idle connections after 30-60 s).
pub const sse_keepalive_interval_s: u64 = 15;

/// Routing: `--policy` and the `cache_aware` settings (SMG's defaults).
pub const routing_policy_default: &str = "cache_aware";
pub const cache_aware_threshold_default: f64 = 0.3;
pub const cache_aware_balance_abs_threshold_default: u64 = 64;
pub const cache_aware_balance_rel_threshold_default: f64 = 1.5;
pub const cache_aware_eviction_interval_s_default: u64 = 120;
/// Counted bytes of prefix tree per shard.
pub const cache_aware_tree_bytes_max_default: usize = 64 << 20;
pub const cache_aware_block_tokens_default: usize = 16;
/// A worker's entry for a prefix older than this no longer attracts requests.
pub const cache_aware_entry_ttl_s_default: u64 = 600;

/// KV-cache events (engines started with `--kv-events-config`): blocks indexed per engine rank
/// and shard (about 100 bytes each; 1M blocks of 16 tokens covers any engine's cache here).
pub const kv_index_blocks_max: usize = 1 << 20;
/// How long a replay of missed event batches may take before the rank's index is dropped.
pub const kv_replay_timeout_ms: u64 = 2_000;
/// Batches decoded in a row before the subscriber yields to the shard's other tasks.
pub const kv_batches_per_poll_max: usize = 64;
/// The host's KV-event stream (`--kv-events-publish-endpoint`): batches kept for replay
/// (vLLM's `buffer_steps` default).
pub const kv_publish_replay_batches: usize = 10_000;
/// Batches shard 0 may hand the publisher thread ahead of it; beyond, a rank's batch is dropped
/// and the rank cleared on the host stream.
pub const kv_publish_handover_batches_max: i32 = 10_000;

/// Constrained decoding: how deep a JSON schema or structural tag may nest objects and arrays
/// (vLLM's `MAX_STRUCTURED_OUTPUT_JSON_NESTING`; a structural tag may wrap schemas in
/// `constraint_tag_wrapper_nesting_max` more levels). Deeper ones are refused before anything
/// walks them, so the checks below recurse at most this deep.
pub const constraint_json_nesting_max: usize = 64;
pub const constraint_tag_wrapper_nesting_max: usize = 16;
/// Constrained decoding: nested groups in a grammar or regex (xgrammar's own limit; deeper is
/// an engine-side error, so it is refused here first).
pub const constraint_grammar_nesting_max: usize = 1000;
/// Constrained decoding: schema nodes a JSON schema check visits (each `$ref` target is walked
/// again); past it the schema is refused, so `$ref`s to big subtrees cannot multiply the work.
pub const constraint_schema_nodes_max: usize = 1 << 20;

/// CORS: how long a browser may cache a preflight answer.
pub const cors_preflight_max_age_s: u64 = 600;

/// serve: the first worker port tried (SMG's `--worker-base-port` default). A replica's socket
/// path is `engine-<worker port>` and TokenSpeed's `--port` is its worker port.
pub const serve_worker_base_port_default: u16 = 31000;
/// serve: replicas (`--data-parallel-size`), at most.
pub const serve_replicas_max: usize = 256;
/// serve: restarts an engine gets within `--engine-restart-window-secs` before it is given up
/// (`--engine-restart-limit`).
pub const engine_restart_limit_default: u32 = 5;
pub const engine_restart_window_s_default: u64 = 300;
/// serve: the wait before an engine's first restart; each restart still inside the window
/// doubles the next wait, up to the max.
pub const engine_restart_backoff_ms_initial: u64 = 1_000;
pub const engine_restart_backoff_ms_max: u64 = 30_000;
/// serve: at shutdown, SIGTERM to SIGKILL for each engine's process group (SMG's 30 s).
pub const engine_shutdown_timeout_s_default: u64 = 30;
/// serve: how long `python -c "import <package>"` may take before the engine package counts
/// as missing (importing vLLM takes seconds).
pub const engine_package_check_timeout_s: u64 = 120;
/// serve: an engine output line longer than this is logged in pieces.
pub const engine_log_line_bytes_max: usize = 16 * 1024;

/// Gateway defaults.
pub const http_port_default: u16 = 30000;
pub const metrics_port_default: u16 = 29000;

const _: () = assert!(http_header_bytes_max < http_body_bytes_max);
const _: () = assert!(http_chunk_size_line_bytes_max < http_header_bytes_max);
const _: () = assert!(worker_liveness_ping_interval_s < engine_silence_s_default);
const _: () = assert!(http_body_release_bytes_min < http_body_bytes_max);
const _: () = assert!(http_over_cap_header_timeout_ms < http_header_read_timeout_s * 1000);
const _: () = assert!(http_header_read_timeout_s < http_body_read_timeout_s);
const _: () = assert!(http_body_read_timeout_s < http_keepalive_idle_timeout_s);
const _: () = assert!(metrics_connections_max < fds_reserved_base);
const _: () = assert!(engine_restart_backoff_ms_initial <= engine_restart_backoff_ms_max);

/// `previous_response_id` chains the gateway follows back, at most: each link is one stored
/// response loaded whole into the prompt.
pub const response_chain_depth_max: usize = 256;

/// Items of one conversation the gateway loads into a prompt, at most.
pub const conversation_items_max: usize = 10_000;

/// Items one `POST /v1/conversations/{id}/items` (or a new conversation) may add (SMG's bound).
pub const conversation_items_per_request_max: usize = 20;

/// Metadata keys of a conversation, at most (OpenAI's and SMG's bound).
pub const conversation_metadata_keys_max: usize = 16;

/// Images: threads of the media side pool (fetch, decode, process), at most this many and never
/// more than the machine's cores (`gateway.rs`).
pub const media_threads_max: usize = 4;
/// Images: items waiting for a media thread; one more is answered 503 at once.
pub const media_queue_max: usize = 256;
