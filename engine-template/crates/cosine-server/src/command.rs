//! The commands the server understands, parsed from a request's arguments and
//! executed against the engine.
//!
//! | command | reply |
//! | --- | --- |
//! | `GET key` | the value, or nil |
//! | `SET key value` | `+OK` once the write is durable under the design's WAL policy |
//! | `DEL key [key ...]` | the number of keys that existed |
//! | `EXISTS key [key ...]` | the number of keys that exist (a key named twice counts twice) |
//! | `MGET key [key ...]` | an array of values or nils |
//! | `MSET key value [key value ...]` | `+OK` (each pair is written in turn; not atomic across keys) |
//! | `RANGE start count` | a flat array `key1 value1 key2 value2 ...`: the first `count` live keys `>= start`, in byte order |
//! | `PING [message]` | `+PONG`, or the message |
//! | `INFO [section]` | the server's and the engine's counters (`server`, `engine`, `keyspace`) |
//! | `QUIT` | `+OK`, then the server closes the connection |
//! | `CLUSTER ...`, `READONLY`, `READWRITE`, `ASKING` | the Redis Cluster protocol of a replicated deployment ([`crate::cluster`]); a server without `--cluster` answers Redis' "cluster support disabled" |
//!
//! Keys are fixed-width in the engine (`key_bytes` of the design); shorter keys are
//! padded with NUL bytes. So a key may be at most `key_bytes` long and may not end
//! with a NUL byte (it would be indistinguishable from its padding); `RANGE` strips
//! the padding from the keys it returns.

use crate::error::ServerError;
use crate::resp::{encode_bulk, Reply};
use crate::stats::{info_text, ServerStats};
use cosine_engine::Engine;

/// Most entries one `RANGE` may ask for (YCSB's default `maxscanlength` is 1,000;
/// the cap keeps one request from materializing an unbounded reply).
pub const MAX_RANGE_COUNT: usize = 100_000;

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `GET key`
    Get(Vec<u8>),
    /// `SET key value`
    Set(Vec<u8>, Vec<u8>),
    /// `DEL key...`
    Del(Vec<Vec<u8>>),
    /// `EXISTS key...`
    Exists(Vec<Vec<u8>>),
    /// `MGET key...`
    MGet(Vec<Vec<u8>>),
    /// `MSET key value...`
    MSet(Vec<(Vec<u8>, Vec<u8>)>),
    /// `RANGE start count`
    Range(Vec<u8>, usize),
    /// `PING [message]`
    Ping(Option<Vec<u8>>),
    /// `INFO [section]`
    Info(Option<String>),
    /// `QUIT`
    Quit,
    /// `CLUSTER subcommand [args]` (the subcommand upper-cased, then its arguments).
    Cluster(String, Vec<Vec<u8>>),
    /// `READONLY`: this connection may read from replicas (where the consistency level allows it).
    ReadOnly,
    /// `READWRITE`: back to reading from leaders only.
    ReadWrite,
    /// `ASKING` (slot migration; accepted, slots never migrate here).
    Asking,
}

/// The longest RANGE run on the network task (on a tree): YCSB's longest scan is 100 entries
/// (workload E's `maxscanlength`); a longer one goes to the blocking pool, so that it does not
/// hold the worker's other connections.
pub const SHORT_RANGE: usize = 128;

impl Command {
    /// True for the commands that write (their acknowledgement waits for durability).
    pub fn writes(&self) -> bool {
        matches!(self, Command::Set(..) | Command::Del(_) | Command::MSet(_))
    }

