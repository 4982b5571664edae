//! Whether xgrammar can turn a JSON schema into a grammar. xgrammar reads each schema by its
//! first keyword of `$ref`, `const`, `enum`, `anyOf`, `oneOf`, `allOf`, `type`, then object or
//! array keywords (so `{"enum": [1], "type": "nope"}` is fine), and refuses: a schema that is
//! not an object or `true`, an unknown `type`, a `$ref` that is not a string or points nowhere
//! (only `#` and `#/...` pointers are followed; other URIs match anything), keywords of the
//! wrong JSON type, and empty ranges (`minLength` over `maxLength` and kin). Unknown keywords
//! and unsupported ones (`not`, `if`, ...) are ignored there, so here too.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::limits;

type Checked = Result<(), String>;

/// Checks `schema` (already bounded in depth by the caller).
pub fn check(schema: &Value) -> Checked {
    let mut c = Checker { root: schema, followed: HashSet::new(), pending: Vec::new(), visits: 0 };
    c.node(schema)?;
    while let Some(target) = c.pending.pop() {
        c.node(target)?;
    }
    Ok(())
}

struct Checker<'a> {
    root: &'a Value,
    /// `$ref` targets already queued, by address: each is walked once.
    followed: HashSet<*const Value>,
    pending: Vec<&'a Value>,
    visits: usize,
}

fn is_int(v: &Value) -> bool {
    v.is_i64() || v.is_u64()
}

impl<'a> Checker<'a> {
    fn node(&mut self, v: &'a Value) -> Checked {
        self.visits += 1;
        if self.visits > limits::constraint_schema_nodes_max {
            return Err(format!("the schema has more than {} subschemas", limits::constraint_schema_nodes_max));
        }
        let o = match v {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err("Schema 'false' cannot accept any value".into()),
            Value::Object(o) => o,
            other => {
                let shown: String = other.to_string().chars().take(80).collect();
                return Err(format!("Schema should be an object or bool, but got {shown}"));
            }
        };
        if let Some(r) = o.get("$ref") {
            return self.reference(r);
        }
        if o.contains_key("const") {
            return Ok(());
        }
        if let Some(e) = o.get("enum") {
            return match e.as_array() {
                None => Err("enum must be an array".into()),
                Some(a) if a.is_empty() => Err("enum array must not be empty".into()),
                Some(_) => Ok(()),
            };
        }
        for keyword in ["anyOf", "oneOf", "allOf"] {
            if let Some(list) = o.get(keyword) {
                let list = list.as_array().ok_or_else(|| format!("{keyword} must be an array"))?;
                return list.iter().try_for_each(|s| self.node(s));
            }
        }
        match o.get("type") {
            Some(Value::String(t)) => self.typed(o, t),
            Some(Value::Array(types)) => types.iter().try_for_each(|t| match t.as_str() {
                Some(t) => self.typed(o, t),
                None => Err("type must be a string or an array of strings".into()),
            }),
            Some(_) => Err("Type should be a string".into()),
            None if ["properties", "additionalProperties", "unevaluatedProperties"]
                .iter()
                .any(|k| o.contains_key(*k)) =>
            {
                self.object(o)
            }
            None if ["items", "prefixItems", "unevaluatedItems"].iter().any(|k| o.contains_key(*k)) => self.array(o),
            None => Ok(()),
        }
    }

    fn reference(&mut self, r: &Value) -> Checked {
        let uri = r.as_str().ok_or("$ref must be a string")?;
        let target = if uri == "#" {
            self.root
        } else if let Some(path) = uri.strip_prefix("#/") {
            let mut at = self.root;
            for part in path.split('/').filter(|p| !p.is_empty()) {
                at = at
                    .as_object()
                    .and_then(|o| o.get(part))
                    .ok_or_else(|| format!("Cannot find field {part} in {uri}"))?;
            }
            at
        } else {
            // xgrammar warns and lets such a reference match any value.
            return Ok(());
        };
        if self.followed.insert(target as *const Value) {
            self.pending.push(target);
        }
        Ok(())
    }

    fn typed(&mut self, o: &'a Map<String, Value>, t: &str) -> Checked {
        match t {
            "integer" => bounds(o, true),
            "number" => bounds(o, false),
            "string" => LENGTHS.check(o),
            "boolean" | "null" => Ok(()),
            "array" => self.array(o),
            "object" => self.object(o),
            other => Err(format!("Unsupported type \"{other}\"")),
        }
    }

