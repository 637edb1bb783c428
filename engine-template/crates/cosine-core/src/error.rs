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
    /// Persisted bytes at a known place in a file are damaged (a WAL record that
    /// fails its checksum, a length that cannot be right, a segment that is missing).
    CorruptAt {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the damaged record in it.
        offset: u64,
        /// What is wrong there.
        what: String,
    },
    /// Another process, or another open handle in this one, holds the database's `LOCK`.
    Locked {
        /// The `LOCK` file.
        path: PathBuf,
    },
    /// The directory holds database files but no `MANIFEST`: refusing to start afresh over them.
    MissingManifest {
        /// The database directory.
        dir: PathBuf,
        /// Some of the data files found (at most a few names).
        files: Vec<String>,
    },
    /// A write-ahead-log append or sync failed earlier; nothing more is acknowledged
    /// until the database is reopened (the failed append was rolled back).
    Poisoned(String),
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

    /// Builds a corruption error at `offset` of `path`.
    pub fn corrupt_at(path: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        Error::CorruptAt { path: path.into(), offset, what: what.into() }
    }

    /// True for checksum/decoding failures (with or without a known offset).
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. } | Error::CorruptAt { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "I/O error on {}: {source}", path.display()),
            Error::Corruption { what } => write!(f, "corruption: {what}"),
            Error::CorruptAt { path, offset, what } => write!(f, "corruption: {} at byte {offset}: {what}", path.display()),
            Error::Locked { path } => {
                write!(f, "database is locked: {} is held by another process or another open handle (close it first)", path.display())
            }
            Error::MissingManifest { dir, files } => write!(
                f,
                "{} holds database files ({}) but no MANIFEST; refusing to open it as a new database \
                 (restore the MANIFEST, or move the files away)",
                dir.display(),
                files.join(", ")
            ),
            Error::Poisoned(m) => {
                write!(f, "write-ahead log failed earlier ({m}); no write is acknowledged until the database is reopened")
            }
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
            Error::CorruptAt { path, offset, what } => Error::CorruptAt { path: path.clone(), offset: *offset, what: what.clone() },
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::MissingManifest { dir, files } => Error::MissingManifest { dir: dir.clone(), files: files.clone() },
            Error::Poisoned(m) => Error::Poisoned(m.clone()),
            Error::Config(m) => Error::Config(m.clone()),
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Closed(m) => Error::Closed(m.clone()),
        }
    }
}
