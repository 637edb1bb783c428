//! The typed error of the server: what a client is answered with (`-ERR ...`), why a
//! connection is closed, and why the process cannot start or stop cleanly.
//!
//! Three kinds, by who sees them:
//! * a **refused request** (unknown command, wrong arity, a bad key, an oversized bulk
//!   string, an engine error, a write whose durability wait failed): the client gets
//!   `-ERR <Display>` and the connection goes on;
//! * a **closed connection**: a [`ServerError::Protocol`] error is answered, then the
//!   connection is closed (the stream cannot be resynchronized);
//!   [`ServerError::OutputBufferLimit`] closes it without a reply (the client is not
//!   reading them) and is logged on stderr;
//! * a **process error** (bad arguments, a bad `engine.toml`, a port in use, a failed
//!   flush at shutdown): printed on stderr by `cosine-server`, which exits with
//!   [`ServerError::exit_code`].
//!
//! The `Display` text of the refused requests is exactly the reply's text after `ERR `,
//! so clients that match on it see the same words as before this type existed.

use std::fmt;
use std::path::PathBuf;

/// Which output-buffer limit a connection went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputLimitKind {
    /// The hard limit: at or over `bytes`, the connection is closed at once.
    Hard {
        /// The limit, bytes.
        bytes: u64,
    },
    /// The soft limit: over `bytes` for `seconds` in a row.
    Soft {
        /// The limit, bytes.
        bytes: u64,
        /// How long the connection may stay over it.
        seconds: u64,
    },
}

