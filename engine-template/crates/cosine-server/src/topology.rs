//! The cluster a replica belongs to: shards, their slots and replicas (`--cluster FILE`,
//! written by `cosine deploy --local --replicas RF`).
//!
//! ```json
//! {
//!   "consistency": "strong",
//!   "raft": {"heartbeat_ms": 100, "election_min_ms": 500, "election_max_ms": 1000,
//!            "snapshot_entries": 20000, "keep_entries": 1000, "request_timeout_ms": 5000},
//!   "shards": [
//!     {"id": 0, "slots": [[0, 8191]],
//!      "replicas": [{"id": 1, "host": "127.0.0.1", "port": 7001, "bus_port": 7002}, ...]},
//!     ...
//!   ]
//! }
//! ```
//! Every slot of 0..=16383 belongs to exactly one shard; replica ids are unique and
//! non-zero. `raft` and `consistency` are optional (defaults: [`cosine_raft::Timing`]'s,
//! `strong`).

use crate::error::ServerError;
use cosine_raft::{NodeId, Timing};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Hash slots of the Redis Cluster protocol.
pub const SLOTS: usize = 16384;

/// Which replicas may answer reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Consistency {
    /// Every read goes through the shard's leader after a heartbeat round (linearizable).
    #[default]
    Strong,
    /// A connection that sent `READONLY` reads what its replica has applied (may be stale).
    Eventual,
}

/// One replica's addresses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaAddr {
    /// Its id (its Raft node id).
    pub id: NodeId,
    /// Host clients and peers reach it at.
    pub host: String,
    /// Its RESP port.
    pub port: u16,
    /// Its bus port (Raft RPCs).
    pub bus_port: u16,
}

impl ReplicaAddr {
    /// `host:port` of its RESP port.
    pub fn endpoint(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `host:bus_port`.
    pub fn bus(&self) -> String {
        format!("{}:{}", self.host, self.bus_port)
    }

    /// Its Redis Cluster node name: 40 hex digits.
    pub fn name(&self) -> String {
        node_name(self.id)
    }
}

/// The Redis Cluster node name of replica `id`.
pub fn node_name(id: NodeId) -> String {
    format!("{id:040x}")
}

/// One shard: a Raft group.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardSpec {
    /// Its index.
    pub id: u32,
    /// Its slot ranges, inclusive.
    pub slots: Vec<[u16; 2]>,
    /// Its replicas.
    pub replicas: Vec<ReplicaAddr>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct RaftSection {
    heartbeat_ms: Option<u64>,
    election_min_ms: Option<u64>,
    election_max_ms: Option<u64>,
    snapshot_entries: Option<u64>,
    keep_entries: Option<u64>,
    request_timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    consistency: Consistency,
    raft: Option<RaftSection>,
    shards: Vec<ShardSpec>,
}

/// The cluster, checked.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Its shards.
    pub shards: Vec<ShardSpec>,
    /// Who may answer reads.
    pub consistency: Consistency,
    /// The Raft groups' timing.
    pub timing: Timing,
    /// Slot -> index in `shards`.
    pub slot_shard: Vec<u16>,
}