    fn array(&mut self, o: &'a Map<String, Value>) -> Checked {
        if let Some(p) = o.get("prefixItems") {
            let items = p.as_array().ok_or("prefixItems must be an array")?;
            for item in items {
                match item {
                    Value::Bool(false) => return Err("prefixItems contains false".into()),
                    Value::Bool(true) | Value::Object(_) => self.node(item)?,
                    _ => return Err("prefixItems must be an array of objects or booleans".into()),
                }
            }
        }
        self.subschema(o, "items")?;
        self.subschema(o, "unevaluatedItems")?;
        ITEMS.check(o)
    }

    fn object(&mut self, o: &'a Map<String, Value>) -> Checked {
        if let Some(p) = o.get("properties") {
            let props = p.as_object().ok_or("properties must be an object")?;
            props.values().try_for_each(|s| self.node(s))?;
        }
        let required = match o.get("required") {
            None => 0,
            Some(Value::Array(r)) if r.iter().all(Value::is_string) => r.len(),
            Some(Value::Array(_)) => return Err("required must be an array of strings".into()),
            Some(_) => return Err("required must be an array".into()),
        };
        if let Some(p) = o.get("patternProperties") {
            let props = p.as_object().ok_or("patternProperties must be an object")?;
            props.values().try_for_each(|s| self.node(s))?;
        }
        if let Some(names) = o.get("propertyNames") {
            if !names.is_object() {
                return Err("propertyNames must be an object".into());
            }
            self.node(names)?;
        }
        self.subschema(o, "additionalProperties")?;
        self.subschema(o, "unevaluatedProperties")?;
        PROPERTIES.check(o)?;
        match o.get("maxProperties").and_then(Value::as_u64) {
            Some(max) if (max as usize) < required => {
                Err(format!("maxProperties is less than the number of required properties: {max} < {required}"))
            }
            _ => Ok(()),
        }
    }

    /// A keyword that holds a boolean or a schema (`false` is fine here: it forbids extras).
    fn subschema(&mut self, o: &'a Map<String, Value>, key: &str) -> Checked {
        match o.get(key) {
            None | Some(Value::Bool(_)) => Ok(()),
            Some(s @ Value::Object(_)) => self.node(s),
            Some(_) => Err(format!("{key} must be a boolean or an object")),
        }
    }
}

/// `minimum`/`maximum` and their exclusive forms: numbers (whole ones for integers) that leave
/// some value in range.
fn bounds(o: &Map<String, Value>, integer: bool) -> Checked {
    let mut low = f64::NEG_INFINITY;
    let mut high = f64::INFINITY;
    let mut open = false;
    for (key, is_low, exclusive) in [
        ("minimum", true, false),
        ("exclusiveMinimum", true, true),
        ("maximum", false, false),
        ("exclusiveMaximum", false, true),
    ] {
        let Some(v) = o.get(key) else { continue };
        let x = v.as_f64().ok_or("Value must be a number")?;
        if integer && x.fract() != 0.0 {
            return Err("Integer constraint must be a whole number".into());
        }
        // xgrammar holds integer bounds as i64 (2^63 itself is past it).
        if integer && !(-9.223372036854775e18..9.223372036854775e18).contains(&x) {
            return Err("Integer exceeds the 64-bit limit".into());
        }
        // For integers an exclusive bound is the next whole number in.
        let (x, strict) = match (integer, exclusive) {
            (true, true) if is_low => (x + 1.0, false),
            (true, true) => (x - 1.0, false),
            (_, strict) => (x, strict),
        };
        if is_low && x >= low {
            low = x;
            open |= strict;
        } else if !is_low && x <= high {
            high = x;
            open |= strict;
        }
    }
    if let Some(m) = o.get("multipleOf") {
        if !m.as_f64().is_some_and(|m| m > 0.0) {
            return Err("multipleOf must be greater than 0".into());
        }
    }
    if low > high || (open && low == high) {
        return Err(
            if integer { "Invalid range: minimum greater than maximum" } else { "Invalid range: empty range" }.into()
        );
    }
    Ok(())
}

/// How xgrammar bounds a `min*` / `max*` pair of counts (both whole JSON integers, min <= max).
struct Counts {
    min: &'static str,
    max: &'static str,
    /// The least value `min` may take, if any.
    min_floor: Option<i64>,
    /// The least value `max` may take, if any.
    max_floor: Option<i64>,
}

const I32_MAX: i64 = i32::MAX as i64;

