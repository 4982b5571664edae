//! Whether xgrammar's EBNF reader takes a grammar (`root ::= ...`, GBNF-like): a rule name
//! first on its line, `::=`, alternatives of sequences of strings, character classes, rule
//! references and groups, each with `*`, `+`, `?` or `{n}` / `{n,}` / `{n,m}`; an optional
//! lookahead `(= ...)` after a rule; `#` comments. Every referenced rule must be defined, once,
//! and `root` must be. xgrammar's macros (`TagDispatch(...)` and kin) are taken as written.

use crate::limits;

/// Escapes xgrammar reads in strings (C's, `\e`, `\/`, `\xH..`, `\uHHHH`, `\UHHHHHHHH`),
/// plus `extra` characters that stand for themselves; the code point and the length.
pub fn escape(at: &[char], extra: &str) -> Option<(u32, usize)> {
    let c = *at.get(1)?;
    if extra.contains(c) {
        return Some((c as u32, 2));
    }
    let simple = match c {
        '\'' | '"' | '?' | '\\' | '/' => Some(c as u32),
        'a' => Some(7),
        'b' => Some(8),
        'f' => Some(12),
        'n' => Some(10),
        'r' => Some(13),
        't' => Some(9),
        'v' => Some(11),
        '0' => Some(0),
        'e' => Some(27),
        _ => None,
    };
    if let Some(cp) = simple {
        return Some((cp, 2));
    }
    let hex = |from: usize, count: usize| -> Option<u32> {
        let digits = at.get(from..from + count)?;
        digits.iter().try_fold(0u32, |v, d| d.to_digit(16).map(|d| v.wrapping_mul(16).wrapping_add(d)))
    };
    match c {
        'x' => {
            let n = at[2..].iter().take_while(|d| d.is_ascii_hexdigit()).count();
            (n > 0).then(|| (hex(2, n).unwrap_or(u32::MAX), n + 2))
        }
        'u' => hex(2, 4).map(|v| (v, 6)),
        'U' => hex(2, 8).map(|v| (v, 10)),
        _ => None,
    }
}

/// Checks `grammar`; the error names its line and column as xgrammar's does.
pub fn check(grammar: &str) -> Result<(), String> {
    let chars: Vec<char> = grammar.chars().collect();
    let tokens = Lexer { chars: &chars, at: 0, line: 1, column: 1, tokens: Vec::new() }.run()?;
    Parser::new(&tokens)?.run()
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    LParen,
    Lookahead,
    RParen,
    LBrace,
    RBrace,
    Pipe,
    Comma,
    Star,
    Plus,
    Question,
    Equal,
    Assign,
    Str,
    /// A whole character class (checked while lexing).
    Class,
    Ident(String),
    /// An identifier directly before `::=`.
    RuleName(String),
    Int(u64),
    Bool,
    Eof,
}

#[derive(Debug)]
struct Token {
    kind: Kind,
    line: usize,
    column: usize,
}

struct Lexer<'a> {
    chars: &'a [char],
    at: usize,
    line: usize,
    column: usize,
    tokens: Vec<Token>,
}

fn name_char(c: char, first: bool) -> bool {
    c == '_' || c == '-' || c == '.' || c.is_ascii_alphabetic() || (!first && c.is_ascii_digit())
}

