//! Which shape a chat template reads `message.content` in, decided the way vLLM decides it
//! (`_detect_content_format`): a template that loops over a message's content reads it as a
//! list of parts (`openai`: `{"type": "text", "text": ...}`, `{"type": "image"}`), any other as
//! a string (text parts joined, media as placeholder text). The test is syntactic, on the
//! parsed template, so it must see what vLLM sees: the loops over `messages` (or a variable
//! assigned from it, sliced, filtered or tested), and inside them a loop over the loop
//! variable's `content`, a macro parameter that receives it, or a bare `content` outside
//! macros. A template that does not parse, or uses a construct vLLM's walk rejects (a tuple
//! target where a name is expected), is `string`, vLLM's fallback.

use std::collections::HashSet;

use minijinja::machinery::ast::{CallArg, Expr, ForLoop, Macro, Stmt};

/// The two content formats (`--chat-template-content-format`'s values besides `auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentFormat {
    String,
    OpenAi,
}

impl ContentFormat {
    /// The flag's spelling (`auto` is the absence of a format).
    pub fn parse(name: &str) -> Option<ContentFormat> {
        match name {
            "string" => Some(ContentFormat::String),
            "openai" => Some(ContentFormat::OpenAi),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ContentFormat::String => "string",
            ContentFormat::OpenAi => "openai",
        }
    }
}

/// The format `source` reads content in.
pub fn detect(source: &str) -> ContentFormat {
    let source = super::strip_generation_tags(source);
    let Ok(root) = minijinja::machinery::parse(&source, "chat", Default::default()) else {
        return ContentFormat::String;
    };
    let mut nodes = Nodes::default();
    nodes.stmt(&root, false);
    match nodes.loops_over_content() {
        Ok(true) => ContentFormat::OpenAi,
        Ok(false) | Err(Unsupported) => ContentFormat::String,
    }
}

/// A construct vLLM's walk asserts against (and so falls back to `string` on).
struct Unsupported;

