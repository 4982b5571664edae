//! Replies are plain futures: they resolve on a monoio runtime (what the shards run), on a
//! minimal executor, and on a thread other than the one that offered the operation, while
//! several threads share one store.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{answer, block_on, response};
use shardgate_store::{Backend, Limits, Store};

/// Runs `body` on its own thread and fails, instead of hanging the suite, if it does not end
/// within a minute (a reply whose wake-up never arrives would hang forever).
fn within_a_minute(body: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => thread.join().expect("body"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(thread.join().expect_err("body panicked"))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("a reply did not resolve within a minute"),
    }
}

#[test]
fn replies_resolve_on_a_monoio_runtime() {
    within_a_minute(|| {
        let store = Store::open(Backend::Memory, &Limits::default()).expect("open");
        let mut runtime =
            monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().expect("runtime");
        let answers = runtime.block_on(async {
            store.put_response(response("r1", None)).expect("queued").await.expect("put");
            // Many in flight at once on one shard, awaited in turn.
            let replies: Vec<_> = (0..50).map(|_| store.get_response("r1").expect("queued")).collect();
            let mut found = 0;
            for reply in replies {
                found += usize::from(reply.await.expect("get").is_some());
            }
            found
        });
        assert_eq!(answers, 50);
    });
}

#[test]
fn replies_resolve_on_another_thread() {
    within_a_minute(|| {
        let store = Store::open(Backend::Memory, &Limits::default()).expect("open");
        answer(store.put_response(response("r1", None))).expect("put");
        let reply = store.get_response("r1").expect("queued");
        let found = std::thread::spawn(move || block_on(reply)).join().expect("thread");
        assert_eq!(found, Ok(Some(response("r1", None))));
    });
}

#[test]
fn threads_share_one_store() {
    within_a_minute(|| {
        let store = Store::open(Backend::Memory, &Limits::default()).expect("open");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for n in 0..50 {
                        answer(store.put_response(response(&format!("r{t}_{n}"), None))).expect("put");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writer");
        }
        for t in 0..4 {
            for n in 0..50 {
                let id = format!("r{t}_{n}");
                assert_eq!(answer(store.get_response(&id)).map(|r| r.map(|r| r.id)), Ok(Some(id)));
            }
        }
    });
}
