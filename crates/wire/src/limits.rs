#![allow(non_upper_case_globals)]

//! Every bound and default of the engine wire (ZMTP sockets, socket paths, handshake ports), in one place.
//!
//! Names carry their unit last (`_s`, `_ms`, `_bytes`) and their qualifier after it
//! (`_max`, `_min`), so related limits line up. Nothing else in the crate hard-codes a limit.

/// ZMQ: first port of the derived handshake range (`20000 + FNV-1a-64(path) mod 10000`).
pub const handshake_port_base: u16 = 20000;

/// ZMQ: size of the derived handshake port range.
pub const handshake_port_span: u64 = 10000;

/// ZMQ: bytes queued towards one engine (beyond what its socket buffer took) before sends
/// report back-pressure.
pub const zmq_send_queue_bytes_max: usize = 64 << 20;

/// ZMQ: largest message (all frames) taken from an engine; a bigger one drops that connection.
pub const zmq_message_bytes_max: usize = 512 << 20;

/// ZMQ: bytes asked of the kernel per read of an engine connection.
pub const zmq_read_chunk_bytes: usize = 64 << 10;

/// ZMQ: reads of one connection per wake-up before the others get their turn.
pub const zmq_read_chunks_per_wake: usize = 16;

/// ZMQ: connections one data-plane socket holds at once (engines plus stale reconnects).
pub const zmq_peers_max: usize = 4096;

/// Unix socket paths: `sun_path` holds 108 bytes including the terminating NUL.
pub const unix_socket_path_bytes_max: usize = 107;

/// Decoding: preallocation cap for lengths read from the wire, so a hostile length costs no
/// memory before the bytes behind it are seen.
pub const decode_reserve_items_max: usize = 4096;

/// vLLM: a tensor under this many bytes travels inside the message (ext type 3), a larger one
/// as an aux frame of its own (`VLLM_MSGPACK_ZERO_COPY_THRESHOLD`'s default, which the
/// engine's decoder does not need to share: it reads both forms).
pub const vllm_inline_tensor_bytes_max: usize = 256;

const _: () = assert!(handshake_port_base as u64 + handshake_port_span <= u16::MAX as u64);
const _: () = assert!(unix_socket_path_bytes_max < 108);
