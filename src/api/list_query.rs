//! The query string of a list endpoint (`?limit=20&order=asc&after=<id>`), read into the
//! store's `ListQuery`; a bad value is a 400 naming the parameter.

use shardgate_store::{ListQuery, Order};

use crate::error::ApiError;

/// `limit` (1..=100), `order` (`asc`/`desc`, default `default_order`), `after` (an item id);
/// other parameters (`include`, ...) are ignored.
pub fn parse(query: Option<&str>, default_order: Order) -> Result<ListQuery, ApiError> {
    let mut q = ListQuery { order: default_order, ..ListQuery::default() };
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(raw)
            .ok_or_else(|| ApiError::invalid_param(key, format!("'{key}' is not valid percent-encoding")))?;
        match key {
            "limit" => {
                let limit =
                    value.parse::<usize>().ok().filter(|&n| (1..=shardgate_store::limits::list_limit_max).contains(&n));
                q.limit = limit.ok_or_else(|| {
                    ApiError::invalid_param(
                        "limit",
                        format!(
                            "'limit' must be an integer from 1 to {}, got '{value}'",
                            shardgate_store::limits::list_limit_max
                        ),
                    )
                })?;
            }
            "order" => {
                q.order = match value.as_str() {
                    "asc" => Order::Asc,
                    "desc" => Order::Desc,
                    other => {
                        return Err(ApiError::invalid_param(
                            "order",
                            format!("'order' must be 'asc' or 'desc', got '{other}'"),
                        ))
                    }
                }
            }
            "after" if !value.is_empty() => q.after = Some(value),
            _ => {}
        }
    }
    Ok(q)
}

/// `%XX` and `+` decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_queries() {
        let ok = |q: &str| parse(Some(q), Order::Desc).unwrap();
        assert_eq!(ok(""), ListQuery { order: Order::Desc, ..ListQuery::default() });
        let q = ok("limit=5&order=asc&after=msg_%61b&include=x");
        assert_eq!((q.limit, q.order, q.after.as_deref()), (5, Order::Asc, Some("msg_ab")));
        assert_eq!(parse(None, Order::Asc).unwrap().order, Order::Asc);
        for (bad, param) in [
            ("limit=0", "limit"),
            ("limit=101", "limit"),
            ("limit=x", "limit"),
            ("order=up", "order"),
            ("after=%zz", "after"),
        ] {
            assert_eq!(parse(Some(bad), Order::Desc).unwrap_err().param.as_deref(), Some(param), "{bad}");
        }
    }
}
