//! The servers of `--mcp-config-path`, in SMG's format: a YAML file (JSON reads the same)
//! naming each server and how to reach it, over stdio (a child process: `command`, `args`,
//! `envs`) or streamable HTTP (`url`, `token`, and `headers` beyond SMG's):
//!
//! ```yaml
//! servers:
//!   - name: everything
//!     protocol: stdio
//!     command: npx
//!     args: ["-y", "@modelcontextprotocol/server-everything"]
//!     envs: {LOG_LEVEL: warn}
//!   - name: docs
//!     protocol: streamable
//!     url: http://127.0.0.1:3001/mcp
//!     token: ${DOCS_TOKEN}      # sent as `Authorization: Bearer ...`
//!     required: true            # the gateway does not start without it
//! ```
//!
//! `token` expands `${VAR}` from the environment, as SMG does. `env` is accepted for `envs`.
//! SMG's `sse` protocol (MCP's deprecated HTTP+SSE transport) and its `proxy`, `pool`,
//! `inventory` and `warmup` sections are refused by name rather than ignored.
//!
//! Environment values, tokens and header values are secrets as far as this crate knows:
//! `Debug` and every log line show their names only.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// How a server is reached.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, String> },
    Streamable { url: String, headers: BTreeMap<String, String> },
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// Connected (and its tools listed) before the gateway serves; failing that, it does not
    /// start.
    pub required: bool,
}

/// A server as written in the file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    name: String,
    protocol: String,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default, alias = "env")]
    envs: BTreeMap<String, String>,
    url: Option<String>,
    token: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    required: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    servers: Vec<RawServer>,
}

/// Reads and checks the file at `path`; the error says what is wrong, for the startup log.
pub fn load(path: &Path) -> Result<Vec<ServerConfig>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text, &|var| std::env::var(var).ok()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Server names become part of the function names the model sees, so they keep to what every
/// tool-call format can carry.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The file's servers; `env` looks up the variables a `token` names.
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<ServerConfig>, String> {
    let file: File = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    let mut seen = std::collections::HashSet::new();
    let mut servers = Vec::with_capacity(file.servers.len());
    for raw in file.servers {
        if !valid_name(&raw.name) {
            return Err(format!("server name '{}' must be 1-64 of A-Z a-z 0-9 _ -", raw.name));
        }
        if !seen.insert(raw.name.clone()) {
            return Err(format!("server name '{}' is used twice", raw.name));
        }
        servers.push(server(raw, env)?);
    }
    Ok(servers)
}

fn server(raw: RawServer, env: &dyn Fn(&str) -> Option<String>) -> Result<ServerConfig, String> {
    let name = raw.name;
    let only = |what: &str, present: bool| {
        if present {
            Err(format!("server '{name}': '{what}' does not apply to protocol '{}'", raw.protocol))
        } else {
            Ok(())
        }
    };
    let transport = match raw.protocol.as_str() {
        "stdio" => {
            only("url", raw.url.is_some())?;
            only("token", raw.token.is_some())?;
            only("headers", !raw.headers.is_empty())?;
            let command = raw.command.filter(|c| !c.is_empty());
            let command = command.ok_or_else(|| format!("server '{name}' needs a non-empty 'command'"))?;
            Transport::Stdio { command, args: raw.args, env: raw.envs }
        }
        "streamable" => {
            only("command", raw.command.is_some())?;
            only("args", !raw.args.is_empty())?;
            only("envs", !raw.envs.is_empty())?;
            let url = raw.url.filter(|u| u.starts_with("http://") || u.starts_with("https://"));
            let url = url.ok_or_else(|| format!("server '{name}': 'url' must be an http:// or https:// URL"))?;
            let mut headers = raw.headers;
            if let Some(token) = raw.token {
                let token = expand(&token, env).map_err(|e| format!("server '{name}': 'token': {e}"))?;
                headers.insert("Authorization".into(), format!("Bearer {token}"));
            }
            Transport::Streamable { url, headers }
        }
        "sse" => {
            return Err(format!(
                "server '{name}': protocol 'sse' (MCP's deprecated HTTP+SSE transport) is not supported; \
                 servers that speak it also speak 'streamable'"
            ))
        }
        other => return Err(format!("server '{name}': unknown protocol '{other}' (stdio or streamable)")),
    };
    Ok(ServerConfig { name, transport, required: raw.required })
}

