//! The collective a MoE data-parallel group runs at the end of every step: each rank says
//! whether it still has requests, and all learn whether any rank has. A rank that arrives waits
//! for every other rank, as a real engine blocks in its all-reduce, so a rank left idle (never
//! woken) stalls the whole group: exactly the failure the gateway's START_DP_WAVE prevents.

use std::sync::{Condvar, Mutex};

pub struct Lockstep {
    ranks: usize,
    round: Mutex<Round>,
    done: Condvar,
}

#[derive(Default)]
struct Round {
    arrived: usize,
    any: bool,
    generation: u64,
    /// The result of the last completed round.
    result: bool,
}

impl Lockstep {
    pub fn new(ranks: usize) -> Self {
        Lockstep { ranks, round: Mutex::new(Round::default()), done: Condvar::new() }
    }

    /// Whether any rank has unfinished requests; returns once every rank has called.
    pub fn any_unfinished(&self, local: bool) -> bool {
        let mut round = self.round.lock().unwrap_or_else(|e| e.into_inner());
        round.any |= local;
        round.arrived += 1;
        if round.arrived == self.ranks {
            round.result = round.any;
            round.any = false;
            round.arrived = 0;
            round.generation += 1;
            self.done.notify_all();
            return round.result;
        }
        let generation = round.generation;
        while round.generation == generation {
            round = self.done.wait(round).unwrap_or_else(|e| e.into_inner());
        }
        round.result
    }
}
