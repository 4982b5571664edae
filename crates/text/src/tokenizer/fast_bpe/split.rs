//! The pre-tokenizer's regex splits. The GPT-4 style pattern that Qwen 2/2.5/3 and Llama 3
//! use is matched by hand here; any other pattern goes to onig, as in `tokenizers`.
//!
//! Why: onig cost about a sixth of a 1,000-token chat request (per match: a backtracking stack
//! set up, grown with malloc and copied for every letter run). The pattern is
//! `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,K}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//! \s*[\r\n]+|\s+(?!\S)|\s+` (K = 1 for Qwen, 3 for Llama 3); every char starts a match of
//! some branch, so the matches tile the text and each is found by looking at its first chars.
//!
//! Invariant: the same matches as onig. Which chars are letters, numbers and white space is
//! asked of onig itself (once per char, cached), and the case-insensitive contractions are
//! matched by onig, so neither a Unicode version nor case folding can differ.

use std::sync::atomic::{AtomicU8, Ordering};

use tokenizers::utils::SysRegex;

use super::Unsupported;

const QWEN: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

pub(super) enum Splitter {
    Onig(SysRegex),
    Gpt4(Gpt4),
}

impl Splitter {
    pub(super) fn new(pattern: &str) -> Result<Splitter, Unsupported> {
        let digits_max = match pattern {
            QWEN => 1,
            LLAMA3 => 3,
            _ => return SysRegex::new(pattern).map(Splitter::Onig).map_err(|e| format!("split regex: {e}").into()),
        };
        Gpt4::new(digits_max).map(Splitter::Gpt4)
    }

    /// Calls `f(start, end)` for every match, in order.
    pub(super) fn for_each_match(&self, text: &str, f: &mut dyn FnMut(usize, usize)) {
        match self {
            Splitter::Onig(re) => re.find_iter(text).for_each(|(start, end)| f(start, end)),
            Splitter::Gpt4(g) => {
                let mut at = 0;
                while at < text.len() {
                    let end = g.match_at(text, at);
                    f(at, end);
                    at = end;
                }
            }
        }
    }
}

const KNOWN: u8 = 1;
const LETTER: u8 = 2;
const NUMBER: u8 = 4;
const SPACE: u8 = 8;

pub(super) struct Gpt4 {
    digits_max: usize,
    contraction: SysRegex,
    letter: SysRegex,
    number: SysRegex,
    space: SysRegex,
    /// Per code point: `KNOWN` once onig has classified it, plus its classes. Zeroed memory,
    /// so only the pages of scripts actually seen become resident.
    classes: Box<[AtomicU8]>,
}

impl Gpt4 {
    fn new(digits_max: usize) -> Result<Gpt4, Unsupported> {
        let re = |p: &str| SysRegex::new(p).map_err(|e| format!("split regex: {e}"));
        let zeroed = vec![0u8; char::MAX as usize + 1].into_boxed_slice();
        // SAFETY: AtomicU8 has the size, alignment and bit validity of u8, so a boxed slice of
        // one is a boxed slice of the other (same allocation layout).
        let classes = unsafe { Box::from_raw(Box::into_raw(zeroed) as *mut [AtomicU8]) };
        Ok(Gpt4 {
            digits_max,
            contraction: re(r"\A(?i:'s|'t|'re|'ve|'m|'ll|'d)")?,
            letter: re(r"\A\p{L}")?,
            number: re(r"\A\p{N}")?,
            space: re(r"\A\s")?,
            classes,
        })
    }

    #[inline]
    fn class(&self, c: char) -> u8 {
        let known = self.classes[c as usize].load(Ordering::Relaxed);
        if known & KNOWN != 0 {
            return known;
        }
        self.classify(c)
    }

    /// The first time a char is seen: ask onig, and remember.
    #[cold]
    #[inline(never)]
    fn classify(&self, c: char) -> u8 {
        let slot = &self.classes[c as usize];
        let mut buf = [0u8; 4];
        let s: &str = c.encode_utf8(&mut buf);
        let has = |re: &SysRegex, bit: u8| if re.find_iter(s).next().is_some() { bit } else { 0 };
        let class = KNOWN | has(&self.letter, LETTER) | has(&self.number, NUMBER) | has(&self.space, SPACE);
        slot.store(class, Ordering::Relaxed);
        class
    }

    /// The class of the char at `at`, and where the next one starts (`None` at the end).
    fn at(&self, text: &str, at: usize) -> Option<(char, u8, usize)> {
        let c = text[at..].chars().next()?;
        Some((c, self.class(c), at + c.len_utf8()))
    }

    /// The end of the run of chars from `at` whose class satisfies `keep`.
    fn run_end(&self, text: &str, at: usize, keep: impl Fn(char, u8) -> bool) -> usize {
        // One pass of `chars` (not `at` per char, which re-slices and re-checks the boundary).
        let mut end = at;
        for c in text[at..].chars() {
            if !keep(c, self.class(c)) {
                break;
            }
            end += c.len_utf8();
        }
        end
    }