    /// True for the commands cheap enough to run on the network task: point reads (a snapshot
    /// lookup: memtables, then at most a few block reads), PING, QUIT, the cluster commands (no
    /// engine call), and point writes (a WAL append and a memtable insert; the sync is waited
    /// for by the durability waiter, not here). INFO (walks the levels) goes to the blocking
    /// pool, and RANGE too unless it is [`Command::is_short_range`] on a tree (a hash log
    /// scans its whole index).
    ///
    /// Writes ran on the blocking pool until issue 48: perf on a depth-1 SET load (50
    /// connections, server on one core) put 53 % of the server's CPU in context switches — the
    /// pool's threads parking and waking (15 %), the engine's write group handing each put to its
    /// leader on a condvar (14 %), preemption on return from system calls (22 %) — and a SET cost
    /// ~31 us of server CPU against ~8 us for a GET. On the network task every put of a worker is
    /// its own write group's leader. The price: a write stall (the engine's buffers full behind a
    /// slow flush) holds that worker's other connections for the stall, as it held the pool's
    /// thread before. (Under `every_write` a put waits for its fdatasync: the server sends those
    /// batches to the pool, where the puts of concurrent connections share one sync.)
    pub fn is_quick(&self) -> bool {
        matches!(
            self,
            Command::Get(_)
                | Command::MGet(_)
                | Command::Exists(_)
                | Command::Ping(_)
                | Command::Quit
                | Command::Set(..)
                | Command::Del(_)
                | Command::MSet(_)
                | Command::Cluster(..)
                | Command::ReadOnly
                | Command::ReadWrite
                | Command::Asking
        )
    }

    /// A RANGE of at most [`SHORT_RANGE`] entries: on a tree (LSM, B-tree, hybrid) a seek and a
    /// few blocks, cheap enough for the network task as a GET is. It went to the blocking pool
    /// before BENCHMARKS §26: the hand-off cost a RANGE batch ~40 us of server CPU against ~6.5 us for a GET
    /// batch (`cosine calibrate serving`), most of YCSB E's served CPU per operation.
    pub fn is_short_range(&self) -> bool {
        matches!(self, Command::Range(_, n) if *n <= SHORT_RANGE)
    }

