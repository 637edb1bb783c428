//! `cosine-server`: one engine directory served over the Redis protocol (RESP2), so
//! existing clients, proxies (twemproxy) and load generators (redis-benchmark, YCSB
//! through Jedis) work unchanged.
//!
//! * [`resp`]: the wire protocol (incremental request parser with bounds, replies);
//! * [`command`]: GET, SET, DEL, EXISTS, MGET, MSET, RANGE, PING, INFO, QUIT;
//! * [`server`]: tokio accept loop, pipelined batches, durability before `+OK`,
//!   graceful shutdown;
//! * [`output`]: the per-client output limit (Redis' `client-output-buffer-limit`):
//!   a client that does not read its replies is closed before the server holds more
//!   than the limit for it (defaults: hard 256 MiB, soft 64 MiB for 60 s);
//! * [`stats`]: the `INFO` counters;
//! * [`error`]: [`ServerError`], what clients are answered and what the process reports;
//! * [`client`]: a blocking client for tests and drivers;
//! * [`cluster`], [`topology`]: a replica of a replicated shard (`--cluster`): the Redis
//!   Cluster protocol (slots, `CLUSTER SLOTS`/`SHARDS`/`NODES`, `-MOVED`) over a Raft
//!   group of cosine-servers (cosine-raft).
//!
//! Durability: a write is acknowledged only once the sync covering its batch's
//! [`cosine_engine::Engine::durable_mark`] is done ([`server::DurabilityWaiter`]), i.e. when
//! the design's WAL policy says it is durable (`every_write`: its own fdatasync;
//! `group_commit`: the group's fdatasync; `none`: the policy promises nothing, so neither
//! does the acknowledgement).
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod client;
pub mod cluster;
pub mod command;
pub mod error;
pub mod output;
pub mod resp;
pub mod server;
pub mod stats;
pub mod topology;

pub use command::Command;
pub use error::ServerError;
pub use output::OutputLimit;
pub use resp::{Limits, Reply};
pub use server::{serve, serve_backend, Backend, ServerConfig};
pub use stats::ServerStats;
