//! `pipeline::constraint_check`: arbitrary text as a regex, an EBNF or Lark grammar, a JSON
//! schema or a structural tag (the first byte picks which).
//!
//! Oracles:
//! - No panic and no stack overflow, whatever the nesting (the checks bound their depth by
//!   `limits` before recursing).
//! - The verdict is a function of the input: checking twice gives the same answer.
//! - A refusal has vLLM's message (as the OpenAI adapter words it) and a non-empty cause for
//!   the log.

use shardgate::api::invalid::Names;
use shardgate::pipeline::constraint_check::check;
use shardgate::pipeline::invalid::{Field, Invalid, Problem};
use shardgate_wire::Constraint;

/// One input: panics (an oracle failed) or returns.
pub fn run(raw: &[u8]) {
    let Some((&kind, rest)) = raw.split_first() else { return };
    let text = String::from_utf8_lossy(rest).into_owned();
    let c = match kind % 5 {
        0 => Constraint::Regex(text),
        1 => Constraint::Grammar(text),
        2 => Constraint::Grammar(format!("root ::= {text}")),
        3 => Constraint::JsonSchema(text),
        _ => Constraint::StructuralTag(text),
    };
    let verdict = check(&c);
    assert_eq!(verdict, check(&c), "{c:?}");
    if let Err(e) = verdict {
        assert!(!e.detail().is_empty(), "{e:?}");
        let answer = Names::COMPLETIONS.invalid(Invalid::new(Field::Constraint, Problem::Unsatisfiable(e)));
        assert!(answer.status == 400 && !answer.message.is_empty(), "{answer:?}");
    }
}
