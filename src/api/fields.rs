//! Typed access to a JSON request object, with 400s that name the offending field.
//!
//! Unknown fields are ignored (clients set extra keys globally); a known field of the wrong
//! type or out of range is a 400 with `param` set to its name.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::limits;

pub struct Fields<'a> {
    members: Members<'a>,
}

fn type_error(name: &str, expected: &str, got: &Value) -> ApiError {
    let kind = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    ApiError::invalid_param(name, format!("'{name}' must be {expected}, got {kind}"))
}

/// A request body's top-level members, in the order sent.
///
/// Why not a `serde_json::Value`: its object is an `IndexMap` keyed by SipHash, and building
/// and growing that map for the dozen top-level members was a third of decoding a chat
/// request. A request reads each member a few times; a scan of a dozen keys is as fast as a
/// hashed lookup. Nested objects stay `serde_json` maps (they are small, or handed on whole),
/// and so does a top level of more than `request_listed_members_max` members.
pub struct Body {
    members: BodyMembers,
}

enum BodyMembers {
    List(Vec<(String, Value)>),
    Map(Map<String, Value>),
}

impl Body {
    /// Parses a request body that must be a JSON object.
    pub fn parse(body: &[u8]) -> Result<Body, ApiError> {
        if body.is_empty() {
            return Err(ApiError::bad_request("request body is empty; expected a JSON object"));
        }
        // sonic-rs (SIMD) parses. Into a `Value` it refuses nesting beyond 128 levels, so a
        // hostile body cannot exhaust a shard's stack; but its error for a top level of the
        // wrong type walks the value without that limit, so only an object goes to `Body`.
        let object = body.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) == Some(&b'{');
        if object {
            let TopLevel(members) = sonic_rs::from_slice(body).map_err(|e| json_error(&e))?;
            let members = if members.len() > limits::request_listed_members_max {
                BodyMembers::Map(members.into_iter().collect())
            } else {
                BodyMembers::List(members)
            };
            return Ok(Body { members });
        }
        // Not an object: valid JSON of another kind, or not JSON at all.
        match sonic_rs::from_slice::<Value>(body) {
            Ok(_) => Err(ApiError::bad_request("request body must be a JSON object")),
            Err(e) => Err(json_error(&e)),
        }
    }

    pub fn fields(&self) -> Fields<'_> {
        match &self.members {
            BodyMembers::List(list) => Fields { members: Members::List(list) },
            BodyMembers::Map(map) => Fields::new_map(map),
        }
    }

    /// The body as the object `serde_json` reads (the last of duplicate keys wins).
    pub fn to_object(&self) -> Map<String, Value> {
        match &self.members {
            BodyMembers::List(list) => list.iter().cloned().collect(),
            BodyMembers::Map(map) => map.clone(),
        }
    }
}

/// A sonic-rs error as the client's 400: its messages carry a source snippet, keep line one.
fn json_error(e: &sonic_rs::Error) -> ApiError {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("").trim();
    if first.contains("nesting") {
        ApiError::bad_request("JSON body is nested too deeply (more than 128 levels)")
    } else {
        ApiError::bad_request(format!("invalid JSON body: {first}"))
    }
}

