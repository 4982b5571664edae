//! A least-recently-used map bounded by bytes (and optionally entries), for the per-shard
//! tokenizer caches. Single-threaded by design: each shard owns its own.
//!
//! Layout: a hash map from key to slot, and the slots in a doubly linked list through a `Vec`
//! (indices, no pointers), most recent at the head; freed slots are reused.

use std::collections::HashMap;
use std::hash::Hash;

const NONE: usize = usize::MAX;

struct Slot<K, V> {
    key: K,
    value: V,
    bytes: usize,
    prev: usize,
    next: usize,
}

pub struct ByteLru<K, V> {
    map: HashMap<K, usize>,
    slots: Vec<Option<Slot<K, V>>>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    bytes: usize,
    bytes_max: usize,
    entries_max: usize,
}

impl<K: Hash + Eq + Clone, V> ByteLru<K, V> {
    pub fn new(bytes_max: usize, entries_max: usize) -> Self {
        ByteLru {
            map: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NONE,
            tail: NONE,
            bytes: 0,
            bytes_max,
            entries_max: entries_max.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn slot(&self, i: usize) -> &Slot<K, V> {
        self.slots[i].as_ref().expect("live slot")
    }

    fn slot_mut(&mut self, i: usize) -> &mut Slot<K, V> {
        self.slots[i].as_mut().expect("live slot")
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = {
            let s = self.slot(i);
            (s.prev, s.next)
        };
        if prev == NONE {
            self.head = next;
        } else {
            self.slot_mut(prev).next = next;
        }
        if next == NONE {
            self.tail = prev;
        } else {
            self.slot_mut(next).prev = prev;
        }
    }

    fn push_front(&mut self, i: usize) {
        let old_head = self.head;
        {
            let s = self.slot_mut(i);
            s.prev = NONE;
            s.next = old_head;
        }
        if old_head != NONE {
            self.slot_mut(old_head).prev = i;
        }
        self.head = i;
        if self.tail == NONE {
            self.tail = i;
        }
    }

    /// Looks up and marks as most recently used.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        let i = *self.map.get(key)?;
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        Some(&self.slot(i).value)
    }

    /// Inserts (replacing any entry with the same key), then evicts from the cold end until the
    /// bounds hold. An entry larger than the whole budget is not kept.
    pub fn insert(&mut self, key: K, value: V, bytes: usize) {
        self.remove(&key);
        if bytes > self.bytes_max {
            return;
        }
        let slot = Slot { key: key.clone(), value, bytes, prev: NONE, next: NONE };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.map.insert(key, i);
        self.push_front(i);
        self.bytes += bytes;
        while self.bytes > self.bytes_max || self.map.len() > self.entries_max {
            let cold = self.tail;
            if cold == NONE || cold == i {
                break;
            }
            let k = self.slot(cold).key.clone();
            self.remove(&k);
        }
        debug_assert!(self.bytes <= self.bytes_max);
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.map.remove(key)?;
        self.unlink(i);
        let slot = self.slots[i].take().expect("live slot");
        self.bytes -= slot.bytes;
        self.free.push(i);
        Some(slot.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let mut c: ByteLru<u32, &str> = ByteLru::new(30, 100);
        c.insert(1, "a", 10);
        c.insert(2, "b", 10);
        c.insert(3, "c", 10);
        assert_eq!(c.get(&1), Some(&"a")); // 1 is now hot; 2 is coldest
        c.insert(4, "d", 10);
        assert_eq!(c.get(&2), None);
        assert_eq!(c.len(), 3);
        assert_eq!(c.bytes(), 30);
        c.insert(5, "big", 31); // over the whole budget: not kept, nothing evicted
        assert_eq!(c.len(), 3);
        c.insert(6, "f", 25); // evicts the two coldest
        assert!(c.bytes() <= 30);
        assert_eq!(c.get(&6), Some(&"f"));
    }

    #[test]
    fn entry_bound_and_replacement() {
        let mut c: ByteLru<u32, u32> = ByteLru::new(1000, 2);
        c.insert(1, 1, 1);
        c.insert(1, 11, 5);
        assert_eq!(c.len(), 1);
        assert_eq!(c.bytes(), 5);
        c.insert(2, 2, 1);
        c.insert(3, 3, 1);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&1), None);
        // Slots are reused, the list stays consistent under churn.
        for k in 0..1000 {
            c.insert(k, k, 1);
            assert_eq!(c.get(&k), Some(&k));
        }
        assert_eq!(c.len(), 2);
        assert!(c.slots.len() <= 4);
    }
}
