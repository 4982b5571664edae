//! Where each replica lives, decided before anything starts: its worker port, its socket path
//! and worker URL (`ipc://<socket dir>/engine-<worker port>`, as SMG names them), the handshake
//! port its engine dials (derived from the path, as `launch` derives it), and TokenSpeed's store
//! port. Two replicas that would share a handshake port stop the launch here.

use shardgate_wire::sockdir;

use super::error::ServeError;
use crate::config::ConfigError;
use crate::workers::refusal::WorkerRefusal;

/// One engine replica and its worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Replica {
    pub index: usize,
    pub worker_port: u16,
    /// The socket base path, normalised (the worker's identity).
    pub path: String,
    pub url: String,
    pub handshake_port: u16,
    /// TokenSpeed's torch store (`--dist-init-addr 127.0.0.1:<port>`); none for other engines.
    pub store_port: Option<u16>,
}

impl Replica {
    /// `engine-<worker port>`: the name its log lines and state carry.
    pub fn name(&self) -> String {
        format!("engine-{}", self.worker_port)
    }
}

/// The socket directory, and the variable that named it: `SHARDGATE_ZMQ_SOCKET_DIR`, else SMG's
/// `SMG_ZMQ_SOCKET_DIR`, else `/tmp/shardgate-zmq-<uid>` (per user, so a shared `/tmp` mixes
/// no one else's sockets in).
pub fn socket_dir(var: impl Fn(&str) -> Option<String>, uid: u32) -> (String, &'static str) {
    for name in ["SHARDGATE_ZMQ_SOCKET_DIR", "SMG_ZMQ_SOCKET_DIR"] {
        if let Some(dir) = var(name).filter(|d| !d.is_empty()) {
            return (dir, name);
        }
    }
    (format!("/tmp/shardgate-zmq-{uid}"), "the default")
}

/// `count` worker ports: the first ones at or above `base` that `free` accepts (TokenSpeed
/// binds its `--port`, so a taken one is skipped).
pub fn worker_ports(base: u16, count: usize, mut free: impl FnMut(u16) -> bool) -> Result<Vec<u16>, ServeError> {
    let mut ports = Vec::with_capacity(count);
    for port in base..=u16::MAX {
        if ports.len() == count {
            break;
        }
        if free(port) {
            ports.push(port);
        }
    }
    if ports.len() < count {
        return Err(ServeError::NoWorkerPorts { base, count });
    }
    Ok(ports)
}

/// The replicas for `ports` under `dir`, refusing two that derive one handshake port.
pub fn replicas(dir: &str, ports: &[u16]) -> Result<Vec<Replica>, ServeError> {
    let mut replicas: Vec<Replica> = Vec::with_capacity(ports.len());
    for (index, &worker_port) in ports.iter().enumerate() {
        let given = format!("{dir}/engine-{worker_port}");
        let path = sockdir::normalize(&given).map_err(|e| {
            ServeError::Config(ConfigError::Worker { url: format!("ipc://{given}"), reason: WorkerRefusal::from(e) })
        })?;
        let url = format!("ipc://{path}");
        let handshake_port = sockdir::derived_handshake_port(&path);
        if let Some(other) = replicas.iter().find(|r| r.handshake_port == handshake_port) {
            return Err(ServeError::HandshakeCollision { port: handshake_port, first: other.url.clone(), second: url });
        }
        replicas.push(Replica { index, worker_port, path, url, handshake_port, store_port: None });
    }
    Ok(replicas)
}

/// The replicas of a gRPC or HTTP fleet: each engine serves its own port on loopback, and
/// its worker URL is `grpc://127.0.0.1:<port>` or `http://127.0.0.1:<port>` (no sockets, no
/// handshake).
pub fn served_replicas(scheme: &str, ports: &[u16]) -> Vec<Replica> {
    ports
        .iter()
        .enumerate()
        .map(|(index, &worker_port)| Replica {
            index,
            worker_port,
            path: String::new(),
            url: format!("{scheme}://127.0.0.1:{worker_port}"),
            handshake_port: 0,
            store_port: None,
        })
        .collect()
}

/// Gives each replica a store port for TokenSpeed's `--dist-init-addr`: one the kernel picks
/// (outside the handshake range), not a worker or handshake port of any replica.
pub fn assign_store_ports(replicas: &mut [Replica]) -> Result<(), ServeError> {
    let mut taken: Vec<u16> = replicas.iter().flat_map(|r| [r.worker_port, r.handshake_port]).collect();
    for replica in replicas.iter_mut() {
        let port = loop {
            let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(ServeError::NoStorePort)?;
            let port = listener.local_addr().map_err(ServeError::NoStorePort)?.port();
            let in_handshake_range = handshake_ports().contains(&port);
            if !taken.contains(&port) && !in_handshake_range {
                break port;
            }
        };
        taken.push(port);
        replica.store_port = Some(port);
    }
    Ok(())
}