/// Integers above this are a lexer error in xgrammar.
pub const INTEGER_MAX: u64 = 1_000_000_000_000_000;

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self, n: usize) {
        for _ in 0..n {
            match self.peek(0) {
                Some('\n') => self.newline(),
                Some('\r') if self.peek(1) != Some('\n') => self.newline(),
                Some(_) => self.column += 1,
                None => return,
            }
            self.at += 1;
        }
    }

    fn newline(&mut self) {
        self.line += 1;
        self.column = 1;
    }

    fn fail<T>(&self, message: &str) -> Result<T, String> {
        Err(format!("EBNF lexer error at line {}, column {}: {message}", self.line, self.column))
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\n' | '\r' => self.bump(1),
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n' && c != '\r') {
                        self.bump(1);
                    }
                }
                _ => return,
            }
        }
    }

    fn run(mut self) -> Result<Vec<Token>, String> {
        loop {
            self.skip_space();
            let (line, column) = (self.line, self.column);
            let Some(c) = self.peek(0) else {
                self.tokens.push(Token { kind: Kind::Eof, line, column });
                break;
            };
            let (kind, len) = match c {
                '(' if self.peek(1) == Some('=') => (Kind::Lookahead, 2),
                '(' => (Kind::LParen, 1),
                ')' => (Kind::RParen, 1),
                '{' => (Kind::LBrace, 1),
                '}' => (Kind::RBrace, 1),
                '|' => (Kind::Pipe, 1),
                ',' => (Kind::Comma, 1),
                '*' => (Kind::Star, 1),
                '+' => (Kind::Plus, 1),
                '?' => (Kind::Question, 1),
                '=' => (Kind::Equal, 1),
                ':' if self.peek(1) == Some(':') && self.peek(2) == Some('=') => (Kind::Assign, 3),
                '"' => (self.string()?, 0),
                '[' => (self.class()?, 0),
                c if name_char(c, true) => (self.identifier(), 0),
                c if c.is_ascii_digit() => (self.integer()?, 0),
                c => return self.fail(&format!("Unexpected character: {c}")),
            };
            self.bump(len);
            self.tokens.push(Token { kind, line, column });
        }
        self.mark_rule_names()?;
        Ok(self.tokens)
    }

    fn string(&mut self) -> Result<Kind, String> {
        self.bump(1);
        while let Some(c) = self.peek(0).filter(|c| !matches!(c, '"' | '\n' | '\r')) {
            let len = if c == '\\' {
                match escape(&self.chars[self.at..], "") {
                    Some((_, len)) => len,
                    None => return self.fail("Invalid escape sequence"),
                }
            } else {
                1
            };
            self.bump(len);
        }
        if self.peek(0) != Some('"') {
            return self.fail("Expect \" in string literal");
        }
        self.bump(1);
        Ok(Kind::Str)
    }

    /// `[...]`, with the parser's rules for ranges applied here (they are local to the class).
    fn class(&mut self) -> Result<Kind, String> {
        self.bump(1);
        if self.peek(0) == Some('^') {
            self.bump(1);
        }
        // Each item: `None` for a bare `-`, else the character.
        let mut items: Vec<Option<u32>> = Vec::new();
        loop {
            match self.peek(0) {
                None => return self.fail("Unterminated character class"),
                Some(']') => break,
                Some('\n' | '\r') => return self.fail("Character class should not contain newline"),
                Some('-') => {
                    items.push(None);
                    self.bump(1);
                }
                Some('\\') if matches!(self.peek(1), Some('d' | 'D' | 's' | 'S' | 'w' | 'W')) => {
                    return self.fail("Character class escape is not supported yet in EBNF")
                }
                Some('\\') => match escape(&self.chars[self.at..], "^$\\.*+?()[]{}|/-") {
                    Some((cp, len)) => {
                        items.push(Some(cp));
                        self.bump(len);
                    }
                    None => return self.fail("Invalid escape sequence"),
                },
                Some(c) => {
                    items.push(Some(c as u32));
                    self.bump(1);
                }
            }
        }
        self.bump(1);
        let as_char = |item: Option<u32>| item.unwrap_or('-' as u32);
        let mut i = 0;
        while i < items.len() {
            if items.get(i + 1) == Some(&None) && i + 2 < items.len() {
                if as_char(items[i]) > as_char(items[i + 2]) {
                    return self.fail("Invalid character class: lower bound is larger than upper bound");
                }
                i += 3;
            } else {
                i += 1;
            }
        }
        Ok(Kind::Class)
    }

    fn identifier(&mut self) -> Kind {
        let start = self.at;
        let mut first = true;
        while self.peek(0).is_some_and(|c| name_char(c, first)) {
            self.bump(1);
            first = false;
        }
        let name: String = self.chars[start..self.at].iter().collect();
        if name == "true" || name == "false" {
            return Kind::Bool;
        }
        self.skip_attributes();
        Kind::Ident(name)
    }

    /// `name[max_tokens=10, ...] ::=`: a rule's attribute block, recognised (as xgrammar does)
    /// only when `::=` follows it on the line.
    fn skip_attributes(&mut self) {
        if self.peek(0) != Some('[') {
            return;
        }
        let rest = &self.chars[self.at..];
        let Some(close) = rest.iter().take_while(|c| !matches!(c, '\n' | '\r')).position(|c| *c == ']') else {
            return;
        };
        let after = rest[close + 1..].iter().skip_while(|c| matches!(c, ' ' | '\t'));
        if after.take(3).copied().eq("::=".chars()) {
            self.bump(close + 1);
        }
    }

    fn integer(&mut self) -> Result<Kind, String> {
        let mut n: u64 = 0;
        while let Some(d) = self.peek(0).and_then(|c| c.to_digit(10)) {
            n = n * 10 + d as u64;
            self.bump(1);
            if n > INTEGER_MAX {
                return self.fail("Integer is too large");
            }
        }
        Ok(Kind::Int(n))
    }

    /// The identifier before each `::=` names a rule, and must start its line.
    fn mark_rule_names(&mut self) -> Result<(), String> {
        for i in 0..self.tokens.len() {
            if self.tokens[i].kind != Kind::Assign {
                continue;
            }
            let at = |t: &Token| format!("EBNF lexer error at line {}, column {}", t.line, t.column);
            if i == 0 {
                return Err(format!("{}: Assign should not be the first token", at(&self.tokens[i])));
            }
            let Kind::Ident(name) = &self.tokens[i - 1].kind else {
                return Err(format!("{}: Assign should be preceded by an identifier", at(&self.tokens[i - 1])));
            };
            if i >= 2 && self.tokens[i - 2].line == self.tokens[i - 1].line {
                return Err(format!(
                    "{}: The rule name should be at the beginning of the line",
                    at(&self.tokens[i - 1])
                ));
            }
            self.tokens[i - 1].kind = Kind::RuleName(name.clone());
        }
        Ok(())
    }
}

