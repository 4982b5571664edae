//! shardgate's own ZMTP 3.1 (NULL mechanism) for the data-plane sockets it binds: the ROUTER
//! that requests leave by and the PULL that outputs arrive on. `codec` is the bytes, `peer` one
//! connection's state machine, `frames` a received message, `socket` the bound socket a shard
//! drives from its own runtime. The engines keep libzmq (pyzmq); the handshake socket too.

pub mod codec;
pub mod frames;
pub mod peer;
pub mod socket;

pub use codec::ProtocolError;
pub use frames::Frames;
pub use peer::Kind;
pub use socket::{Attached, DriveEnd, SendError, Socket};