/// The members of a top-level object (private: it must only meet a body starting with `{`).
struct TopLevel(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TopLevel, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = TopLevel;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
                let mut members =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).clamp(16, limits::request_listed_members_max));
                while let Some(member) = map.next_entry::<String, Value>()? {
                    members.push(member);
                }
                Ok(TopLevel(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Where a `Fields` reads: a body's member list, or a map (a nested object, a large body).
#[derive(Clone, Copy)]
enum Members<'a> {
    List(&'a [(String, Value)]),
    Map(&'a Map<String, Value>),
}

impl<'a> Fields<'a> {
    pub fn new_map(map: &'a Map<String, Value>) -> Self {
        Fields { members: Members::Map(map) }
    }

    /// Fields of `v`'s object (anything else reads as empty).
    pub fn new(v: &'a Value) -> Self {
        match v {
            Value::Object(map) => Fields::new_map(map),
            _ => Fields { members: Members::List(&[]) },
        }
    }

    /// The raw value, `None` when absent or null.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        let v = match self.members {
            // The last of duplicate keys wins, as in a `serde_json` map.
            Members::List(members) => members.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v),
            Members::Map(map) => map.get(name),
        };
        v.filter(|v| !v.is_null())
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(type_error(name, "a boolean", v)),
        }
    }

    pub fn f64(&self, name: &str) -> Result<Option<f64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(type_error(name, "a number", v)),
        }
    }

    /// An integer; integral floats (`2.0`) are accepted as Python clients send them.
    pub fn i64(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    return Ok(Some(i));
                }
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Ok(Some(f as i64)),
                    _ => Err(ApiError::invalid_param(
                        name,
                        format!("'{name}' must be an integer in the int64 range, got {n}"),
                    )),
                }
            }
            Some(v) => Err(type_error(name, "an integer", v)),
        }
    }

    pub fn str(&self, name: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(type_error(name, "a string", v)),
        }
    }

    pub fn object(&self, name: &str) -> Result<Option<&'a Map<String, Value>>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(v) => Err(type_error(name, "an object", v)),
        }
    }

    pub fn array(&self, name: &str) -> Result<Option<&'a Vec<Value>>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(type_error(name, "an array", v)),
        }
    }

    /// A list of integer token ids.
    pub fn ids(&self, name: &str) -> Result<Option<Vec<i64>>, ApiError> {
        let Some(items) = self.array(name)? else { return Ok(None) };
        items
            .iter()
            .map(|v| {
                v.as_i64().ok_or_else(|| ApiError::invalid_param(name, format!("'{name}' must contain only integers")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A string or a list of strings (`stop`, `bad_words`).
    pub fn strings(&self, name: &str) -> Result<Vec<String>, ApiError> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        ApiError::invalid_param(name, format!("'{name}' must be a string or a list of strings"))
                    })
                })
                .collect(),
            Some(v) => Err(type_error(name, "a string or a list of strings", v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_types_name_the_field() {
        let v = json!({"temperature": "hot", "n": 1.5, "stop": [1], "max_tokens": 2.0, "top_k": null});
        let f = Fields::new(&v);
        assert_eq!(f.f64("temperature").unwrap_err().param.as_deref(), Some("temperature"));
        assert_eq!(f.i64("n").unwrap_err().param.as_deref(), Some("n"));
        assert_eq!(f.strings("stop").unwrap_err().param.as_deref(), Some("stop"));
        assert_eq!(f.i64("max_tokens").unwrap(), Some(2));
        assert_eq!(f.i64("top_k").unwrap(), None);
        assert_eq!(f.i64("absent").unwrap(), None);
    }

    #[test]
    fn bodies_must_be_json_objects() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "request body is empty"),
            (b"[1]", "must be a JSON object"),
            (b" \"text\" ", "must be a JSON object"),
            (b"null", "must be a JSON object"),
            (b"{\"a\":", "invalid JSON body"),
            (b"{\"a\":1} x", "invalid JSON body"),
            (b"nope", "invalid JSON body"),
            (&[0xff, 0xfe], "invalid JSON body"),
            (b"{\"a\":\"\xff\"}", "invalid JSON body"),
        ];
        for (body, want) in cases {
            let e = Body::parse(body).err().unwrap_or_else(|| panic!("{:?} parsed", String::from_utf8_lossy(body)));
            assert_eq!(e.status, 400);
            assert!(e.message.contains(want), "{:?}: {}", String::from_utf8_lossy(body), e.message);
        }
        let deep = "[".repeat(100_000);
        let e = Body::parse(format!("{{\"a\":{deep}").as_bytes()).err().expect("too deep");
        assert!(e.message.contains("nested too deeply"), "{}", e.message);
        // Deep, and not an object either: refused without recursing.
        assert_eq!(Body::parse(deep.as_bytes()).err().expect("not an object").status, 400);
        assert!(Body::parse(b" {\"a\":1} ").is_ok());
    }

    #[test]
    fn a_body_reads_like_its_serde_json_object() {
        let text = r#"{"model":"m","n":2,"stop":null,"n":3,"stream_options":{"include_usage":true},"x":[1,{"y":"z"}]}"#;
        let body = Body::parse(text.as_bytes()).expect("parse");
        let reference: Value = serde_json::from_str(text).expect("parse");
        let (f, g) = (body.fields(), Fields::new(&reference));
        for name in ["model", "n", "stop", "stream_options", "x", "absent"] {
            assert_eq!(f.get(name), g.get(name), "{name}");
        }
        // Duplicate keys: the last wins, as in a `serde_json` map.
        assert_eq!(f.i64("n").expect("n"), Some(3));
        assert_eq!(f.get("stop"), None);
        assert_eq!(Value::Object(body.to_object()), reference);
    }

    #[test]
    fn a_body_of_many_members_reads_the_same() {
        // Past the listed-members limit the body is a map: reads and duplicates behave alike.
        for count in [limits::request_listed_members_max - 2, limits::request_listed_members_max - 1, 10_000] {
            let mut text = String::from("{\"n\":1");
            for i in 0..count {
                text.push_str(&format!(",\"k{i}\":{i}"));
            }
            text.push_str(",\"n\":2}");
            let body = Body::parse(text.as_bytes()).expect("parse");
            let hashed = count + 2 > limits::request_listed_members_max;
            assert_eq!(matches!(body.members, BodyMembers::Map(_)), hashed, "{count}");
            let reference: Value = serde_json::from_str(&text).expect("parse");
            assert_eq!(body.fields().i64("n").expect("n"), Some(2), "{count}");
            assert_eq!(body.fields().i64(&format!("k{}", count - 1)).expect("k"), Some(count as i64 - 1));
            assert_eq!(Value::Object(body.to_object()), reference, "{count}");
        }
    }
}
