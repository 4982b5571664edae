//! How many connections the process can hold: every open connection is one descriptor (three
//! with TLS: an HTTP/1.1 connection inside TLS is bridged through a socket pair, see
//! `http::tls`), so the cap comes from `RLIMIT_NOFILE`, less a reserve for what else needs descriptors (engine
//! sockets, libzmq's own, the io_uring and eventfds of each shard, model files, logs, the
//! metrics listener and the over-cap lane). At the cap, connections are refused at accept
//! instead of the process running out of descriptors, where nothing (health probes and
//! metrics included) could be answered any more.

use crate::limits;

/// The connection budget, and what it was derived from (for the startup log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// The process's descriptor limit after raising it.
    pub nofile: u64,
    pub reserved: u64,
    /// Descriptors one API connection may hold.
    pub fds_per_connection: usize,
    pub connections_per_shard: usize,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (the default soft limit, often 1024, is
/// a leftover of `select(2)`; the gateway never uses it) and derives the per-shard cap.
pub fn plan(shards: usize, engines: usize, tls: bool) -> FdBudget {
    budget(raise_nofile_limit(), shards, engines, fds_per_connection(tls))
}

/// What one API connection may cost: with TLS the budget counts every connection as the
/// HTTP/1.1 kind (ALPN is chosen after accept, when the connection is already counted).
pub fn fds_per_connection(tls: bool) -> usize {
    if tls {
        limits::fds_per_tls_connection
    } else {
        1
    }
}

/// The per-shard connection cap for a descriptor limit of `nofile`, each API connection taking
/// up to `fds_per_connection` (the over-cap lane's connections are always plain: one each).
pub fn budget(nofile: u64, shards: usize, engines: usize, fds_per_connection: usize) -> FdBudget {
    let shards = shards.max(1) as u64;
    let reserved = limits::fds_reserved_base as u64
        + shards * (limits::fds_reserved_per_shard + limits::http_over_cap_connections_per_shard) as u64
        + shards * engines as u64 * limits::fds_reserved_per_engine_per_shard as u64;
    let per_shard = nofile.saturating_sub(reserved) / shards / fds_per_connection.max(1) as u64;
    FdBudget {
        nofile,
        reserved,
        fds_per_connection,
        connections_per_shard: (per_shard as usize).clamp(1, limits::http_connections_per_shard_max),
    }
}

fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit fill or read a plain struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            tracing::warn!("cannot read RLIMIT_NOFILE: {}", std::io::Error::last_os_error());
            return limits::fds_assumed_when_unknown as u64;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            } else {
                tracing::warn!(
                    "cannot raise RLIMIT_NOFILE from {} to {}: {}",
                    lim.rlim_cur,
                    lim.rlim_max,
                    std::io::Error::last_os_error()
                );
            }
        }
    }
    lim.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_and_is_bounded() {
        // (nofile, shards, engines, TLS) -> connections per shard.
        let reserve_2x1 = limits::fds_reserved_base
            + 2 * (limits::fds_reserved_per_shard + limits::http_over_cap_connections_per_shard)
            + 2 * limits::fds_reserved_per_engine_per_shard;
        let cases: [(u64, usize, usize, bool, usize); 6] = [
            ((reserve_2x1 + 200) as u64, 2, 1, false, 100),
            // With TLS each connection may hold three descriptors: a third as many fit.
            ((reserve_2x1 + 600) as u64, 2, 1, true, 100),
            ((reserve_2x1 + 200) as u64, 2, 1, true, 33),
            // A limit below the reserve still lets one connection per shard in.
            (64, 2, 1, false, 1),
            // Huge limits stop at the per-shard maximum (memory, not descriptors, bounds it).
            (u64::MAX, 4, 8, true, limits::http_connections_per_shard_max),
            (1 << 20, 1, 0, false, limits::http_connections_per_shard_max),
        ];
        for (nofile, shards, engines, tls, expected) in cases {
            let b = budget(nofile, shards, engines, fds_per_connection(tls));
            assert_eq!(b.connections_per_shard, expected, "nofile {nofile}, {shards} shards, {engines} engines, {tls}");
            if nofile > b.reserved {
                let held = b.reserved + (b.connections_per_shard * shards * b.fds_per_connection) as u64;
                assert!(held <= nofile, "{held} descriptors for a limit of {nofile}");
            }
        }
    }
}