impl Counts {
    fn check(&self, o: &Map<String, Value>) -> Checked {
        let count = |key: &str| -> Result<Option<i64>, String> {
            match o.get(key) {
                None => Ok(None),
                Some(v) if is_int(v) => Ok(Some(v.as_i64().unwrap_or(i64::MAX))),
                Some(_) => Err(format!("{key} must be an integer")),
            }
        };
        let (low, high) = (count(self.min)?, count(self.max)?);
        if low.is_some_and(|l| l > I32_MAX || self.min_floor.is_some_and(|f| l < f)) {
            return Err(format!("{} must be a non-negative integer not exceeding {I32_MAX}", self.min));
        }
        if high.is_some_and(|h| self.max_floor.is_some_and(|f| h < f)) {
            return Err(format!("{} must be a non-negative integer", self.max));
        }
        match (low, high) {
            (Some(l), Some(h)) if l > h => Err(format!("{} {l} is greater than {} {h}", self.min, self.max)),
            _ => Ok(()),
        }
    }
}

const LENGTHS: Counts = Counts { min: "minLength", max: "maxLength", min_floor: None, max_floor: None };
const ITEMS: Counts = Counts { min: "minItems", max: "maxItems", min_floor: None, max_floor: Some(0) };
const PROPERTIES: Counts =
    Counts { min: "minProperties", max: "maxProperties", min_floor: Some(0), max_floor: Some(0) };

#[cfg(test)]
mod tests {
    use super::check;
    use serde_json::json;

    #[test]
    fn refuses_what_xgrammar_cannot_compile() {
        let ok = [
            json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]}),
            json!(true),
            json!({}),
            json!({"enum": [1, 2], "type": "nope"}),
            json!({"$ref": "#/$defs/a", "$defs": {"a": {"type": "string", "minLength": 1, "maxLength": 3}}}),
            json!({"type": "object", "properties": {"next": {"$ref": "#"}}}),
            json!({"$ref": "https://example.com/schema"}),
            json!({"type": ["string", "null"]}),
            json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]}),
            json!({"type": "object", "additionalProperties": false, "not": {"type": "string"}}),
            json!({"type": "integer", "exclusiveMinimum": 1, "maximum": 2}),
            json!({"type": []}),
            json!({"$defs": {"x": {"type": "bad"}}, "type": "string"}),
            json!({"type": "string", "minLength": -1, "maxLength": 3_000_000_000u64}),
            json!({"type": "array", "minItems": -1}),
        ];
        for s in ok {
            assert_eq!(check(&s), Ok(()), "{s}");
        }
        let bad = [
            (json!(false), "Schema 'false'"),
            (json!([1]), "Schema should be an object or bool"),
            (json!({"type": "foo"}), "Unsupported type \"foo\""),
            (json!({"type": 3}), "Type should be a string"),
            (json!({"type": ["string", "bar"]}), "Unsupported type \"bar\""),
            (json!({"$ref": "#/$defs/missing"}), "Cannot find field $defs"),
            (json!({"$ref": 1}), "$ref must be a string"),
            (json!({"properties": {"a": {"$ref": "#/definitions/x"}}, "definitions": {}}), "Cannot find field x"),
            (json!({"enum": []}), "enum array must not be empty"),
            (json!({"anyOf": {}}), "anyOf must be an array"),
            (json!({"type": "object", "properties": {"a": {"type": "nope"}}}), "Unsupported type"),
            (json!({"type": "object", "properties": []}), "properties must be an object"),
            (json!({"type": "object", "required": "a"}), "required must be an array"),
            (json!({"type": "array", "items": {"type": "x"}}), "Unsupported type"),
            (json!({"type": "array", "items": 3}), "items must be a boolean or an object"),
            (json!({"type": "array", "minItems": 3, "maxItems": 1}), "minItems 3 is greater than maxItems 1"),
            (json!({"type": "string", "minLength": 5, "maxLength": 2}), "minLength"),
            (json!({"type": "string", "minLength": "2"}), "minLength must be an integer"),
            (json!({"type": "integer", "minimum": 5, "maximum": 1}), "Invalid range"),
            (json!({"type": "integer", "minimum": 1.5}), "whole number"),
            (json!({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1}), "Invalid range"),
            (json!({"type": "number", "minimum": "a"}), "Value must be a number"),
            (json!({"type": "object", "properties": {"a": 1}}), "Schema should be an object or bool"),
            (json!({"type": "object", "required": [1]}), "required must be an array of strings"),
            (json!({"type": "string", "minLength": 2.0}), "minLength must be an integer"),
            (json!({"type": "array", "minItems": 3_000_000_000u64}), "minItems must be"),
            (json!({"type": "array", "maxItems": -1}), "maxItems must be a non-negative"),
            (json!({"type": "object", "minProperties": -1}), "minProperties must be a non-negative"),
            (json!({"type": "integer", "minimum": 1e30}), "64-bit"),
        ];
        for (s, want) in bad {
            let err = check(&s).expect_err(&s.to_string());
            assert!(err.contains(want), "{s}: {err}");
        }
    }
}
