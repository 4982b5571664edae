//! Typed access to a JSON request object, with 400s that name the offending field.
//!
//! Unknown fields are ignored (clients set extra keys globally); a known field of the wrong
//! type or out of range is a 400 with `param` set to its name.

use serde_json::{Map, Value};

use crate::error::ApiError;

pub struct Fields<'a> {
    map: &'a Map<String, Value>,
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

impl<'a> Fields<'a> {
    /// Parses a request body that must be a JSON object.
    pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
        if body.is_empty() {
            return Err(ApiError::bad_request("request body is empty; expected a JSON object"));
        }
        // sonic-rs (SIMD) parses; it refuses nesting beyond 128 levels, so a hostile body
        // cannot exhaust a shard's stack. Its messages carry a source snippet: keep line one.
        let v: Value = sonic_rs::from_slice(body).map_err(|e| {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("").trim();
            if first.contains("nesting") {
                ApiError::bad_request("JSON body is nested too deeply (more than 128 levels)")
            } else {
                ApiError::bad_request(format!("invalid JSON body: {first}"))
            }
        })?;
        if !v.is_object() {
            return Err(ApiError::bad_request("request body must be a JSON object"));
        }
        Ok(v)
    }

    pub fn new_map(map: &'a Map<String, Value>) -> Self {
        Fields { map }
    }

    pub fn new(v: &'a Value) -> Self {
        // parse_body guarantees an object; anything else reads as empty.
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        Fields { map: v.as_object().unwrap_or_else(|| EMPTY.get_or_init(Map::new)) }
    }

    /// The raw value, `None` when absent or null.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
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
        assert!(Fields::parse_body(b"").is_err());
        assert!(Fields::parse_body(b"[1]").is_err());
        assert!(Fields::parse_body(b"{\"a\":").is_err());
        assert!(Fields::parse_body(&[0xff, 0xfe]).is_err());
        let deep = "[".repeat(10_000);
        assert!(Fields::parse_body(format!("{{\"a\":{deep}").as_bytes())
            .unwrap_err()
            .message
            .contains("nested too deeply"));
        assert!(Fields::parse_body(b"{\"a\":1}").is_ok());
    }
}
