//! The four policies that keep no memory of prompts: `round_robin`, `random`, `power_of_two`
//! and `least_load` (their rules: `policy.rs`).

use rand::rngs::SmallRng;
use rand::Rng;

use super::policy::{lowest_rotating, Candidate, Policy, PolicyKind};

pub(super) struct RoundRobin {
    pub(super) next_index: usize,
}

impl Policy for RoundRobin {
    fn kind(&self) -> PolicyKind {
        PolicyKind::RoundRobin
    }

    fn select(&mut self, candidates: &[Candidate], _tokens: &[u32]) -> Option<usize> {
        if candidates.is_empty() {
            return None;
        }
        // Modulo rather than wrap-at-len: the candidate list can shrink between calls.
        let index = self.next_index % candidates.len();
        self.next_index = index + 1;
        Some(index)
    }
}

pub(super) struct Random {
    pub(super) rng: SmallRng,
}

impl Policy for Random {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Random
    }

    fn select(&mut self, candidates: &[Candidate], _tokens: &[u32]) -> Option<usize> {
        if candidates.is_empty() {
            return None;
        }
        Some(self.rng.random_range(0..candidates.len()))
    }
}

pub(super) struct PowerOfTwo {
    pub(super) rng: SmallRng,
}

impl Policy for PowerOfTwo {
    fn kind(&self) -> PolicyKind {
        PolicyKind::PowerOfTwo
    }

    fn select(&mut self, candidates: &[Candidate], _tokens: &[u32]) -> Option<usize> {
        match candidates.len() {
            0 => None,
            1 => Some(0),
            count => {
                // Two distinct indices: draw the second from count − 1 and skip over the first.
                let first = self.rng.random_range(0..count);
                let mut second = self.rng.random_range(0..count - 1);
                if second >= first {
                    second += 1;
                }
                Some(if candidates[second].load < candidates[first].load { second } else { first })
            }
        }
    }
}

pub(super) struct LeastLoad {
    pub(super) cursor: usize,
}

impl Policy for LeastLoad {
    fn kind(&self) -> PolicyKind {
        PolicyKind::LeastLoad
    }

    fn select(&mut self, candidates: &[Candidate], _tokens: &[u32]) -> Option<usize> {
        if candidates.is_empty() {
            return None;
        }
        Some(lowest_rotating(candidates, &mut self.cursor, |_, candidate| candidate.load))
    }
}