/// xgrammar's built-in macros, called like functions; their arguments are not checked here.
const MACROS: [&str; 6] = ["TagDispatch", "Token", "ExcludeToken", "TokenTagDispatch", "Regex", "Substring"];

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    rules: std::collections::HashSet<&'a str>,
}

impl<'a> Parser<'a> {
    fn new(tokens: &'a [Token]) -> Result<Self, String> {
        let mut rules = std::collections::HashSet::new();
        for t in tokens {
            if let Kind::RuleName(name) = &t.kind {
                if !rules.insert(name.as_str()) {
                    return Err(Self::error_at(t, &format!("Rule \"{name}\" is defined multiple times")));
                }
            }
        }
        if !rules.contains("root") {
            return Err(Self::error_at(&tokens[0], "The root rule with name \"root\" is not found"));
        }
        Ok(Parser { tokens, at: 0, rules })
    }

    fn error_at(t: &Token, message: &str) -> String {
        format!("EBNF parser error at line {}, column {}: {message}", t.line, t.column)
    }

    fn peek(&self, ahead: usize) -> &'a Kind {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.at + ahead).min(last)].kind
    }

    fn fail<T>(&self, message: &str) -> Result<T, String> {
        Err(Self::error_at(&self.tokens[self.at.min(self.tokens.len() - 1)], message))
    }

    fn expect(&mut self, kind: Kind, message: &str) -> Result<(), String> {
        if *self.peek(0) != kind {
            return self.fail(message);
        }
        self.at += 1;
        Ok(())
    }

    fn run(mut self) -> Result<(), String> {
        while *self.peek(0) != Kind::Eof {
            if !matches!(self.peek(0), Kind::RuleName(_)) {
                return self.fail("Expect rule name");
            }
            self.at += 1;
            self.expect(Kind::Assign, "Expect ::=")?;
            self.choices(0)?;
            if *self.peek(0) == Kind::Lookahead {
                self.at += 1;
                self.choices(0)?;
                self.expect(Kind::RParen, "Expect )")?;
            }
        }
        Ok(())
    }

    fn choices(&mut self, depth: usize) -> Result<(), String> {
        loop {
            // A sequence: at least one element, up to `|`, `)`, `(=`, the next rule or the end.
            loop {
                self.element(depth)?;
                self.quantifier()?;
                if matches!(self.peek(0), Kind::Pipe | Kind::RParen | Kind::Lookahead | Kind::RuleName(_) | Kind::Eof) {
                    break;
                }
            }
            if *self.peek(0) != Kind::Pipe {
                return Ok(());
            }
            self.at += 1;
        }
    }

    fn element(&mut self, depth: usize) -> Result<(), String> {
        match self.peek(0) {
            Kind::LParen => {
                if depth + 1 > limits::constraint_grammar_nesting_max {
                    return self.fail("Nest layer exceeded the maximum limit");
                }
                self.at += 1;
                if *self.peek(0) == Kind::RParen {
                    self.at += 1;
                    return Ok(());
                }
                self.choices(depth + 1)?;
                self.expect(Kind::RParen, "Expect )")
            }
            Kind::Class | Kind::Str => {
                self.at += 1;
                Ok(())
            }
            Kind::Ident(name) if MACROS.contains(&name.as_str()) => {
                self.at += 1;
                self.skip_macro_arguments()
            }
            Kind::Ident(name) => {
                if !self.rules.contains(name.as_str()) {
                    return self.fail(&format!("Rule \"{name}\" is not defined"));
                }
                self.at += 1;
                Ok(())
            }
            _ => self.fail("Expect element"),
        }
    }

    fn skip_macro_arguments(&mut self) -> Result<(), String> {
        self.expect(Kind::LParen, "Expect ( after macro function name")?;
        let mut open = 1usize;
        while open > 0 {
            match self.peek(0) {
                Kind::LParen | Kind::Lookahead => open += 1,
                Kind::RParen => open -= 1,
                Kind::Eof | Kind::RuleName(_) => return self.fail("Expect , or ) in macro arguments"),
                _ => {}
            }
            self.at += 1;
        }
        Ok(())
    }

    fn quantifier(&mut self) -> Result<(), String> {
        match self.peek(0) {
            Kind::Star | Kind::Plus | Kind::Question => {
                self.at += 1;
                Ok(())
            }
            Kind::LBrace => {
                self.at += 1;
                let Kind::Int(lower) = *self.peek(0) else { return self.fail("Expect integer") };
                self.at += 1;
                match self.peek(0) {
                    Kind::RBrace => {}
                    Kind::Comma => {
                        self.at += 1;
                        match self.peek(0) {
                            Kind::RBrace => {}
                            Kind::Ident(n) if n == "-1" => self.at += 1,
                            Kind::Int(upper) if *upper < lower => {
                                return self.fail("Lower bound is larger than upper bound")
                            }
                            Kind::Int(_) => self.at += 1,
                            _ => return self.fail("Expect integer"),
                        }
                    }
                    _ => return self.fail("Expect ',' or '}' in repetition range"),
                }
                self.expect(Kind::RBrace, "Expect }")
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn accepts_gbnf_and_refuses_broken_grammars() {
        let ok = [
            r#"root ::= "a" | "b""#,
            "root ::= item+ \"!\"?\nitem ::= [a-z0-9_-] | \"\\n\" | \"\\u00e9\"",
            "# a comment\nroot ::= (\"x\" | ()) {2,5} tail{3}\ntail ::= [^\"\\\\] # trailing\n",
            "root ::= a (= \"b\")\na ::= \"a\"{1,}",
            "root ::= \"\" | [\\-\\]]",
            r#"root ::= TagDispatch(("<t>", body), loop_after_dispatch=true)
body ::= "x""#,
            "root[max_tokens=10] ::= \"a\"",
            "root ::= \"a\"\n  \"b\"",
            "root ::= \"a\"{2,-1}",
        ];
        for g in ok {
            assert_eq!(check(g), Ok(()), "{g}");
        }
        let bad = [
            ("root ::= (((", "Expect element"),
            ("root ::= (\"a\"", "Expect )"),
            ("root ::= ", "Expect element"),
            ("root ::= \"a\" |", "Expect element"),
            ("root ::= other", "Rule \"other\" is not defined"),
            ("start ::= \"a\"", "root rule"),
            ("root ::= \"a\"\nroot ::= \"b\"", "defined multiple times"),
            ("root ::= \"a", "Expect \" in string literal"),
            ("root ::= \"\\q\"", "Invalid escape"),
            ("root ::= [z-a]", "lower bound is larger"),
            ("root ::= [a-z", "Unterminated character class"),
            ("root ::= [\\d]", "Character class escape"),
            ("root ::= \"a\"{3,1}", "Lower bound is larger"),
            ("root ::= \"a\"{x}", "Expect integer"),
            ("root ::= \"a\" ; b", "Unexpected character: ;"),
            ("root ::= \"a\" a ::= \"b\"", "beginning of the line"),
            ("::= \"a\"", "first token"),
            ("root ::= * \"a\"", "Expect element"),
            ("\"a\" ::= \"b\"", "preceded by an identifier"),
            ("root ::= \"a\" +5", "Expect element"),
            ("root ::= \"a\"{1000000000000001}", "Integer is too large"),
        ];
        for (g, want) in bad {
            let err = check(g).expect_err(g);
            assert!(err.contains(want), "{g}: {err}");
        }
        let deep = format!("root ::= {}\"a\"{}", "(".repeat(1500), ")".repeat(1500));
        assert!(check(&deep).unwrap_err().contains("Nest layer"));
    }
}
