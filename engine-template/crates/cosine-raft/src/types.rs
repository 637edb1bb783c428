//! What the replicated log carries, and openraft's type configuration.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A replica's id: unique across a deployment (the members of every shard).
pub type NodeId = u64;

/// One write of a client request, as the state machine applies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteOp {
    /// `SET` / `MSET`: the pairs, written in order. Result 0.
    Set(Vec<(Vec<u8>, Vec<u8>)>),
    /// `DEL`: the keys, deleted in order. Result: how many existed.
    Del(Vec<Vec<u8>>),
}

impl WriteOp {
    /// The bytes of keys and values this write carries.
    pub fn bytes(&self) -> usize {
        match self {
            WriteOp::Set(pairs) => pairs.iter().map(|(k, v)| k.len() + v.len()).sum(),
            WriteOp::Del(keys) => keys.iter().map(Vec::len).sum(),
        }
    }
}

/// One log entry's payload: the writes of one or more client requests, batched by the
/// leader ([`crate::replica`]), applied in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The writes.
    pub ops: Vec<WriteOp>,
}

/// What applying a [`Request`] answered: one result per write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// Per write: 0 for a `Set`, the number of keys that existed for a `Del`.
    pub results: Vec<i64>,
}

/// A snapshot's data: a directory holding an engine checkpoint (the engine's own files:
/// `MANIFEST`, run files, WAL and log segments) and `snapshot.meta`. A directory made for
/// one use (a copy to send, or one received) is removed when the value is dropped.
#[derive(Debug)]
pub struct SnapshotFiles {
    dir: PathBuf,
    temporary: bool,
}

impl SnapshotFiles {
    /// The snapshot in `dir`, kept on drop.
    pub fn kept(dir: PathBuf) -> SnapshotFiles {
        SnapshotFiles { dir, temporary: false }
    }

    /// The snapshot in `dir`, removed on drop unless [`SnapshotFiles::keep`] is called.
    pub fn temporary(dir: PathBuf) -> SnapshotFiles {
        SnapshotFiles { dir, temporary: true }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps the directory on drop (it was moved into place).
    pub fn keep(&mut self) {
        self.temporary = false;
    }
}

impl Drop for SnapshotFiles {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

openraft::declare_raft_types!(
    /// The replicated shard's types: [`Request`] in, [`Response`] out, nodes addressed by
    /// their bus address, snapshots as [`SnapshotFiles`], on tokio.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = SnapshotFiles,
        AsyncRuntime = openraft::TokioRuntime,
        Responder = openraft::impls::OneshotResponder<TypeConfig>,
);

/// A log entry of the shard.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id of the shard.
pub type LogId = openraft::LogId<NodeId>;
/// A vote of the shard.
pub type Vote = openraft::Vote<NodeId>;
/// A membership as stored with the state machine.
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
/// Snapshot metadata of the shard.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
/// A storage error of the shard.
pub type StorageError = openraft::StorageError<NodeId>;
/// The Raft handle of the shard.
pub type Raft = openraft::Raft<TypeConfig>;
