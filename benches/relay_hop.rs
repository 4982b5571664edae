//! The cross-shard hop a TokenSpeed request takes when its HTTP connection is not on the owner
//! shard: queue the ADD in the hub, wake the owner, and route the output back to the shard's
//! inbox, wake it. Measured as a round trip between two pinned threads, each sleeping until
//! woken (as a shard's runtime does), side by side with `std::sync::mpsc` channels doing the
//! same round trip, as a ratio.
//!
//!     cargo bench --bench relay_hop        (SHARDGATE_BENCH_QUICK=1 for a smoke run)

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use shardgate::engine::zmq::hub::{Hub, Outgoing};
use shardgate_wire::TokenEvent;

/// Wakes a parked thread: the cost a shard pays to be woken by another core.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future on this thread, parking while it is pending.
fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

fn hub_round_trips(n: usize) -> f64 {
    let hub = Arc::new(Hub::new(0, 2, 1024));
    let owner = {
        let hub = hub.clone();
        thread::spawn(move || {
            for _ in 0..n {
                block_on(hub.outgoing_ready());
                let msg = hub.pop_outgoing().expect("a queued message");
                let ev = TokenEvent { token_ids: vec![msg.payload.len() as u32], ..Default::default() };
                hub.route(1, "req".to_string(), ev);
            }
        })
    };
    let started = Instant::now();
    for i in 0..n {
        let msg = Outgoing { rank: 0, kind: 0, payload: vec![0; i % 64] };
        while hub.push_request(msg_clone(&msg)).is_err() {}
        block_on(hub.output_ready(1));
        let (_, ev) = hub.take_output(1).expect("a routed output");
        assert_eq!(ev.token_ids[0] as usize, i % 64);
    }
    let elapsed = started.elapsed();
    owner.join().unwrap();
    elapsed.as_nanos() as f64 / n as f64
}

fn msg_clone(m: &Outgoing) -> Outgoing {
    Outgoing { rank: m.rank, kind: m.kind, payload: m.payload.clone() }
}

fn mpsc_round_trips(n: usize) -> f64 {
    let (to_owner, owner_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let (to_shard, shard_rx) = std::sync::mpsc::channel::<(String, TokenEvent)>();
    let owner = thread::spawn(move || {
        for _ in 0..n {
            let payload = owner_rx.recv().unwrap();
            let ev = TokenEvent { token_ids: vec![payload.len() as u32], ..Default::default() };
            to_shard.send(("req".to_string(), ev)).unwrap();
        }
    });
    let started = Instant::now();
    for i in 0..n {
        to_owner.send(vec![0; i % 64]).unwrap();
        let (_, ev) = shard_rx.recv().unwrap();
        assert_eq!(ev.token_ids[0] as usize, i % 64);
    }
    let elapsed = started.elapsed();
    owner.join().unwrap();
    elapsed.as_nanos() as f64 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::var_os("SHARDGATE_BENCH_QUICK").is_some();
    let (n, rounds) = if quick { (2_000, 3) } else { (50_000, 7) };
    let (mut hub, mut mpsc) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        hub.push(hub_round_trips(n));
        mpsc.push(mpsc_round_trips(n));
    }
    let (h, m) = (median(hub), median(mpsc));
    println!("relay round trip (shard → owner → shard, both sides woken), median of {rounds} × {n}");
    println!("{:<28} {:>12}", "path", "ns/round trip");
    println!("{:<28} {:>12.0}", "hub (ArrayQueue+SegQueue)", h);
    println!("{:<28} {:>12.0}", "std mpsc channels", m);
    println!("hub / mpsc: {:.2}", h / m);
}