    /// The keys a command names (what a cluster routes it by).
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            Command::Get(k) | Command::Set(k, _) => vec![k.as_slice()],
            Command::Del(ks) | Command::Exists(ks) | Command::MGet(ks) => ks.iter().map(Vec::as_slice).collect(),
            Command::MSet(pairs) => pairs.iter().map(|(k, _)| k.as_slice()).collect(),
            _ => Vec::new(),
        }
    }

    /// Parses a request's arguments; the error is what the client is answered.
    pub fn parse(mut args: Vec<Vec<u8>>, key_bytes: usize) -> Result<Command, ServerError> {
        if args.is_empty() {
            return Err(ServerError::EmptyCommand);
        }
        let first = args.remove(0);
        // the name upper-cased on the stack (a String per request was ~1 % of a GET's CPU);
        // the String only for an error's message
        let mut upper = [0u8; 16];
        let word = match upper.get_mut(..first.len()) {
            Some(u) => {
                u.copy_from_slice(&first);
                u.make_ascii_uppercase();
                &upper[..first.len()]
            }
            None => &[][..], // longer than any command
        };
        let name = || String::from_utf8_lossy(&first).to_ascii_uppercase();
        let arity = |ok: bool| -> Result<(), ServerError> {
            if ok {
                Ok(())
            } else {
                Err(ServerError::WrongArity(name().to_ascii_lowercase()))
            }
        };
        let key = |k: Vec<u8>| check_key(k, key_bytes);
        let keys = |ks: Vec<Vec<u8>>| ks.into_iter().map(|k| check_key(k, key_bytes)).collect::<Result<Vec<_>, _>>();
        let mut it = args.into_iter();
        let n = it.len();
        Ok(match word {
            b"GET" => {
                arity(n == 1)?;
                Command::Get(key(it.next().unwrap_or_default())?)
            }
            b"SET" => {
                if n > 2 {
                    return Err(ServerError::SetOptions);
                }
                arity(n == 2)?;
                let k = key(it.next().unwrap_or_default())?;
                Command::Set(k, it.next().unwrap_or_default())
            }
            b"DEL" => {
                arity(n >= 1)?;
                Command::Del(keys(it.collect())?)
            }
            b"EXISTS" => {
                arity(n >= 1)?;
                Command::Exists(keys(it.collect())?)
            }
            b"MGET" => {
                arity(n >= 1)?;
                Command::MGet(keys(it.collect())?)
            }
            b"MSET" => {
                arity(n >= 2 && n.is_multiple_of(2))?;
                let mut pairs = Vec::with_capacity(n / 2);
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((key(k)?, v));
                }
                Command::MSet(pairs)
            }
            b"RANGE" => {
                arity(n == 2)?;
                let start = it.next().unwrap_or_default();
                if start.len() > key_bytes {
                    return Err(ServerError::StartKeyTooLong { len: start.len(), key_bytes });
                }
                let count = it
                    .next()
                    .and_then(|c| std::str::from_utf8(&c).ok().and_then(|s| s.parse::<usize>().ok()))
                    .filter(|c| (1..=MAX_RANGE_COUNT).contains(c))
                    .ok_or(ServerError::BadCount { max: MAX_RANGE_COUNT })?;
                Command::Range(start, count)
            }
            b"PING" => {
                arity(n <= 1)?;
                Command::Ping(it.next())
            }
            b"INFO" => {
                arity(n <= 1)?;
                Command::Info(it.next().map(|s| String::from_utf8_lossy(&s).to_ascii_lowercase()))
            }
            b"QUIT" => Command::Quit,
            b"CLUSTER" => {
                arity(n >= 1)?;
                let sub = String::from_utf8_lossy(&it.next().unwrap_or_default()).to_ascii_uppercase();
                Command::Cluster(sub, it.collect())
            }
            b"READONLY" => Command::ReadOnly,
            b"READWRITE" => Command::ReadWrite,
            b"ASKING" => Command::Asking,
            _ => return Err(ServerError::UnknownCommand(name())),
        })
    }

    /// Runs the command. Writes are acknowledged here only provisionally: the
    /// caller turns their replies into errors if the durability wait fails.
    pub fn execute(self, engine: &Engine, stats: &ServerStats) -> Reply {
        let fail = |e: cosine_engine::Error| Reply::error(&ServerError::Engine(e));
        match self {
            Command::Get(k) => match engine.get(&k) {
                Ok(Some(v)) => Reply::Bulk(v),
                Ok(None) => Reply::Nil,
                Err(e) => fail(e),
            },
            Command::Set(k, v) => match engine.put(&k, &v) {
                Ok(()) => Reply::ok(),
                Err(e) => fail(e),
            },
            Command::Del(ks) => {
                let mut n = 0;
                for k in ks {
                    match engine.get_with(&k, |v| v.is_some()).and_then(|existed| engine.delete(&k).map(|()| existed)) {
                        Ok(existed) => n += i64::from(existed),
                        Err(e) => return fail(e),
                    }
                }
                Reply::Int(n)
            }
            Command::Exists(ks) => {
                let mut n = 0;
                for k in ks {
                    match engine.get_with(&k, |v| v.is_some()) {
                        Ok(found) => n += i64::from(found),
                        Err(e) => return fail(e),
                    }
                }
                Reply::Int(n)
            }
            Command::MGet(ks) => Reply::Array(
                ks.into_iter()
                    .map(|k| match engine.get(&k) {
                        Ok(Some(v)) => Reply::Bulk(v),
                        Ok(None) => Reply::Nil,
                        Err(e) => fail(e),
                    })
                    .collect(),
            ),
            Command::MSet(pairs) => {
                for (k, v) in pairs {
                    if let Err(e) = engine.put(&k, &v) {
                        return fail(e);
                    }
                }
                Reply::ok()
            }
            Command::Range(start, count) => match engine.range(&start, count) {
                Ok(kvs) => Reply::Array(kvs.into_iter().flat_map(|(k, v)| [Reply::Bulk(strip_padding(k)), Reply::Bulk(v)]).collect()),
                Err(e) => fail(e),
            },
            Command::Ping(None) => Reply::Simple("PONG".into()),
            Command::Ping(Some(m)) => Reply::Bulk(m),
            Command::Info(section) => match info_text(engine, stats, section.as_deref()) {
                Some(text) => Reply::Bulk(text.into_bytes()),
                None => Reply::error(&ServerError::UnknownInfoSection),
            },
            Command::Quit => Reply::ok(),
            Command::Cluster(..) | Command::ReadOnly | Command::ReadWrite | Command::Asking => Reply::error(&ServerError::ClusterDisabled),
        }
    }
}

