//! A received multipart message: every frame's bytes in one reused buffer, so receiving
//! allocates nothing once the buffer has grown to the largest message.

use std::ops::Range;

#[derive(Default)]
pub struct Frames {
    bytes: Vec<u8>,
    spans: Vec<Range<usize>>,
}

impl Frames {
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    pub fn push(&mut self, frame: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(frame);
        self.spans.push(start..self.bytes.len());
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.spans.get(i).map(|r| &self.bytes[r.clone()])
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.spans.iter().map(|r| &self.bytes[r.clone()])
    }

    /// The frames as exactly two (identity and payload), as every ROUTER message of ours is.
    pub fn pair(&self) -> Option<(&[u8], &[u8])> {
        match self.spans.as_slice() {
            [a, b] => Some((&self.bytes[a.clone()], &self.bytes[b.clone()])),
            _ => None,
        }
    }
}

impl std::ops::Index<usize> for Frames {
    type Output = [u8];

    fn index(&self, i: usize) -> &[u8] {
        &self.bytes[self.spans[i].clone()]
    }
}
