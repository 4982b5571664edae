//! Fixtures for the workspace's tests, kept in their own crate so that no product crate
//! carries test-only code or features.
//!
//! - `tls`: a throwaway PKI written to PEM files, and TLS terminators on plain threads that put
//!   real plain-TCP servers behind `https://` / `grpcs://`.
//! - `grpc`: a scripted server of SMG's `VllmEngine` service, for the faults a real servicer
//!   cannot be made to produce on demand.

pub mod grpc;
pub mod tls;
