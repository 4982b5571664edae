//! Whether xgrammar can turn a regex into a grammar. xgrammar reads the JavaScript dialect
//! itself (not through a regex library) and rewrites it as EBNF, so this walks the pattern the
//! same way and refuses what that rewrite, or the EBNF it would produce, refuses: lookaround,
//! backreferences, `\b`, `\p{..}`, inline flags, an unclosed or unmatched group or class, a
//! quantifier with nothing to repeat, two quantifiers in a row, a bad `{n,m}`, a reversed
//! class range. Unknown escapes match the character itself, as there.

use super::ebnf::escape;
use crate::limits;

/// Checks `pattern`; the error is xgrammar's kind of message, with its 1-based position.
pub fn check(pattern: &str) -> Result<(), String> {
    let chars: Vec<char> = pattern.chars().collect();
    Walker { chars: &chars, at: 0 }.run()
}

struct Walker<'a> {
    chars: &'a [char],
    at: usize,
}

impl Walker<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn fail<T>(&self, message: &str) -> Result<T, String> {
        Err(format!("Regex parsing error at position {}: {message}", self.at + 1))
    }

    fn run(&mut self) -> Result<(), String> {
        let mut depth = 0usize;
        // Whether the last item can take a quantifier (the rewrite puts the quantifier right
        // after it; after `(`, `|` or another quantifier the EBNF has no element for it).
        let mut repeatable = false;
        while let Some(c) = self.peek(0) {
            match c {
                '^' | '$' => self.at += 1,
                '[' => {
                    self.class()?;
                    repeatable = true;
                }
                '(' => {
                    self.at += 1;
                    depth += 1;
                    if depth > limits::constraint_grammar_nesting_max {
                        return self.fail("Nest layer exceeded the maximum limit");
                    }
                    if self.peek(0) == Some('?') {
                        self.at += 1;
                        self.group_modifier()?;
                    }
                    repeatable = false;
                }
                ')' => {
                    if depth == 0 {
                        return self.fail("Unmatched ')'");
                    }
                    depth -= 1;
                    self.at += 1;
                    repeatable = true;
                }
                '*' | '+' | '?' | '{' => {
                    if !repeatable {
                        return self.fail("Quantifier without an element to repeat");
                    }
                    if c == '{' {
                        self.repetition()?;
                    } else {
                        self.at += 1;
                    }
                    if self.peek(0) == Some('?') {
                        self.at += 1;
                    }
                    if matches!(self.peek(0), Some('{' | '*' | '+' | '?')) {
                        return self.fail("Two consecutive repetition modifiers are not allowed.");
                    }
                    repeatable = false;
                }
                '|' => {
                    self.at += 1;
                    repeatable = false;
                }
                '\\' => {
                    self.escape()?;
                    repeatable = true;
                }
                _ => {
                    self.at += 1;
                    repeatable = true;
                }
            }
        }
        if depth != 0 {
            return self.fail("The parenthesis is not closed.");
        }
        Ok(())
    }

    fn group_modifier(&mut self) -> Result<(), String> {
        match (self.peek(0), self.peek(1)) {
            (None, _) => self.fail("Group modifier is not finished."),
            (Some(':'), _) => {
                self.at += 1;
                Ok(())
            }
            (Some('=' | '!'), _) => self.fail("Lookahead is not supported yet."),
            (Some('<'), Some('=' | '!')) => self.fail("Lookbehind is not supported yet."),
            (Some('<'), _) => {
                self.at += 1;
                while self.peek(0).is_some_and(|c| c.is_ascii_alphabetic()) {
                    self.at += 1;
                }
                if self.peek(0) != Some('>') {
                    return self.fail("Invalid named capturing group.");
                }
                self.at += 1;
                Ok(())
            }
            _ => self.fail("Group modifier flag is not supported yet."),
        }
    }

    /// `{n}`, `{n,}` or `{n,m}` with `n <= m` (the EBNF refuses a reversed range).
    fn repetition(&mut self) -> Result<(), String> {
        self.at += 1;
        let Some(lower) = self.count()? else { return self.fail("Invalid repetition count.") };
        match self.peek(0) {
            Some('}') => {}
            Some(',') => {
                self.at += 1;
                if let Some(upper) = self.count()? {
                    if upper < lower {
                        return self.fail("Lower bound is larger than upper bound");
                    }
                }
                if self.peek(0) != Some('}') {
                    return self.fail("Invalid repetition count.");
                }
            }
            _ => return self.fail("Invalid repetition count."),
        }
        self.at += 1;
        Ok(())
    }

    /// Decimal digits as a saturating count (`None` when there are none).
    fn number(&mut self) -> Option<u64> {
        let start = self.at;
        let mut n: u64 = 0;
        while let Some(d) = self.peek(0).and_then(|c| c.to_digit(10)) {
            n = n.saturating_mul(10).saturating_add(d as u64);
            self.at += 1;
        }
        (self.at > start).then_some(n)
    }

    /// A count the EBNF rewrite can hold (its integers stop at 10^15).
    fn count(&mut self) -> Result<Option<u64>, String> {
        match self.number() {
            Some(n) if n > super::ebnf::INTEGER_MAX => self.fail("Integer is too large"),
            n => Ok(n),
        }
    }

    fn escape(&mut self) -> Result<(), String> {
        match self.peek(1) {
            None => self.fail("Escape sequence is not finished."),
            Some('d' | 'D' | 'w' | 'W' | 's' | 'S') => {
                self.at += 2;
                Ok(())
            }
            Some('1'..='9' | 'k') => self.fail("Backreference is not supported yet."),
            Some('p' | 'P') => self.fail("Unicode character class escape sequence is not supported yet."),
            Some('b' | 'B') => self.fail("Word boundary is not supported yet."),
            Some(_) => self.char_escape().map(drop),
        }
    }

    /// One escaped character; its code point.
    fn char_escape(&mut self) -> Result<u32, String> {
        let after = &self.chars[self.at..];
        let needed = match after.get(1) {
            Some('u') => 5,
            Some('x') => 4,
            Some('c') => 3,
            _ => 2,
        };
        if after.len() < needed {
            return self.fail("Escape sequence is not finished.");
        }
        if let Some((cp, len)) = escape(after, "^$.*+?\\()[]{}|/-") {
            self.at += len;
            return Ok(cp);
        }
        match after[1] {
            'u' if after[2] == '{' => {
                let digits = after[3..].iter().take_while(|c| c.is_ascii_hexdigit()).take(7).count();
                let value = after[3..3 + digits]
                    .iter()
                    .try_fold(0u32, |v, c| c.to_digit(16).map(|d| v.saturating_mul(16).saturating_add(d)));
                if digits == 0 || digits > 6 || after.get(3 + digits) != Some(&'}') {
                    return self.fail("Invalid Unicode escape sequence.");
                }
                self.at += digits + 4;
                // Past U+10FFFF too: xgrammar takes it (it can never match).
                Ok(value.unwrap_or(u32::MAX))
            }
            'c' => {
                if !after[2].is_ascii_alphabetic() {
                    return self.fail("Invalid control character escape sequence.");
                }
                self.at += 3;
                Ok(after[2] as u32 % 32)
            }
            // Not an escape xgrammar knows: it matches the character itself.
            other => {
                self.at += 2;
                Ok(other as u32)
            }
        }
    }

    /// `[...]`: not empty, closed, ranges in order.
    fn class(&mut self) -> Result<(), String> {
        self.at += 1;
        if self.peek(0) == Some(']') {
            return self.fail("Empty character class is not allowed in regex.");
        }
        if self.peek(0) == Some('^') {
            self.at += 1;
        }
        // The previous single character, which a `-` may start a range from.
        let mut last: Option<u32> = None;
        let mut pending_dash = false;
        loop {
            let item = match self.peek(0) {
                None => return self.fail("Unclosed '['"),
                Some(']') => break,
                // Copied into the EBNF class as it is, where a line break is refused.
                Some('\n' | '\r') => return self.fail("Character class should not contain newline"),
                Some('\\') if matches!(self.peek(1), Some('d' | 'D' | 'w' | 'W' | 's' | 'S')) => {
                    // Rewritten as ranges of their own: nothing to range from or to.
                    self.at += 2;
                    last = None;
                    pending_dash = false;
                    continue;
                }
                Some('\\') => {
                    if self.peek(1).is_none() {
                        return self.fail("Escape sequence is not finished.");
                    }
                    self.char_escape()?
                }
                Some('-') if last.is_some() && !pending_dash => {
                    self.at += 1;
                    pending_dash = true;
                    continue;
                }
                Some(c) => {
                    self.at += 1;
                    c as u32
                }
            };
            match (last, pending_dash) {
                (Some(low), true) => {
                    if low > item {
                        return self.fail("Invalid character class: lower bound is larger than upper bound");
                    }
                    last = None;
                    pending_dash = false;
                }
                _ => last = Some(item),
            }
        }
        self.at += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn accepts_what_xgrammar_accepts_and_refuses_the_rest() {
        let ok = [
            "[ab]{3}",
            "^\\d{3}-\\d{4}$",
            "(a|b)*c+d?",
            "(?:ab)+",
            "(?<year>\\d{4})",
            "a{2,}",
            "a{2,5}?",
            "a*?",
            "[a-z0-9_\\-]+",
            "\\u00e9\\x41\\u{1F600}\\cA\\q",
            "(a|)",
            "()",
            "a||b",
            "[\\d-z]",
            "[-a]",
            "[a-]",
            "\\.\\*",
            "}",
            "é+",
            "[^]",
            "[+--]",
            "\\u{110000}",
            "a{1000000000000000}",
        ];
        for r in ok {
            assert_eq!(check(r), Ok(()), "{r}");
        }
        let bad = [
            ("((((", "The parenthesis is not closed."),
            ("a)", "Unmatched ')'"),
            ("*a", "Quantifier"),
            ("a|+b", "Quantifier"),
            ("(?i)a", "Group modifier flag"),
            ("(?=a)", "Lookahead"),
            ("(?<!a)b", "Lookbehind"),
            ("(?P<n>a)", "Group modifier flag"),
            ("(a)\\1", "Backreference"),
            ("\\bword", "Word boundary"),
            ("\\p{L}", "Unicode character class"),
            ("a**", "Two consecutive"),
            ("a{2}{3}", "Two consecutive"),
            ("a{,3}", "Invalid repetition count"),
            ("a{x}", "Invalid repetition count"),
            ("a{3,1}", "Lower bound"),
            ("a{3", "Invalid repetition count"),
            ("[]", "Empty character class"),
            ("[a\nb]", "newline"),
            ("[abc", "Unclosed '['"),
            ("[z-a]", "lower bound is larger"),
            ("[a--]", "lower bound is larger"),
            ("^*", "Quantifier"),
            ("(*a)", "Quantifier"),
            ("\\", "Escape sequence is not finished."),
            ("\\u{1234567}x", "Invalid Unicode escape"),
            ("a{1000000000000001}", "Integer is too large"),
            ("\\u{}ab", "Invalid Unicode escape"),
            ("\\c1", "Invalid control character"),
        ];
        for (r, want) in bad {
            let err = check(r).expect_err(r);
            assert!(err.contains(want), "{r}: {err}");
        }
        let deep = "(".repeat(2000) + &")".repeat(2000);
        assert!(check(&deep).unwrap_err().contains("Nest layer"));
    }
}