impl Topology {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Topology, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|e| ServerError::Cluster(format!("{}: {e}", path.display())))?;
        Topology::parse(&text).map_err(|e| ServerError::Cluster(format!("{}: {e}", path.display())))
    }

    /// Parses and checks the JSON text of a cluster file.
    pub fn parse(text: &str) -> Result<Topology, String> {
        let f: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut timing = Timing::default();
        if let Some(r) = f.raft {
            let t = &mut timing;
            t.heartbeat_ms = r.heartbeat_ms.unwrap_or(t.heartbeat_ms);
            t.election_min_ms = r.election_min_ms.unwrap_or(t.election_min_ms);
            t.election_max_ms = r.election_max_ms.unwrap_or(t.election_max_ms);
            t.snapshot_entries = r.snapshot_entries.unwrap_or(t.snapshot_entries);
            t.keep_entries = r.keep_entries.unwrap_or(t.keep_entries);
            t.request_timeout_ms = r.request_timeout_ms.unwrap_or(t.request_timeout_ms);
        }
        if !(timing.heartbeat_ms > 0 && timing.heartbeat_ms < timing.election_min_ms && timing.election_min_ms < timing.election_max_ms) {
            return Err(format!(
                "raft: need 0 < heartbeat_ms ({}) < election_min_ms ({}) < election_max_ms ({})",
                timing.heartbeat_ms, timing.election_min_ms, timing.election_max_ms
            ));
        }
        if f.shards.is_empty() || f.shards.len() > SLOTS {
            return Err(format!("{} shards: need 1 to {SLOTS}", f.shards.len()));
        }
        let mut slot_shard = vec![u16::MAX; SLOTS];
        let mut ids = HashSet::new();
        for (i, s) in f.shards.iter().enumerate() {
            if s.replicas.is_empty() {
                return Err(format!("shard {}: no replicas", s.id));
            }
            for r in &s.replicas {
                if r.id == 0 || !ids.insert(r.id) {
                    return Err(format!("shard {}: replica id {} is zero or used twice", s.id, r.id));
                }
            }
            for [lo, hi] in &s.slots {
                if lo > hi || *hi as usize >= SLOTS {
                    return Err(format!("shard {}: slot range {lo}-{hi} is not within 0-{}", s.id, SLOTS - 1));
                }
                for slot in *lo..=*hi {
                    if slot_shard[slot as usize] != u16::MAX {
                        return Err(format!("slot {slot} belongs to two shards"));
                    }
                    slot_shard[slot as usize] = i as u16;
                }
            }
        }
        if let Some(free) = slot_shard.iter().position(|s| *s == u16::MAX) {
            return Err(format!("slot {free} belongs to no shard"));
        }
        Ok(Topology { shards: f.shards, consistency: f.consistency, timing, slot_shard })
    }

    /// (shard index, the replica) of replica `id`.
    pub fn replica(&self, id: NodeId) -> Option<(usize, &ReplicaAddr)> {
        self.shards.iter().enumerate().find_map(|(i, s)| s.replicas.iter().find(|r| r.id == id).map(|r| (i, r)))
    }

    /// The members of shard `i`: id -> bus address.
    pub fn members(&self, i: usize) -> BTreeMap<NodeId, String> {
        self.shards[i].replicas.iter().map(|r| (r.id, r.bus())).collect()
    }
}

/// The CRC16 of Redis Cluster (XMODEM: polynomial 0x1021, initial 0).
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The hash slot of `key`: CRC16 of the key, or of its hash tag (what is between the
/// first `{` and the next `}`, when not empty), mod 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // redis' own test vector and documented examples (cluster-spec: CRC16 "123456789" = 0x31C3)
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") % 16384);
        assert_eq!(key_slot(b"foo"), 12182); // `CLUSTER KEYSLOT foo` on redis
    }

    #[test]
    fn topologies_are_checked() {
        let ok =
            r#"{"shards": [{"id": 0, "slots": [[0, 16383]], "replicas": [{"id": 1, "host": "127.0.0.1", "port": 1, "bus_port": 2}]}]}"#;
        let t = Topology::parse(ok).expect("valid");
        assert_eq!(t.replica(1).map(|(i, r)| (i, r.port)), Some((0, 1)));
        assert_eq!(t.consistency, Consistency::Strong);
        let gap = ok.replace("16383", "16382");
        assert!(Topology::parse(&gap).is_err_and(|e| e.contains("slot 16383 belongs to no shard")));
        let twice = ok.replace(
            r#""replicas": [{"id": 1, "host": "127.0.0.1", "port": 1, "bus_port": 2}]"#,
            r#""replicas": [{"id": 1, "host": "h", "port": 1, "bus_port": 2}, {"id": 1, "host": "h", "port": 3, "bus_port": 4}]"#,
        );
        assert!(Topology::parse(&twice).is_err_and(|e| e.contains("used twice")));
        let timing = ok.replace(r#"{"shards""#, r#"{"raft": {"heartbeat_ms": 600}, "shards""#);
        assert!(Topology::parse(&timing).is_err_and(|e| e.contains("heartbeat_ms")));
    }
}