/// The ports a derived handshake port may take.
fn handshake_ports() -> std::ops::Range<u16> {
    let base = shardgate_wire::limits::handshake_port_base;
    base..base + shardgate_wire::limits::handshake_port_span as u16
}

/// Whether a worker port can be bound on loopback now.
pub fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_directory_comes_from_ours_then_smgs_variable_then_the_uid() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        // (environment, directory, named by)
        type Case = (&'static [(&'static str, &'static str)], &'static str, &'static str);
        let cases: [Case; 4] = [
            (&[], "/tmp/shardgate-zmq-1000", "the default"),
            (&[("SMG_ZMQ_SOCKET_DIR", "/run/smg")], "/run/smg", "SMG_ZMQ_SOCKET_DIR"),
            (
                &[("SMG_ZMQ_SOCKET_DIR", "/run/smg"), ("SHARDGATE_ZMQ_SOCKET_DIR", "/run/sg")],
                "/run/sg",
                "SHARDGATE_ZMQ_SOCKET_DIR",
            ),
            (&[("SHARDGATE_ZMQ_SOCKET_DIR", "")], "/tmp/shardgate-zmq-1000", "the default"),
        ];
        for (vars, dir, by) in cases {
            assert_eq!(socket_dir(env(vars), 1000), (dir.to_string(), by), "{vars:?}");
        }
    }

    #[test]
    fn worker_ports_skip_taken_ones_and_run_out_at_the_top() {
        let taken = [31001, 31002];
        assert_eq!(worker_ports(31000, 3, |p| !taken.contains(&p)).unwrap(), [31000, 31003, 31004]);
        assert_eq!(worker_ports(65534, 2, |_| true).unwrap(), [65534, 65535]);
        assert_eq!(
            worker_ports(65534, 3, |_| true).unwrap_err().to_string(),
            "could not find 3 available ports starting from --worker-base-port 65534"
        );
    }

    #[test]
    fn replicas_are_named_by_worker_port_and_normalised() {
        let r = replicas("/tmp//sg/./zmq", &[31000, 31005]).unwrap();
        assert_eq!(r[0].url, "ipc:///tmp/sg/zmq/engine-31000");
        assert_eq!(r[1].path, "/tmp/sg/zmq/engine-31005");
        assert_eq!(r[1].name(), "engine-31005");
        assert_eq!(r[0].handshake_port, sockdir::derived_handshake_port("/tmp/sg/zmq/engine-31000"));
        // SMG's documented example: the port `launch` derives is the one the engine dials.
        assert_eq!(sockdir::derived_handshake_port("/tmp/smg-zmq/engine-0"), 22670);
        let e = replicas("relative/dir", &[31000]).unwrap_err().to_string();
        assert!(e.contains("worker=ipc://relative/dir/engine-31000") && e.contains("absolute path"), "{e}");
    }

    #[test]
    fn two_replicas_on_one_handshake_port_stop_the_launch() {
        // The first two worker ports under this directory whose paths collide.
        let dir = "/tmp/sg-collide";
        let mut seen = std::collections::HashMap::new();
        let (a, b) = (31000u16..)
            .find_map(|p| {
                let port = sockdir::derived_handshake_port(&format!("{dir}/engine-{p}"));
                seen.insert(port, p).map(|q| (q, p))
            })
            .unwrap();
        let port = sockdir::derived_handshake_port(&format!("{dir}/engine-{a}"));
        assert_eq!(
            replicas(dir, &[a, b]).unwrap_err().to_string(),
            format!(
                "ZMQ handshake port collision on {port}: ipc://{dir}/engine-{a} and ipc://{dir}/engine-{b} derive \
                 the same port. Adjust --worker-base-port so the worker ipc paths differ."
            )
        );
    }

    #[test]
    fn served_replicas_are_loopback_urls_of_their_ports() {
        let r = served_replicas("grpc", &[31000, 31002]);
        assert_eq!(
            r.iter().map(|r| r.url.as_str()).collect::<Vec<_>>(),
            ["grpc://127.0.0.1:31000", "grpc://127.0.0.1:31002"]
        );
        assert_eq!((r[1].index, r[1].name().as_str(), r[1].path.as_str()), (1, "engine-31002", ""));
    }

    #[test]
    fn store_ports_avoid_every_other_port_of_the_launch() {
        let mut r = replicas("/tmp/sg", &[31000, 31001]).unwrap();
        assign_store_ports(&mut r).unwrap();
        let stores: Vec<u16> = r.iter().filter_map(|r| r.store_port).collect();
        assert_eq!(stores.len(), 2);
        assert_ne!(stores[0], stores[1]);
        for s in stores {
            assert!(!handshake_ports().contains(&s));
            assert!(r.iter().all(|r| r.worker_port != s && r.handshake_port != s));
        }
    }
}
