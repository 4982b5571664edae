//! MiniMax-M3 invoke bodies: parameters are XML elements whose tags carry
//! the `]<]minimax[>[` namespace marker and may nest to build objects and
//! arrays:
//!
//! ```text
//! ]<]minimax[>[<city>Paris]<]minimax[>[</city>
//! ]<]minimax[>[<tags>]<]minimax[>[<item>a]<]minimax[>[</item>]<]minimax[>[</tags>
//! ```
//!
//! Types come from the tool schema (composition keywords included). An
//! element with no content under an array or object schema is `[]` / `{}`.
//! A missing closing tag is recovered: the element closes where an enclosing
//! element does (or at the end of the body), and `<name/>` is an empty
//! element. Text mixed with child elements is kept under `"$text"`.

use serde_json::{Map, Value};

use super::markup::decode_entities;
use super::schema::{self, ValueType};
use crate::limits;

pub(crate) const NAMESPACE: &str = "]<]minimax[>[";
const MIXED_TEXT_KEY: &str = "$text";

enum Node {
    Text(String),
    Elements(Vec<(String, Node)>),
}

struct Element {
    name: String,
    text: String,
    children: Vec<(String, Node)>,
}

impl Element {
    fn new(name: &str) -> Self {
        Self { name: name.to_string(), text: String::new(), children: Vec::new() }
    }

    fn into_node(mut self) -> (String, Node) {
        if self.children.is_empty() {
            return (self.name, Node::Text(self.text));
        }
        if !self.text.trim().is_empty() {
            let mut key = MIXED_TEXT_KEY.to_string();
            while self.children.iter().any(|(name, _)| *name == key) {
                key.insert(0, '$');
            }
            self.children.push((key, Node::Text(self.text)));
        }
        (self.name, Node::Elements(self.children))
    }
}

/// The arguments object of one invoke body.
pub(crate) fn arguments(body: &str, parameters: Option<&Value>) -> Map<String, Value> {
    let Node::Elements(children) = parse(body) else {
        return Map::new();
    };
    object(children, parameters)
}

fn parse(body: &str) -> Node {
    let mut stack = vec![Element::new("")];
    let mut rest = body;
    while let Some(at) = rest.find(NAMESPACE) {
        push_text(&mut stack, &rest[..at]);
        rest = &rest[at + NAMESPACE.len()..];
        let Some((tag, after)) = tag_name(rest) else {
            push_text(&mut stack, NAMESPACE);
            continue;
        };
        rest = after;
        if let Some(name) = tag.strip_prefix('/') {
            close(&mut stack, name.trim());
        } else if let Some(name) = tag.strip_suffix('/') {
            attach(&mut stack, Element::new(name.trim()));
        } else if stack.len() > limits::tool_arguments_depth_max {
            push_text(&mut stack, NAMESPACE);
            push_text(&mut stack, &format!("<{tag}>"));
        } else {
            stack.push(Element::new(tag.trim()));
        }
    }
    push_text(&mut stack, rest);
    while stack.len() > 1 {
        if let Some(element) = stack.pop() {
            attach(&mut stack, element);
        }
    }
    let root = stack.pop().unwrap_or_else(|| Element::new(""));
    Node::Elements(root.children)
}

/// `<name>` at the start of `text`: the name and the text after `>`.
fn tag_name(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix('<')?;
    let end = inner[..floor(inner, limits::tool_tag_name_bytes_max)].find('>')?;
    let name = &inner[..end];
    (!name.trim().is_empty() && !name.contains('<')).then(|| (name, &inner[end + 1..]))
}

fn floor(text: &str, index: usize) -> usize {
    crate::stream_core::floor_char_boundary(text, index)
}

fn push_text(stack: &mut [Element], text: &str) {
    if let Some(top) = stack.last_mut() {
        top.text.push_str(text);
    }
}

fn attach(stack: &mut [Element], element: Element) {
    if let Some(parent) = stack.last_mut() {
        parent.children.push(element.into_node());
    }
}

/// Closes `name` and any element left open inside it; a close tag that
/// matches no open element is ignored.
fn close(stack: &mut Vec<Element>, name: &str) {
    let Some(depth) = stack.iter().rposition(|e| e.name == name).filter(|&d| d > 0) else {
        return;
    };
    while stack.len() > depth {
        if let Some(element) = stack.pop() {
            attach(stack, element);
        }
    }
}

fn object(children: Vec<(String, Node)>, schema_node: Option<&Value>) -> Map<String, Value> {
    let mut map = Map::new();
    for (name, child) in children {
        let value = to_json(child, schema::property(schema_node, &name));
        // Repeated names collect into an array.
        match map.get_mut(&name) {
            Some(Value::Array(items)) => items.push(value),
            Some(existing) => {
                let first = existing.take();
                *existing = Value::Array(vec![first, value]);
            }
            None => {
                map.insert(name, value);
            }
        }
    }
    map
}

fn to_json(node: Node, schema_node: Option<&Value>) -> Value {
    let value_type = schema::value_type(schema_node);
    match node {
        Node::Text(text) => {
            let text = decode_entities(&text);
            match value_type {
                ValueType::Array if text.trim().is_empty() => Value::Array(Vec::new()),
                ValueType::Object if text.trim().is_empty() => Value::Object(Map::new()),
                _ => schema::convert(&text, value_type),
            }
        }
        Node::Elements(children) if value_type == ValueType::Array => {
            let items = schema::items(schema_node);
            Value::Array(children.into_iter().map(|(_, child)| to_json(child, items)).collect())
        }
        Node::Elements(children) => Value::Object(object(children, schema_node)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns(text: &str) -> String {
        text.replace("<", &format!("{NAMESPACE}<"))
    }

    #[test]
    fn nested_values_follow_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "empty": {"type": "array"},
                "opts": {"anyOf": [{"type": "object", "properties": {"deep": {"type": "boolean"}}}]}
            }
        });
        let body = ns("<city>Paris</city><days>3</days><tags><item>a</item><item>b</item></tags><empty></empty><opts><deep>true</deep></opts>");
        assert_eq!(
            Value::Object(arguments(&body, Some(&schema))),
            json!({"city": "Paris", "days": 3, "tags": ["a", "b"], "empty": [], "opts": {"deep": true}})
        );
    }

    #[test]
    fn missing_close_tags_are_recovered() {
        let schema = json!({"properties": {"x": {"type": "object", "properties": {"list": {"type": "array"}}}}});
        let body = ns("<x><list></x><n>1</n><e/>");
        assert_eq!(Value::Object(arguments(&body, Some(&schema))), json!({"x": {"list": []}, "n": 1, "e": ""}));
    }
}