/// The statements and expressions the test reads, collected from the whole template.
#[derive(Default)]
struct Nodes<'t, 's> {
    /// `{% set target = value %}`: the target's name, if it is a plain name.
    assigns: Vec<(Option<&'s str>, &'t Expr<'s>)>,
    /// Every loop, and whether it is inside a macro.
    loops: Vec<(&'t ForLoop<'s>, bool)>,
    macros: Vec<&'t Macro<'s>>,
    /// Calls of a plain name (a macro call): the name and the arguments.
    calls: Vec<(&'s str, &'t [CallArg<'s>])>,
}

impl<'t, 's> Nodes<'t, 's> {
    fn stmt(&mut self, stmt: &'t Stmt<'s>, in_macro: bool) {
        let body = |n: &mut Self, stmts: &'t [Stmt<'s>], in_macro| stmts.iter().for_each(|s| n.stmt(s, in_macro));
        match stmt {
            Stmt::Template(t) => body(self, &t.children, in_macro),
            Stmt::EmitExpr(e) => self.expr(&e.expr),
            Stmt::ForLoop(f) => {
                self.loops.push((f, in_macro));
                self.expr(&f.iter);
                f.filter_expr.iter().for_each(|e| self.expr(e));
                body(self, &f.body, in_macro);
                body(self, &f.else_body, in_macro);
            }
            Stmt::IfCond(c) => {
                self.expr(&c.expr);
                body(self, &c.true_body, in_macro);
                body(self, &c.false_body, in_macro);
            }
            Stmt::WithBlock(w) => {
                w.assignments.iter().for_each(|(_, value)| self.expr(value));
                body(self, &w.body, in_macro);
            }
            Stmt::Set(s) => {
                let name = match &s.target {
                    Expr::Var(v) => Some(v.id),
                    _ => None,
                };
                self.assigns.push((name, &s.expr));
                self.expr(&s.expr);
            }
            Stmt::SetBlock(s) => body(self, &s.body, in_macro),
            Stmt::AutoEscape(a) => body(self, &a.body, in_macro),
            Stmt::FilterBlock(f) => body(self, &f.body, in_macro),
            Stmt::Block(b) => body(self, &b.body, in_macro),
            Stmt::Macro(m) => {
                self.macros.push(m);
                m.defaults.iter().for_each(|e| self.expr(e));
                body(self, &m.body, true);
            }
            Stmt::CallBlock(c) => {
                self.call(&c.call.expr, &c.call.args);
                body(self, &c.macro_decl.body, true);
            }
            Stmt::Do(d) => self.call(&d.call.expr, &d.call.args),
            Stmt::EmitRaw(_)
            | Stmt::Import(_)
            | Stmt::FromImport(_)
            | Stmt::Extends(_)
            | Stmt::Include(_)
            | Stmt::Continue(_)
            | Stmt::Break(_) => {}
        }
    }

    fn call(&mut self, callee: &'t Expr<'s>, args: &'t [CallArg<'s>]) {
        if let Expr::Var(v) = callee {
            self.calls.push((v.id, args));
        }
        self.expr(callee);
        self.args(args);
    }

    fn args(&mut self, args: &'t [CallArg<'s>]) {
        for arg in args {
            match arg {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn expr(&mut self, expr: &'t Expr<'s>) {
        let mut each = |items: &'t [Expr<'s>]| items.iter().for_each(|e| self.expr(e));
        match expr {
            Expr::Var(_) | Expr::Const(_) => {}
            Expr::Slice(s) => {
                self.expr(&s.expr);
                [&s.start, &s.stop, &s.step].into_iter().flatten().for_each(|e| self.expr(e));
            }
            Expr::UnaryOp(u) => self.expr(&u.expr),
            Expr::BinOp(b) => {
                self.expr(&b.left);
                self.expr(&b.right);
            }
            Expr::Compare(c) => {
                self.expr(&c.expr);
                c.ops.iter().for_each(|op| self.expr(&op.expr));
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                i.false_expr.iter().for_each(|e| self.expr(e));
            }
            Expr::Filter(f) => {
                f.expr.iter().for_each(|e| self.expr(e));
                self.args(&f.args);
            }
            Expr::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            Expr::GetAttr(g) => self.expr(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            Expr::Call(c) => self.call(&c.expr, &c.args),
            Expr::List(l) => each(&l.items),
            Expr::Tuple(t) => each(&t.items),
            Expr::Map(m) => {
                each(&m.keys);
                each(&m.values);
            }
        }
    }

    /// vLLM's `_iter_nodes_assign_var_or_elems(root, "messages")`: `messages` and every name
    /// assigned from it, transitively.
    fn messages_names(&self) -> Result<Vec<&'s str>, Unsupported> {
        let mut names = vec!["messages"];
        let mut seen: HashSet<&str> = names.iter().copied().collect();
        let mut next = 0;
        while let Some(&related) = names.get(next) {
            next += 1;
            for (lhs, rhs) in &self.assigns {
                if elems_access(rhs, related, None) {
                    let lhs = lhs.ok_or(Unsupported)?;
                    if seen.insert(lhs) {
                        names.push(lhs);
                    }
                }
            }
        }
        Ok(names)
    }

    /// The loop variables of the loops over messages.
    fn message_names(&self) -> Result<Vec<&'s str>, Unsupported> {
        let messages = self.messages_names()?;
        let mut out = Vec::new();
        for (l, _) in &self.loops {
            if messages.iter().any(|m| elems_access(&l.iter, m, None)) {
                out.push(loop_name(l)?);
            }
        }
        Ok(out)
    }

    /// Whether some loop iterates over a message's content.
    fn loops_over_content(&self) -> Result<bool, Unsupported> {
        let messages = self.message_names()?;
        let is_content = |e: &Expr<'s>| messages.iter().any(|m| elems_access(e, m, Some("content")));
        for (l, in_macro) in &self.loops {
            if is_content(&l.iter) {
                loop_name(l)?;
                return Ok(true);
            }
            let Expr::Var(iter) = &l.iter else { continue };
            let content_param = self
                .macros
                .iter()
                .filter(|m| contains_loop(m, l))
                .any(|m| self.content_params(m, &is_content).contains(iter.id));
            if content_param || (!in_macro && iter.id == "content") {
                loop_name(l)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The parameters of `m` that some call of it passes a message's content to.
    fn content_params(&self, m: &Macro<'s>, is_content: &dyn Fn(&Expr<'s>) -> bool) -> HashSet<&'s str> {
        let params: Vec<&str> =
            m.args.iter().filter_map(|a| if let Expr::Var(v) = a { Some(v.id) } else { None }).collect();
        let mut out = HashSet::new();
        for (_, args) in self.calls.iter().filter(|(name, _)| *name == m.name) {
            let positional = args.iter().filter_map(|a| if let CallArg::Pos(e) = a { Some(e) } else { None });
            for (param, arg) in params.iter().zip(positional) {
                if is_content(arg) {
                    out.insert(*param);
                }
            }
            for arg in args.iter() {
                if let CallArg::Kwarg(key, value) = arg {
                    if params.contains(key) && is_content(value) {
                        out.insert(*key);
                    }
                }
            }
        }
        out
    }
}

/// vLLM's `_is_var_or_elems_access`: `name` (or `name.key` / `name['key']`), possibly sliced,
/// filtered or tested.
fn elems_access(e: &Expr<'_>, name: &str, key: Option<&str>) -> bool {
    match e {
        Expr::Filter(f) => f.expr.as_ref().is_some_and(|inner| elems_access(inner, name, key)),
        Expr::Test(t) => elems_access(&t.expr, name, key),
        Expr::Slice(s) => elems_access(&s.expr, name, key),
        _ => match key {
            None => is_var(e, name),
            Some(key) => match e {
                Expr::GetAttr(g) => g.name == key && is_var(&g.expr, name),
                Expr::GetItem(g) => {
                    let is_key = matches!(&g.subscript_expr, Expr::Const(c) if c.value.as_str() == Some(key));
                    is_key && is_var(&g.expr, name)
                }
                _ => false,
            },
        },
    }
}

fn is_var(e: &Expr<'_>, name: &str) -> bool {
    matches!(e, Expr::Var(v) if v.id == name)
}

/// A loop's target, which vLLM's walk requires to be a plain name.
fn loop_name<'s>(l: &ForLoop<'s>) -> Result<&'s str, Unsupported> {
    match &l.target {
        Expr::Var(v) => Ok(v.id),
        _ => Err(Unsupported),
    }
}