    /// The end of the match that starts at `at` (< text.len()): the branches in order.
    fn match_at(&self, text: &str, at: usize) -> usize {
        let Some((c, class, next)) = self.at(text, at) else { return at };
        if c == '\'' {
            // At most three chars (with case folding, bytes may differ from chars): a short
            // window on a char boundary holds any match.
            let mut window = (at + 16).min(text.len());
            while !text.is_char_boundary(window) {
                window -= 1;
            }
            if let Some((0, len)) = self.contraction.find_iter(&text[at..window]).next() {
                return at + len;
            }
        }
        let letter = |_: char, k: u8| k & LETTER != 0;
        let other = |_: char, k: u8| k & (LETTER | NUMBER | SPACE) == 0;
        let crlf = |c: char| c == '\r' || c == '\n';
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if class & LETTER != 0 {
            return self.run_end(text, next, letter);
        }
        if !crlf(c) && class & NUMBER == 0 {
            if let Some((_, k, after)) = self.at(text, next) {
                if k & LETTER != 0 {
                    return self.run_end(text, after, letter);
                }
            }
        }
        // \p{N}{1,K}
        if class & NUMBER != 0 {
            let mut end = next;
            for _ in 1..self.digits_max {
                match self.at(text, end) {
                    Some((_, k, after)) if k & NUMBER != 0 => end = after,
                    _ => break,
                }
            }
            return end;
        }
        //  ?[^\s\p{L}\p{N}]+[\r\n]*
        let others_from = if c == ' ' && self.at(text, next).is_some_and(|(c2, k, _)| other(c2, k)) {
            Some(next)
        } else if other(c, class) {
            Some(at)
        } else {
            None
        };
        if let Some(from) = others_from {
            let end = self.run_end(text, from, other);
            return self.run_end(text, end, |c, _| crlf(c));
        }
        // White space from here on: \s*[\r\n]+ ends after the run's last CR or LF.
        let run_end = self.run_end(text, at, |_, k| k & SPACE != 0);
        let run = &text[at..run_end];
        if let Some(last) = run.rfind(['\r', '\n']) {
            return at + last + 1;
        }
        // \s+(?!\S): the whole run at the end of the text, else all but its last char.
        if run_end == text.len() {
            return run_end;
        }
        match run.char_indices().last() {
            Some((last, _)) if last > 0 => at + last,
            // \s+
            _ => run_end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn matches(s: &Splitter, text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        s.for_each_match(text, &mut |a, b| out.push((a, b)));
        out
    }

    /// Both patterns, hand-matched and by onig.
    fn pairs() -> Vec<(Splitter, SysRegex)> {
        [QWEN, LLAMA3]
            .iter()
            .map(|p| {
                let hand = Splitter::new(p).expect("pattern");
                assert!(matches!(hand, Splitter::Gpt4(_)), "{p} is matched by hand");
                (hand, SysRegex::new(p).expect("onig"))
            })
            .collect()
    }

    fn check(pairs: &[(Splitter, SysRegex)], text: &str) {
        for (hand, onig) in pairs {
            let want: Vec<(usize, usize)> = onig.find_iter(text).collect();
            assert_eq!(matches(hand, text), want, "{text:?}");
        }
    }

    #[test]
    fn every_char_in_context_splits_as_onig_does() {
        let pairs = pairs();
        // Every char below U+3400 (all scripts of Europe, the Middle East, India, every
        // white-space char), then a sample of the rest.
        let chars = (0..0x3400u32).chain((0x3400..=char::MAX as u32).step_by(13)).filter_map(char::from_u32);
        for c in chars {
            for text in [
                format!("{c}"),
                format!("a{c}b"),
                format!(" {c}{c}"),
                format!("'{c}x"),
                format!("1{c}234"),
                format!("\n{c} \r\n"),
                format!("{c}  x"),
                format!("!{c}\t"),
            ] {
                check(&pairs, &text);
            }
        }
    }

    #[test]
    fn random_mixtures_split_as_onig_does() {
        let pairs = pairs();
        let palette: Vec<char> =
            "aZ sS'ſKk lLtTdDmMrRvVeE\r\n\t\u{a0}\u{85}\u{2028}\u{3000}0129²½Ⅻ٣é中ß\u{301}\u{200d}!?.,-_/\\\"#😀🙂ﬁİı"
                .chars()
                .collect();
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..50_000 {
            let len = rng.random_range(1..24);
            let text: String = (0..len).map(|_| palette[rng.random_range(0..palette.len())]).collect();
            check(&pairs, &text);
        }
        for text in [
            "",
            "'s",
            "'S",
            "'ſ",
            "'ll",
            "'LL",
            "'lL",
            "'re",
            "'d'd",
            "don't",
            "I'M",
            "  \n\n  x",
            "x   ",
            "\t\tx",
            "a\r\n\r\nb",
        ] {
            check(&pairs, text);
        }
    }
}