/// Most bytes [`get_into`] reserves at once for the replies of a pipeline's GETs (the reply
/// writer's write size).
const GET_ROOM: usize = 64 << 10;

/// Runs `GET key` with its reply appended to `out` in wire form ([`encode_bulk`]) straight
/// from the engine's value where it lies (the memtable, a cached block): the value is copied
/// once, where [`Command::execute`] copies it into a [`Reply::Bulk`] that the reply writer then
/// encodes (perf of GET at pipeline depth 16: the two copies and their allocation were ~11 %
/// of the server's CPU, issue 48). `ahead`: the requests of the batch from this one on; the
/// first reply that does not fit reserves room for that many of its size (up to [`GET_ROOM`]),
/// so a pipeline of GETs does not grow `out` by copying it. Returns the bytes appended; on an
/// error none were.
pub fn get_into(engine: &Engine, key: &[u8], out: &mut Vec<u8>, ahead: usize) -> Result<usize, cosine_engine::Error> {
    let before = out.len();
    engine.get_with(key, |v| {
        let need = v.map_or(5, |v| v.len() + 24);
        if out.capacity() - out.len() < need {
            out.reserve(need.saturating_mul(ahead.max(1)).min(GET_ROOM).max(need));
        }
        encode_bulk(out, v);
    })?;
    Ok(out.len() - before)
}

fn check_key(k: Vec<u8>, key_bytes: usize) -> Result<Vec<u8>, ServerError> {
    if k.len() > key_bytes {
        return Err(ServerError::KeyTooLong { len: k.len(), key_bytes });
    }
    if k.last() == Some(&0) {
        return Err(ServerError::KeyEndsWithNul);
    }
    Ok(k)
}

/// A key as the engine returns it without its NUL padding.
pub(crate) fn strip_padding(mut k: Vec<u8>) -> Vec<u8> {
    while k.last() == Some(&0) {
        k.pop();
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Vec<u8>> {
        a.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn only_short_ranges_may_run_on_the_network_task() {
        let range = |n: usize| Command::Range(b"a".to_vec(), n);
        assert!(range(1).is_short_range() && range(SHORT_RANGE).is_short_range());
        assert!(!range(SHORT_RANGE + 1).is_short_range());
        assert!(!range(10).is_quick(), "a RANGE is quick only as a tree's short range (server.rs)");
        assert!(!Command::Get(b"a".to_vec()).is_short_range());
    }

    #[test]
    fn parses_and_checks_arguments() {
        assert_eq!(Command::parse(args(&["get", "k"]), 8).ok(), Some(Command::Get(b"k".to_vec())));
        assert_eq!(Command::parse(args(&["RANGE", "a", "10"]), 8).ok(), Some(Command::Range(b"a".to_vec(), 10)));
        let says = |a: Vec<Vec<u8>>, word: &str| Command::parse(a, 8).is_err_and(|e| e.to_string().contains(word));
        assert!(says(args(&["GET"]), "wrong number"));
        assert!(says(args(&["GET", "123456789"]), "key_bytes"));
        assert!(says(vec![b"GET".to_vec(), b"a\0".to_vec()], "NUL"));
        assert!(says(args(&["SET", "k", "v", "EX", "10"]), "syntax"));
        assert!(Command::parse(args(&["MSET", "a", "1", "b"]), 8).is_err());
        assert!(says(args(&["RANGE", "a", "0"]), "count"));
        assert!(says(args(&["RANGE", "a", "x"]), "count"));
        assert!(says(args(&["FLUSHALL"]), "unknown command"));
        assert_eq!(Command::parse(args(&["cluster", "slots"]), 8).ok(), Some(Command::Cluster("SLOTS".into(), vec![])));
        assert!(says(args(&["CLUSTER"]), "wrong number"));
        assert_eq!(strip_padding(b"ab\0\0".to_vec()), b"ab".to_vec());
    }
}
