//! `cosine-raft`: a shard of the deployed store as a Raft group of replicas, each one
//! cosine-server over its own engine.
//!
//! Consensus is [openraft](https://docs.rs/openraft) 0.9 (no home-made protocol): it
//! elects, replicates and commits; this crate gives it storage and a network.
//!
//! * [`log_store`]: the Raft log on disk, the shard's write-ahead log: an append is durable
//!   under the design's `wal_sync` (`every_write`: fdatasync; `group_commit`: fdatasync at
//!   most once per interval; `none`: written to the OS) before openraft counts it towards a
//!   majority;
//! * [`state_machine`]: the engine as the state machine (its own WAL set to `none`; the
//!   applied index kept in a reserved key written with the data); snapshots are engine
//!   checkpoints ([`cosine_engine::Engine::checkpoint`]), the log before them is purged;
//! * [`network`]: the peer bus (TCP, bincode frames), snapshots sent as files;
//! * [`replica`]: one replica: writes batched into entries and acknowledged once committed
//!   and applied; linearizable reads through shared heartbeat rounds.
//!
//! A write acknowledged by the leader is therefore on the log of a majority, durable there
//! as the design's WAL policy defines it; a leader that dies is replaced by a replica that
//! has every committed entry (Raft's election restriction), and reads go through the
//! leader after it confirms its leadership, so they see every acknowledged write.
#![deny(unsafe_code, clippy::unwrap_used)]
// openraft's storage traits return its `StorageError` (224 bytes) by value; the helpers
// that build it for them return it the same way.
#![allow(clippy::result_large_err)]

pub mod log_store;
pub mod network;
pub mod replica;
pub mod state_machine;
pub mod types;

pub use replica::{ClientError, Replica, ReplicaSpec, ReplicaStats, StartError, Timing};
pub use state_machine::marker_key;
pub use types::{NodeId, Request, Response, SnapshotFiles, TypeConfig, WriteOp};
