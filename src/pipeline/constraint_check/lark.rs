//! Grammars in Lark syntax. vLLM sends a grammar without any `::=` line to xgrammar's Lark
//! reader, which starts from the rule `start`; this refuses only a grammar that defines none
//! (which no Lark grammar can do without) and leaves the rest of the syntax to the engine.

/// vLLM's test: no line (comments removed) holds `::=`.
pub fn is_lark(grammar: &str) -> bool {
    grammar.split('\n').all(|line| {
        let code = match (line.find('#'), line.find("//")) {
            (Some(a), Some(b)) => &line[..a.min(b)],
            (Some(a), None) | (None, Some(a)) => &line[..a],
            (None, None) => line,
        };
        !code.contains("::=")
    })
}

pub fn check(grammar: &str) -> Result<(), String> {
    let defines_start = grammar.lines().any(|line| {
        let rest = line.trim_start().trim_start_matches(['?', '!']);
        rest.strip_prefix("start").is_some_and(|after| {
            // `start:` or `start.2:` (a priority), never `starting:`.
            let after = after.trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
            after.trim_start().starts_with(':')
        })
    });
    if defines_start {
        Ok(())
    } else {
        Err("a Lark grammar needs a rule named 'start'".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lark_needs_a_start_rule() {
        assert!(is_lark("start: \"a\""));
        assert!(is_lark("start: x # root ::= y"));
        assert!(!is_lark("root ::= \"a\""));
        for ok in ["start: \"a\"", "?start: a\na: \"x\""] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in ["((((", "starting: \"a\"", "a: \"b\""] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
