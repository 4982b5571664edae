//! Which backend keeps the history: `Backend`, and `BackendKind`, the value of the gateway's
//! `--history-backend` flag (SMG's name and values: `sqlite`, the default, `memory`, `none`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::UnknownBackend;
use crate::limits::sqlite_file_name;

/// Where stored responses and conversations are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite database file, durable across restarts; created (with its directory) if absent.
    Sqlite { path: PathBuf },
    /// Maps in the storage thread, gone when the process ends.
    Memory,
    /// Nothing is kept (SMG's `none`): writes succeed and are dropped, reads find nothing.
    None,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Sqlite { path } => write!(f, "sqlite ({})", path.display()),
            Backend::Memory => f.write_str("memory"),
            Backend::None => f.write_str("none"),
        }
    }
}

/// A backend as a flag names it, before the data directory places its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    #[default]
    Sqlite,
    Memory,
    None,
}

impl BackendKind {
    /// The backend, with a SQLite file named `sqlite_file_name` in `data_directory`.
    pub fn in_directory(self, data_directory: &Path) -> Backend {
        match self {
            BackendKind::Sqlite => Backend::Sqlite { path: data_directory.join(sqlite_file_name) },
            BackendKind::Memory => Backend::Memory,
            BackendKind::None => Backend::None,
        }
    }
}

impl FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "sqlite" => Ok(BackendKind::Sqlite),
            "memory" => Ok(BackendKind::Memory),
            "none" => Ok(BackendKind::None),
            _ => Err(UnknownBackend(value.to_string())),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Sqlite => "sqlite",
            BackendKind::Memory => "memory",
            BackendKind::None => "none",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_parse_and_print_back() {
        let cases = [
            ("sqlite", Ok(BackendKind::Sqlite)),
            ("memory", Ok(BackendKind::Memory)),
            ("none", Ok(BackendKind::None)),
            ("SQLite", Err(UnknownBackend("SQLite".into()))),
            ("", Err(UnknownBackend("".into()))),
            ("postgres", Err(UnknownBackend("postgres".into()))),
        ];
        for (value, expected) in cases {
            let parsed = value.parse::<BackendKind>();
            assert_eq!(parsed, expected, "{value:?}");
            if let Ok(kind) = parsed {
                assert_eq!(kind.to_string(), value);
            }
        }
        assert_eq!(
            UnknownBackend("postgres".into()).to_string(),
            "unknown history backend 'postgres': expected sqlite, memory or none"
        );
    }

    #[test]
    fn sqlite_lives_in_the_data_directory() {
        let directory = Path::new("/var/lib/shardgate");
        assert_eq!(
            BackendKind::Sqlite.in_directory(directory),
            Backend::Sqlite { path: PathBuf::from("/var/lib/shardgate/history.sqlite3") }
        );
        assert_eq!(BackendKind::Memory.in_directory(directory), Backend::Memory);
        assert_eq!(BackendKind::None.in_directory(directory), Backend::None);
        assert_eq!(BackendKind::default(), BackendKind::Sqlite);
    }
}