/// `${VAR}` replaced by the variable's value; an unset variable is an error naming it.
fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or("an unclosed '${'")?;
        let var = &after[..end];
        out.push_str(&env(var).ok_or_else(|| format!("the environment variable {var} is not set"))?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(var: &str) -> Option<String> {
        (var == "DOCS_TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn smg_yaml_and_json_parse_and_secrets_stay_out_of_debug() {
        let yaml = "servers:
  - name: local
    protocol: stdio
    command: node
    args: [s.js]
    envs: {TOKEN: s3cret}
  - name: remote
    protocol: streamable
    url: http://127.0.0.1:1/mcp
    token: pre-${DOCS_TOKEN}
    headers: {X-Tenant: t1}
    required: true
";
        let json = r#"{"servers": [
            {"name": "local", "protocol": "stdio", "command": "node", "args": ["s.js"], "env": {"TOKEN": "s3cret"}},
            {"name": "remote", "protocol": "streamable", "url": "http://127.0.0.1:1/mcp",
             "headers": {"X-Tenant": "t1", "Authorization": "Bearer pre-s3cret"}, "required": true}
        ]}"#;
        let servers = parse(yaml, &env).expect("yaml");
        assert_eq!(servers, parse(json, &env).expect("json"));
        assert_eq!((servers[0].required, servers[1].required), (false, true));
        let Transport::Stdio { command, args, env } = &servers[0].transport else { panic!("stdio") };
        assert_eq!(
            (command.as_str(), args.as_slice(), env["TOKEN"].as_str()),
            ("node", &["s.js".to_string()][..], "s3cret")
        );
        let Transport::Streamable { headers, .. } = &servers[1].transport else { panic!("streamable") };
        assert_eq!(headers["Authorization"], "Bearer pre-s3cret");
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
            (r#"{"servers": [{"name": "a", "protocol": "stdio"}]}"#, "non-empty 'command'"),
            (
                r#"{"servers": [{"name": "a", "protocol": "stdio", "command": "x", "url": "http://x"}]}"#,
                "'url' does not apply",
            ),
            (r#"{"servers": [{"name": "a", "protocol": "streamable", "url": "ftp://x"}]}"#, "http:// or https:// URL"),
            (
                r#"{"servers": [{"name": "a", "protocol": "streamable", "url": "http://x", "envs": {"A": "b"}}]}"#,
                "'envs' does not apply",
            ),
            (
                r#"{"servers": [{"name": "a", "protocol": "streamable", "url": "http://x", "token": "${NOPE}"}]}"#,
                "NOPE is not set",
            ),
            (
                r#"{"servers": [{"name": "a", "protocol": "streamable", "url": "http://x", "token": "${DOCS_TOKEN"}]}"#,
                "unclosed",
            ),
            (r#"{"servers": [{"name": "a", "protocol": "sse", "url": "http://x/sse"}]}"#, "'sse'"),
            (r#"{"servers": [{"name": "a", "protocol": "grpc", "url": "http://x"}]}"#, "unknown protocol 'grpc'"),
            (r#"{"servers": [{"name": "a", "protocol": "stdio", "command": "x", "cwd": "/"}]}"#, "unknown field `cwd`"),
            ("servers: []\nproxy: {http: 'http://p:8080'}\n", "unknown field `proxy`"),
            (r#"{"mcpServers": {}}"#, "unknown field `mcpServers`"),
            ("servers: [", "did not find expected node content"),
        ];
        for (text, expected) in cases {
            let e = parse(text, &env).expect_err(text);
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
