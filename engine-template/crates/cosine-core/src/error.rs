//! The typed error every fallible engine call returns.

use std::fmt;
use std::path::PathBuf;

/// Result alias used across the engine.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong. Corruption is always reported, never papered over.
#[derive(Debug)]
pub enum Error {
    /// An operating-system I/O error, with the file it concerned.
    Io {
        /// File or directory the operation concerned (may be empty).
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Persisted bytes failed a checksum or could not be decoded.
    Corruption {
        /// What was being read (file and structure).
        what: String,
    },
    /// `engine.toml` or another configuration input is invalid.
    Config(String),
    /// A caller passed an argument the engine cannot accept.
    InvalidArgument(String),
    /// The engine was closed or a background thread failed earlier.
    Closed(String),
}

impl Error {
    /// Builds an I/O error for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Builds a corruption error describing `what`.
    pub fn corruption(what: impl Into<String>) -> Self {
        Error::Corruption { what: what.into() }
    }

    /// True for checksum/decoding failures.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "I/O error on {}: {source}", path.display()),
            Error::Corruption { what } => write!(f, "corruption: {what}"),
            Error::Config(m) => write!(f, "invalid configuration: {m}"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Closed(m) => write!(f, "engine unavailable: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Clone for Error {
    fn clone(&self) -> Self {
        match self {
            Error::Io { path, source } => Error::Io { path: path.clone(), source: std::io::Error::new(source.kind(), source.to_string()) },
            Error::Corruption { what } => Error::Corruption { what: what.clone() },
            Error::Config(m) => Error::Config(m.clone()),
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Closed(m) => Error::Closed(m.clone()),
        }
    }
}