/// Whether `l` lies in the body of `m` (at any depth).
fn contains_loop(m: &Macro<'_>, l: &ForLoop<'_>) -> bool {
    let mut nodes = Nodes::default();
    m.body.iter().for_each(|s| nodes.stmt(s, true));
    nodes.loops.iter().any(|(inner, _)| std::ptr::eq(*inner, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_vllm_detects_them() {
        let cases = [
            ("plain string content", "{% for m in messages %}{{ m['content'] }}{% endfor %}", ContentFormat::String),
            (
                "a loop over each message's content (Qwen2-VL)",
                "{% for message in messages %}{% if message['content'] is string %}{{ message['content'] }}\
                 {% else %}{% for content in message['content'] %}{{ content['type'] }}{% endfor %}{% endif %}\
                 {% endfor %}",
                ContentFormat::OpenAi,
            ),
            (
                "through an assigned, sliced copy of messages and an attribute",
                "{% set loop_messages = messages[1:] %}{% for m in loop_messages %}\
                 {% for part in m.content %}{{ part.text }}{% endfor %}{% endfor %}",
                ContentFormat::OpenAi,
            ),
            (
                "a filtered content",
                "{% for m in messages %}{% for p in m.content | selectattr('type', 'eq', 'text') %}{{ p.text }}\
                 {% endfor %}{% endfor %}",
                ContentFormat::OpenAi,
            ),
            (
                "content passed to a macro parameter of another name",
                "{% macro render(parts) %}{% for p in parts %}{{ p.type }}{% endfor %}{% endmacro %}\
                 {% for m in messages %}{{ render(m['content']) }}{% endfor %}",
                ContentFormat::OpenAi,
            ),
            (
                "by keyword",
                "{% macro render(x, parts) %}{% for p in parts %}{{ p }}{% endfor %}{% endmacro %}\
                 {% for m in messages %}{{ render(1, parts=m.content) }}{% endfor %}",
                ContentFormat::OpenAi,
            ),
            (
                "a macro looping over something else",
                "{% macro render(parts) %}{% for p in parts %}{{ p }}{% endfor %}{% endmacro %}\
                 {% for m in messages %}{{ render(m.tool_calls) }}{{ m.content }}{% endfor %}",
                ContentFormat::String,
            ),
            (
                "a bare `content` loop outside macros",
                "{% for m in messages %}{% set content = m.content %}{% for c in content %}{{ c }}{% endfor %}\
                 {% endfor %}",
                ContentFormat::OpenAi,
            ),
            (
                "a bare `content` loop inside a macro nobody passes content to",
                "{% macro f(content) %}{% for c in content %}{{ c }}{% endfor %}{% endmacro %}\
                 {% for m in messages %}{{ m.content }}{% endfor %}",
                ContentFormat::String,
            ),
            (
                "a loop over the messages' tool calls only",
                "{% for m in messages %}{% for t in m.tool_calls %}{{ t.name }}{% endfor %}{% endfor %}",
                ContentFormat::String,
            ),
            (
                "a tuple target where vLLM wants a name (its fallback)",
                "{% for m in messages %}{% for a, b in m.content %}{{ a }}{% endfor %}{% endfor %}",
                ContentFormat::String,
            ),
            ("a template that does not parse", "{% for m in messages %}", ContentFormat::String),
        ];
        for (what, source, want) in cases {
            assert_eq!(detect(source), want, "{what}");
        }
    }

    #[test]
    fn flag_values() {
        for f in [ContentFormat::String, ContentFormat::OpenAi] {
            assert_eq!(ContentFormat::parse(f.name()), Some(f));
        }
        assert_eq!(ContentFormat::parse("auto"), None);
    }
}
