//! The servers of `--mcp-config-path`: a JSON file naming each server and how to reach it,
//! over stdio (a child process: `command`, `args`, `env`) or streamable HTTP (`url`,
//! `headers`):
//!
//! ```json
//! {"servers": [
//!   {"name": "everything", "protocol": "stdio", "command": "npx", "args": ["server-everything"], "env": {"K": "v"}},
//!   {"name": "docs", "protocol": "streamable", "url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer …"}}
//! ]}
//! ```
//!
//! Environment values and header values are secrets as far as this crate knows: `Debug` and
//! every log line show their names only.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// How a server is reached.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "protocol", rename_all = "lowercase", deny_unknown_fields)]
pub enum Transport {
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    Streamable {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish(),
            Transport::Streamable { url, headers } => f
                .debug_struct("Streamable")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// One named server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerConfig {
    pub name: String,
    #[serde(flatten)]
    pub transport: Transport,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    servers: Vec<ServerConfig>,
}

/// Reads and checks the file at `path`; the error says what is wrong, for the startup log.
pub fn load(path: &Path) -> Result<Vec<ServerConfig>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Server names become part of the function names the model sees, so they keep to what every
/// tool-call format can carry.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub fn parse(text: &str) -> Result<Vec<ServerConfig>, String> {
    let file: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut seen = std::collections::HashSet::new();
    for s in &file.servers {
        if !valid_name(&s.name) {
            return Err(format!("server name '{}' must be 1-64 of A-Z a-z 0-9 _ -", s.name));
        }
        if !seen.insert(s.name.as_str()) {
            return Err(format!("server name '{}' is used twice", s.name));
        }
        match &s.transport {
            Transport::Stdio { command, .. } if command.is_empty() => {
                return Err(format!("server '{}' needs a non-empty 'command'", s.name))
            }
            Transport::Streamable { url, .. } if !url.starts_with("http://") => {
                return Err(format!("server '{}': 'url' must be an http:// URL", s.name))
            }
            _ => {}
        }
    }
    Ok(file.servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_transports_parse_and_secrets_stay_out_of_debug() {
        let text = r#"{"servers": [
            {"name": "local", "protocol": "stdio", "command": "node", "args": ["s.js"], "env": {"TOKEN": "s3cret"}},
            {"name": "remote", "protocol": "streamable", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer s3cret"}}
        ]}"#;
        let servers = parse(text).unwrap();
        assert_eq!(servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["local", "remote"]);
        let Transport::Stdio { command, args, env } = &servers[0].transport else { panic!("stdio") };
        assert_eq!(
            (command.as_str(), args.as_slice(), env["TOKEN"].as_str()),
            ("node", &["s.js".to_string()][..], "s3cret")
        );
        let shown = format!("{servers:?}");
        assert!(!shown.contains("s3cret") && shown.contains("Authorization") && shown.contains("TOKEN"), "{shown}");
    }

    #[test]
    fn bad_files_are_refused_saying_why() {
        let cases = [
            (r#"{"servers": [{"name": "a b", "protocol": "stdio", "command": "x"}]}"#, "server name 'a b'"),
            (r#"{"servers": [{"name": "", "protocol": "stdio", "command": "x"}]}"#, "server name ''"),
            (
                r#"{"servers": [{"name": "a", "protocol": "stdio", "command": "x"}, {"name": "a", "protocol": "stdio", "command": "y"}]}"#,
                "used twice",
            ),
            (r#"{"servers": [{"name": "a", "protocol": "stdio", "command": ""}]}"#, "non-empty 'command'"),
            (r#"{"servers": [{"name": "a", "protocol": "streamable", "url": "ftp://x"}]}"#, "http:// URL"),
            (r#"{"servers": [{"name": "a", "protocol": "sse", "url": "http://x"}]}"#, "unknown variant"),
            (r#"{"servers": [{"name": "a", "protocol": "stdio", "command": "x", "cwd": "/"}]}"#, "unknown field"),
            (r#"{"mcpServers": {}}"#, "unknown field"),
            ("[", "EOF"),
        ];
        for (text, expected) in cases {
            let e = parse(text).expect_err(text);
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