/// Everything the server reports.
#[derive(Debug)]
pub enum ServerError {
    /// A request with no arguments at all.
    EmptyCommand,
    /// A command the server does not implement (its name, as sent, upper-cased).
    UnknownCommand(String),
    /// A command with the wrong number of arguments (its name, lower-case).
    WrongArity(String),
    /// `SET` with options (`EX`, `PX`, `NX`, `XX`, `GET`), which the engine does not have.
    SetOptions,
    /// A key longer than the design's fixed key width.
    KeyTooLong {
        /// The key's length, bytes.
        len: usize,
        /// The design's `key_bytes`.
        key_bytes: usize,
    },
    /// A key ending with a NUL byte (indistinguishable from the engine's padding).
    KeyEndsWithNul,
    /// A `RANGE` start key longer than the design's fixed key width.
    StartKeyTooLong {
        /// The start key's length, bytes.
        len: usize,
        /// The design's `key_bytes`.
        key_bytes: usize,
    },
    /// A `RANGE` count that is not an integer from 1 to the maximum.
    BadCount {
        /// The largest count allowed ([`crate::command::MAX_RANGE_COUNT`]).
        max: usize,
    },
    /// `INFO` of a section the server does not have.
    UnknownInfoSection,
    /// A bulk string over the parser's `max_bulk` (it was skipped, not buffered).
    BulkTooLong {
        /// Its declared length, bytes.
        len: u64,
        /// The limit ([`crate::Limits::max_bulk`], `--max-bulk-bytes`).
        limit: usize,
    },
    /// A request whose arguments add up to more than the parser's `max_request`.
    RequestTooLarge {
        /// The limit ([`crate::Limits::max_request`]).
        limit: usize,
    },
    /// The engine failed the command.
    Engine(cosine_engine::Error),
    /// A batch's writes are not acknowledged: the WAL sync they waited for failed.
    NotDurable(cosine_engine::Error),
    /// A batch's writes are not acknowledged: the task waiting for their durability failed.
    DurabilityWaitFailed(String),
    /// Executing a batch failed inside the server (its task panicked).
    ExecutionFailed,
    /// A framing error the parser cannot resynchronize after (what was wrong); the
    /// connection is answered and closed.
    Protocol(String),
    /// `max_clients` connections are open; a new one is answered and closed.
    MaxClients,
    /// A connection's queued replies went over its output-buffer limit: it is closed and
    /// its queued replies are dropped.
    OutputBufferLimit {
        /// Reply bytes produced for it and not yet written to its socket.
        queued: u64,
        /// The limit it went over.
        limit: OutputLimitKind,
    },
    /// The client's connection closed while its replies were being produced.
    ClientGone,
    /// A cluster command to a server started without `--cluster`.
    ClusterDisabled,
    /// A cluster's settings (`--cluster` file, `--node-id`) are wrong (what is wrong).
    Cluster(String),
    /// The replica cannot start (its log, engine or Raft node).
    Replica(String),
    /// The replica stopped while serving: its log or engine failed.
    ReplicaStopped(String),
    /// A reply the client side cannot decode.
    BadReply(String),
    /// A bad command-line argument (what is wrong with it).
    Usage(String),
    /// The server's settings (command line and `[server]` of engine.toml) contradict each other.
    Settings(String),
    /// `engine.toml` cannot be read or is not a valid design.
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: cosine_engine::Error,
    },
    /// The engine directory cannot be opened.
    Open {
        /// The data directory.
        dir: PathBuf,
        /// Why.
        source: cosine_engine::Error,
    },
    /// The server cannot listen on its address.
    Listen {
        /// `host:port`.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// Another operating-system call failed (starting the runtime, installing a signal handler).
    Io {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Flushing or closing the engine at shutdown failed.
    Shutdown {
        /// `flush` or `close`.
        step: &'static str,
        /// Why.
        source: cosine_engine::Error,
    },
    /// A request still held the engine when the shutdown closed it.
    OutlivedShutdown,
}

impl ServerError {
    /// The exit status `cosine-server` ends with for this error: 2 for what the user
    /// passed (arguments, settings, `engine.toml`), 1 for a failure of the engine or the system.
    pub fn exit_code(&self) -> i32 {
        match self {
            ServerError::Usage(_) | ServerError::Settings(_) | ServerError::Config { .. } | ServerError::Cluster(_) => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::EmptyCommand => write!(f, "empty command"),
            ServerError::UnknownCommand(name) => {
                let shown: String = name.chars().take(64).collect();
                write!(f, "unknown command '{}'", shown.escape_default())
            }
            ServerError::WrongArity(name) => write!(f, "wrong number of arguments for '{name}' command"),
            ServerError::SetOptions => {
                write!(f, "syntax error (SET takes a key and a value; EX, PX, NX, XX and GET are not supported)")
            }
            ServerError::KeyTooLong { len, key_bytes } => {
                write!(f, "key of {len} bytes is longer than this design's key_bytes = {key_bytes}")
            }
            ServerError::KeyEndsWithNul => {
                write!(f, "keys may not end with a NUL byte (the engine pads keys with NUL to key_bytes)")
            }
            ServerError::StartKeyTooLong { len, key_bytes } => {
                write!(f, "start key of {len} bytes is longer than key_bytes = {key_bytes}")
            }
            ServerError::BadCount { max } => write!(f, "count must be an integer from 1 to {max}"),
            ServerError::UnknownInfoSection => write!(f, "unknown INFO section (server, stats, engine, keyspace, all)"),
            ServerError::BulkTooLong { len, limit } => write!(f, "bulk string of {len} bytes exceeds the limit of {limit} bytes"),
            ServerError::RequestTooLarge { limit } => write!(f, "request exceeds the limit of {limit} bytes"),
            ServerError::Engine(e) => write!(f, "engine: {e}"),
            ServerError::NotDurable(e) => write!(f, "write not acknowledged: the WAL sync failed: {e}"),
            ServerError::DurabilityWaitFailed(m) => write!(f, "write not acknowledged: waiting for its durability failed: {m}"),
            ServerError::ExecutionFailed => write!(f, "internal error executing the request"),
            ServerError::Protocol(m) => write!(f, "Protocol error: {m}"),
            ServerError::MaxClients => write!(f, "max number of clients reached"),
            ServerError::OutputBufferLimit { queued, limit: OutputLimitKind::Hard { bytes } } => write!(
                f,
                "{queued} bytes of replies queued, over the hard output-buffer limit of {bytes} bytes: the client \
                 sends requests without reading the replies (raise --client-output-buffer-hard-bytes or \
                 [server] client_output_buffer_hard_bytes if it needs larger replies)"
            ),
            ServerError::OutputBufferLimit { queued, limit: OutputLimitKind::Soft { bytes, seconds } } => write!(
                f,
                "{queued} bytes of replies queued, over the soft output-buffer limit of {bytes} bytes for {seconds} s: \
                 the client reads its replies too slowly (raise --client-output-buffer-soft-bytes or \
                 --client-output-buffer-soft-seconds, or [server] client_output_buffer_soft_bytes / _soft_seconds)"
            ),
            ServerError::ClientGone => write!(f, "the client closed the connection"),
            ServerError::ClusterDisabled => write!(f, "This instance has cluster support disabled"),
            ServerError::Cluster(m) => write!(f, "{m}"),
            ServerError::Replica(m) => write!(f, "the replica cannot start: {m}"),
            ServerError::ReplicaStopped(m) => write!(f, "the replica stopped: {m}"),
            ServerError::BadReply(m) => write!(f, "{m}"),
            ServerError::Usage(m) | ServerError::Settings(m) => write!(f, "{m}"),
            ServerError::Config { path, source } => write!(f, "{}: {source}", path.display()),
            ServerError::Open { dir, source } => write!(f, "{}: {source}", dir.display()),
            ServerError::Listen { addr, source } => write!(
                f,
                "cannot listen on {addr}: {source} (is another server on that port? choose another with --port, \
                 or --port 0 for a free one)"
            ),
            ServerError::Io { what, source } => write!(f, "{what}: {source}"),
            ServerError::Shutdown { step, source } => write!(f, "{step} at shutdown: {source}"),
            ServerError::OutlivedShutdown => {
                write!(f, "a request outlived the shutdown; the WAL holds its writes (the next start replays them)")
            }
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerError::Engine(e)
            | ServerError::NotDurable(e)
            | ServerError::Config { source: e, .. }
            | ServerError::Open { source: e, .. }
            | ServerError::Shutdown { source: e, .. } => Some(e),
            ServerError::Listen { source, .. } | ServerError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<cosine_engine::Error> for ServerError {
    fn from(e: cosine_engine::Error) -> Self {
        ServerError::Engine(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_errors_read_as_the_replies_always_did() {
        // the text after `-ERR ` that clients saw before the typed error
        let cases: Vec<(ServerError, &str)> = vec![
            (ServerError::EmptyCommand, "empty command"),
            (ServerError::UnknownCommand("FLUSHALL".into()), "unknown command 'FLUSHALL'"),
            (ServerError::WrongArity("get".into()), "wrong number of arguments for 'get' command"),
            (ServerError::KeyTooLong { len: 17, key_bytes: 16 }, "key of 17 bytes is longer than this design's key_bytes = 16"),
            (ServerError::BadCount { max: 100_000 }, "count must be an integer from 1 to 100000"),
            (ServerError::BulkTooLong { len: 10, limit: 4 }, "bulk string of 10 bytes exceeds the limit of 4 bytes"),
            (ServerError::RequestTooLarge { limit: 10 }, "request exceeds the limit of 10 bytes"),
            (ServerError::Protocol("invalid bulk length".into()), "Protocol error: invalid bulk length"),
            (ServerError::MaxClients, "max number of clients reached"),
            (ServerError::Engine(cosine_engine::Error::Closed("engine is closed".into())), "engine: engine unavailable: engine is closed"),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        let long = ServerError::UnknownCommand("X\r\n".repeat(40));
        assert!(long.to_string().len() < 200 && !long.to_string().contains('\n'), "{long}");
        assert_eq!(ServerError::Usage("x".into()).exit_code(), 2);
        assert_eq!(ServerError::OutlivedShutdown.exit_code(), 1);
    }
}
