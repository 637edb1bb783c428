//! The Redis Cluster protocol over replicated shards: one cosine-server is one replica
//! of one shard ([`cosine_raft::Replica`]); the 16,384 hash slots are split among the
//! shards ([`crate::topology`]).
//!
//! **Routing.** A command's keys give its slot (CRC16, hash tags; keys of one command
//! must share a slot, else `-CROSSSLOT`), the slot its shard. A key of another shard is
//! answered `-MOVED slot host:port` with that shard's leader (as last learned: every
//! server asks the other shards' replicas whom they follow every [`POLL`]). A key of this
//! shard on a replica that does not lead it: `-MOVED` to its leader; while the shard has
//! no leader (an election), the request waits up to `request_timeout_ms` for one, then is
//! answered `-CLUSTERDOWN`. `RANGE` has no slot: it scans this shard (clients
//! scatter it to every shard's leader). Cluster-aware clients (`redis-cli -c`,
//! `redis-benchmark --cluster`, JedisCluster) follow `-MOVED` and refresh their slot map
//! with `CLUSTER SLOTS` / `CLUSTER SHARDS` / `CLUSTER NODES`. Slots never move between
//! shards, so `-ASK` is never sent; `ASKING` is accepted.
//!
//! **Writes** (`SET`, `MSET`, `DEL`) on the leader go into the Raft log
//! ([`cosine_raft::Replica::write`]); `+OK` once a majority has them durable under the
//! design's `wal_sync` and this leader applied them. **Reads** (`GET`, `MGET`, `EXISTS`,
//! `RANGE`) on the leader wait for one read barrier per batch (a heartbeat round: still
//! the leader, everything committed before applied): linearizable. With
//! `"consistency": "eventual"`, a connection that sent `READONLY` reads any replica of
//! the key's shard as it is (possibly stale); with `strong` (the default) `READONLY` is
//! accepted and reads still go to the leader.
//!
//! Requests of a pipeline run in order: consecutive writes go into the log together,
//! and a read after a write waits for it.

use crate::command::{strip_padding, Command};
use crate::error::ServerError;
use crate::output::OutputBuffer;
use crate::resp::Reply;
use crate::server::Batch;
use crate::stats::{info_text, wal_sync_name, ServerStats};
use crate::topology::{key_slot, node_name, Consistency, ReplicaAddr, Topology};
use cosine_raft::{ClientError, NodeId, Replica, WriteOp};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// How often a server asks the other shards whom they follow.
pub const POLL: Duration = Duration::from_millis(200);

/// What a connection has said about itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct Session {
    /// `READONLY` was sent (and not undone by `READWRITE`).
    pub readonly: bool,
}

/// Where a shard's leader is, as last learned.
#[derive(Debug, Default, Clone, Copy)]
struct Known {
    leader: Option<NodeId>,
    term: u64,
}

/// One replica serving the cluster protocol.
#[derive(Debug)]
pub struct ClusterNode {
    topo: Topology,
    me: NodeId,
    shard: usize,
    replica: Replica,
    key_bytes: usize,
    leaders: Vec<Mutex<Known>>,
    wait_leader: Duration,
}

fn moved(slot: u16, to: &ReplicaAddr) -> Reply {
    Reply::Error(format!("MOVED {slot} {}", to.endpoint()))
}

fn cluster_down(why: &str) -> Reply {
    Reply::Error(format!("CLUSTERDOWN {why}"))
}

/// A write command as the replicated log carries it.
fn write_op(cmd: &Command) -> Option<WriteOp> {
    match cmd {
        Command::Set(k, v) => Some(WriteOp::Set(vec![(k.clone(), v.clone())])),
        Command::MSet(pairs) => Some(WriteOp::Set(pairs.clone())),
        Command::Del(keys) => Some(WriteOp::Del(keys.clone())),
        _ => None,
    }
}

impl ClusterNode {
    /// Replica `me` of `topo`, running `replica` over an engine with keys of `key_bytes`.
    pub fn new(topo: Topology, me: NodeId, replica: Replica, key_bytes: usize) -> Result<ClusterNode, ServerError> {
        let (shard, _) = topo.replica(me).ok_or_else(|| ServerError::Cluster(format!("node {me} is not in the cluster file")))?;
        let leaders = topo.shards.iter().map(|_| Mutex::new(Known::default())).collect();
        let wait_leader = Duration::from_millis(topo.timing.request_timeout_ms.max(2 * topo.timing.election_max_ms));
        Ok(ClusterNode { topo, me, shard, replica, key_bytes, leaders, wait_leader })
    }

    /// The replica.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The design's key width.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    fn addr(&self, id: NodeId) -> Option<&ReplicaAddr> {
        self.topo.replica(id).map(|(_, r)| r)
    }

    /// The leader of shard `i` as known here (this shard's: from its Raft node).
    fn leader_of(&self, i: usize) -> Option<NodeId> {
        if i == self.shard {
            let m = self.replica.metrics();
            let mut k = self.leaders[i].lock();
            if m.current_leader.is_some() {
                *k = Known { leader: m.current_leader, term: m.current_term };
            }
            return m.current_leader;
        }
        self.leaders[i].lock().leader
    }

    /// Shard `i`'s leader to show clients: the known one, else the last known, else its first replica.
    fn shown_leader(&self, i: usize) -> &ReplicaAddr {
        let shard = &self.topo.shards[i];
        let id = self.leader_of(i).or(self.leaders[i].lock().leader);
        id.and_then(|l| shard.replicas.iter().find(|r| r.id == l)).unwrap_or(&shard.replicas[0])
    }

    fn first_slot(&self, i: usize) -> u16 {
        self.topo.shards[i].slots.first().map_or(0, |r| r[0])
    }

    /// Starts asking the other shards' replicas whom they follow, every [`POLL`].
    pub fn spawn_poller(self: &Arc<Self>) {
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut conns: HashMap<NodeId, Option<tokio::net::TcpStream>> = HashMap::new();
            loop {
                tokio::time::sleep(POLL).await;
                let Some(node) = node.upgrade() else { return };
                for (i, shard) in node.topo.shards.iter().enumerate() {
                    if i == node.shard {
                        let _ = node.leader_of(i);
                        continue;
                    }
                    let mut best = Known::default();
                    for r in &shard.replicas {
                        let conn = conns.entry(r.id).or_default();
                        if let Ok(cosine_raft::network::LeaderAnswer { leader: Some(l), term, .. }) =
                            cosine_raft::network::ask_leader(&r.bus(), conn, POLL, None).await
                        {
                            if best.leader.is_none() || term > best.term {
                                best = Known { leader: Some(l), term };
                            }
                        }
                    }
                    if best.leader.is_some() {
                        *node.leaders[i].lock() = best;
                    }
                }
            }
        });
    }

    /// The slot of a command's keys: `Ok(None)` for a command without keys, an error reply
    /// for keys of different slots or the reserved key.
    fn slot(&self, cmd: &Command) -> Result<Option<u16>, Reply> {
        let keys = cmd.keys();
        let mut slot = None;
        for k in keys {
            if k.len() == self.key_bytes && k.iter().all(|b| *b == 0xFF) {
                return Err(Reply::err("this key is reserved in a replicated shard (it holds the applied log index)"));
            }
            let s = key_slot(k);
            if slot.is_some_and(|x| x != s) {
                return Err(Reply::Error("CROSSSLOT Keys in request don't hash to the same slot".into()));
            }
            slot = Some(s);
        }
        Ok(slot)
    }

    /// The reply to a request this replica cannot serve: a redirection to the leader it
    /// learns of (waiting for an election to end), or `-CLUSTERDOWN`.
    async fn refusal(&self, e: &ClientError, slot: u16) -> Reply {
        let leader = match e {
            ClientError::NotLeader(Some(l)) if *l != self.me => Some(*l),
            ClientError::NotLeader(_) => match self.replica.wait_leader(self.wait_leader).await {
                Some(l) if l != self.me => Some(l),
                Some(_) => return cluster_down("the leader changed during the request; retry"),
                None => None,
            },
            ClientError::Unavailable(m) | ClientError::Stopped(m) => return cluster_down(m),
        };
        match leader.and_then(|l| self.addr(l)) {
            Some(a) => moved(slot, a),
            None => cluster_down("the shard has no leader"),
        }
    }

    /// `Some(reply)` when this replica must not serve the request itself (another leads).
    async fn not_here(&self, slot: u16, read: bool, session: &Session) -> Option<Reply> {
        if read && session.readonly && self.topo.consistency == Consistency::Eventual {
            return None;
        }
        match self.leader_of(self.shard) {
            Some(l) if l == self.me => None,
            Some(l) => Some(self.refusal(&ClientError::NotLeader(Some(l)), slot).await),
            None => Some(self.refusal(&ClientError::NotLeader(None), slot).await),
        }
    }

    async fn flush_writes(&self, writes: &mut Vec<(usize, u16, Command)>, replies: &mut [Option<Reply>]) {
        if writes.is_empty() {
            return;
        }
        let ops: Vec<WriteOp> = writes.iter().filter_map(|(_, _, c)| write_op(c)).collect();
        match self.replica.write(ops).await {
            Ok(results) => {
                for ((i, _, cmd), r) in writes.iter().zip(results) {
                    replies[*i] = Some(match cmd {
                        Command::Del(_) => Reply::Int(r),
                        _ => Reply::ok(),
                    });
                }
            }
            Err(e) => {
                for (i, slot, _) in writes.iter() {
                    replies[*i] = Some(self.refusal(&e, *slot).await);
                }
            }
        }
        writes.clear();
    }

    async fn read(&self, cmd: Command, stats: &ServerStats) -> Reply {
        let Some(engine) = self.replica.state().engine() else {
            return cluster_down("the replica is installing a snapshot");
        };
        match cmd {
            Command::Range(start, count) => {
                let marker = cosine_raft::marker_key(self.key_bytes);
                let r = tokio::task::spawn_blocking(move || engine.range(&start, count + 1)).await;
                match r {
                    Ok(Ok(kvs)) => Reply::Array(
                        kvs.into_iter()
                            .filter(|(k, _)| *k != marker)
                            .take(count)
                            .flat_map(|(k, v)| [Reply::Bulk(strip_padding(k)), Reply::Bulk(v)])
                            .collect(),
                    ),
                    Ok(Err(e)) => Reply::error(&ServerError::Engine(e)),
                    Err(_) => Reply::error(&ServerError::ExecutionFailed),
                }
            }
            other => other.execute(&engine, stats),
        }
    }

    /// Runs a batch (see the module doc); the replies in request order.
    pub async fn execute(
        &self,
        batch: Batch,
        session: &mut Session,
        stats: &ServerStats,
        output: &OutputBuffer,
    ) -> Result<Vec<Reply>, ServerError> {
        let mut replies: Vec<Option<Reply>> = (0..batch.len()).map(|_| None).collect();
        let mut writes: Vec<(usize, u16, Command)> = Vec::new();
        let mut barrier: Option<Result<(), ClientError>> = None;
        for (i, c) in batch.into_iter().enumerate() {
            ServerStats::bump(&stats.commands);
            let cmd = match c {
                Ok(cmd) => cmd,
                Err(e) => {
                    replies[i] = Some(Reply::error(&e));
                    continue;
                }
            };
            if matches!(
                cmd,
                Command::Ping(_)
                    | Command::Quit
                    | Command::Info(_)
                    | Command::Cluster(..)
                    | Command::ReadOnly
                    | Command::ReadWrite
                    | Command::Asking
            ) {
                replies[i] = Some(self.admin(cmd, session, stats).await);
                continue;
            }
            let slot = match self.slot(&cmd) {
                Ok(s) => s,
                Err(r) => {
                    replies[i] = Some(r);
                    continue;
                }
            };
            let shard = slot.map_or(self.shard, |s| self.topo.slot_shard[s as usize] as usize);
            let slot = slot.unwrap_or_else(|| self.first_slot(self.shard));
            if shard != self.shard {
                replies[i] = Some(moved(slot, self.shown_leader(shard)));
                continue;
            }
            let read = !cmd.writes();
            if let Some(r) = self.not_here(slot, read, session).await {
                replies[i] = Some(r);
                continue;
            }
            if !read {
                writes.push((i, slot, cmd));
                continue;
            }
            self.flush_writes(&mut writes, &mut replies).await;
            let local = session.readonly && self.topo.consistency == Consistency::Eventual;
            if !local {
                let b = match &barrier {
                    Some(b) => b.clone(),
                    None => barrier.insert(self.replica.read_barrier().await).clone(),
                };
                if let Err(e) = b {
                    replies[i] = Some(self.refusal(&e, slot).await);
                    continue;
                }
            }
            replies[i] = Some(self.read(cmd, stats).await);
        }
        self.flush_writes(&mut writes, &mut replies).await;
        let replies: Vec<Reply> = replies.into_iter().map(|r| r.unwrap_or_else(|| Reply::error(&ServerError::ExecutionFailed))).collect();
        for r in &replies {
            if matches!(r, Reply::Error(_)) {
                ServerStats::bump(&stats.rejected);
            }
            output.produce(r.encoded_len())?;
        }
        Ok(replies)
    }

    async fn admin(&self, cmd: Command, session: &mut Session, stats: &ServerStats) -> Reply {
        match cmd {
            Command::ReadOnly => {
                session.readonly = true;
                Reply::ok()
            }
            Command::ReadWrite => {
                session.readonly = false;
                Reply::ok()
            }
            Command::Asking => Reply::ok(),
            Command::Info(section) => self.info(section.as_deref(), stats),
            Command::Cluster(sub, args) => self.cluster(&sub, &args),
            other => match self.replica.state().engine() {
                Some(engine) => other.execute(&engine, stats),
                None => cluster_down("the replica is installing a snapshot"),
            },
        }
    }

    fn info(&self, section: Option<&str>, stats: &ServerStats) -> Reply {
        let all = matches!(section, None | Some("all") | Some("default") | Some("everything"));
        let mine = matches!(section, Some("replication") | Some("cluster"));
        let mut text = String::new();
        if !mine {
            let Some(engine) = self.replica.state().engine() else {
                return cluster_down("the replica is installing a snapshot");
            };
            match info_text(&engine, stats, section) {
                Some(t) => text = t,
                None => return Reply::error(&ServerError::UnknownInfoSection),
            }
        }
        if all || mine {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            text.push_str(&self.replication_info());
        }
        Reply::Bulk(text.into_bytes())
    }

    fn replication_info(&self) -> String {
        let m = self.replica.metrics();
        let s = &self.replica.stats;
        let st = self.replica.state();
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let opt = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
        let leader = m.current_leader == Some(self.me);
        let mut t = String::from("# Replication\r\n");
        let mut kv = |k: &str, v: String| {
            let _ = write!(t, "{k}:{v}\r\n");
        };
        kv("role", if leader { "master" } else { "slave" }.into());
        kv("cluster_enabled", "1".into());
        kv("shard", self.topo.shards[self.shard].id.to_string());
        kv("node_id", self.me.to_string());
        kv("replicas", self.topo.shards[self.shard].replicas.len().to_string());
        kv("consistency", format!("{:?}", self.topo.consistency).to_ascii_lowercase());
        kv("raft_state", format!("{:?}", m.state).to_ascii_lowercase());
        kv("raft_term", m.current_term.to_string());
        kv("raft_leader", opt(m.current_leader));
        kv("raft_last_log_index", opt(m.last_log_index));
        kv("raft_applied_index", opt(st.applied().map(|l| l.index)));
        kv("raft_snapshot_index", opt(m.snapshot.map(|l| l.index)));
        kv("raft_purged_index", opt(m.purged.map(|l| l.index)));
        kv("raft_millis_since_quorum_ack", opt(m.millis_since_quorum_ack));
        kv("raft_log_sync", wal_sync_name(self.replica_wal_sync()).into());
        kv("raft_log_syncs", self.replica.log().syncs().to_string());
        kv("raft_entries_proposed", load(&s.entries_proposed).to_string());
        kv("raft_writes_proposed", load(&s.writes_proposed).to_string());
        kv("raft_read_rounds", load(&s.read_rounds).to_string());
        kv("raft_elections_started", load(&s.elections).to_string());
        kv("raft_prevotes_lost", load(&s.prevotes_lost).to_string());
        kv("raft_reads_waited", load(&s.reads_waited).to_string());
        kv("raft_snapshots_built", load(&st.snapshots_built).to_string());
        kv("raft_snapshots_installed", load(&st.snapshots_installed).to_string());
        kv("raft_bus_failures", self.replica.bus_failures().to_string());
        t
    }

    fn replica_wal_sync(&self) -> cosine_config::WalSync {
        match self.replica.log().policy() {
            cosine_raft::log_store::LogSync::EveryWrite => cosine_config::WalSync::EveryWrite,
            cosine_raft::log_store::LogSync::GroupCommit(_) => cosine_config::WalSync::GroupCommit,
            cosine_raft::log_store::LogSync::None => cosine_config::WalSync::None,
        }
    }

    /// `CLUSTER SLOTS | SHARDS | NODES | INFO | MYID | MYSHARDID | KEYSLOT key`.
    fn cluster(&self, sub: &str, args: &[Vec<u8>]) -> Reply {
        let int = |n: u64| Reply::Int(n as i64);
        let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        match sub {
            "SLOTS" => {
                let mut out = Vec::new();
                for (i, shard) in self.topo.shards.iter().enumerate() {
                    let leader = self.shown_leader(i);
                    let node = |r: &ReplicaAddr| Reply::Array(vec![bulk(&r.host), int(r.port as u64), bulk(&r.name())]);
                    for [lo, hi] in &shard.slots {
                        let mut e = vec![int(*lo as u64), int(*hi as u64), node(leader)];
                        e.extend(shard.replicas.iter().filter(|r| r.id != leader.id).map(node));
                        out.push(Reply::Array(e));
                    }
                }
                Reply::Array(out)
            }
            "SHARDS" => {
                let mut out = Vec::new();
                for (i, shard) in self.topo.shards.iter().enumerate() {
                    let leader = self.shown_leader(i).id;
                    let slots = shard.slots.iter().flat_map(|[lo, hi]| [int(*lo as u64), int(*hi as u64)]).collect();
                    let nodes = shard
                        .replicas
                        .iter()
                        .map(|r| {
                            let offset = if r.id == self.me { self.replica.state().applied().map_or(0, |l| l.index) } else { 0 };
                            Reply::Array(vec![
                                bulk("id"),
                                bulk(&r.name()),
                                bulk("port"),
                                int(r.port as u64),
                                bulk("ip"),
                                bulk(&r.host),
                                bulk("endpoint"),
                                bulk(&r.host),
                                bulk("role"),
                                bulk(if r.id == leader { "master" } else { "replica" }),
                                bulk("replication-offset"),
                                int(offset),
                                bulk("health"),
                                bulk("online"),
                            ])
                        })
                        .collect();
                    out.push(Reply::Array(vec![bulk("slots"), Reply::Array(slots), bulk("nodes"), Reply::Array(nodes)]));
                }
                Reply::Array(out)
            }
            "NODES" => {
                let mut text = String::new();
                for (i, shard) in self.topo.shards.iter().enumerate() {
                    let leader = self.shown_leader(i).id;
                    let term = if i == self.shard { self.replica.metrics().current_term } else { self.leaders[i].lock().term };
                    for r in &shard.replicas {
                        let me = if r.id == self.me { "myself," } else { "" };
                        let (role, master) = if r.id == leader { ("master", "-".to_string()) } else { ("slave", node_name(leader)) };
                        let _ = write!(text, "{} {}:{}@{} {me}{role} {master} 0 0 {term} connected", r.name(), r.host, r.port, r.bus_port);
                        if r.id == leader {
                            for [lo, hi] in &shard.slots {
                                let _ = if lo == hi { write!(text, " {lo}") } else { write!(text, " {lo}-{hi}") };
                            }
                        }
                        text.push('\n');
                    }
                }
                Reply::Bulk(text.into_bytes())
            }
            "INFO" => {
                let known = (0..self.topo.shards.len()).all(|i| self.leader_of(i).is_some());
                let term = self.replica.metrics().current_term;
                let nodes: usize = self.topo.shards.iter().map(|s| s.replicas.len()).sum();
                let text = format!(
                    "cluster_enabled:1\r\ncluster_state:{}\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n\
                     cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{nodes}\r\ncluster_size:{}\r\n\
                     cluster_current_epoch:{term}\r\ncluster_my_epoch:{term}\r\n",
                    if known { "ok" } else { "fail" },
                    self.topo.shards.len()
                );
                Reply::Bulk(text.into_bytes())
            }
            "MYID" => bulk(&node_name(self.me)),
            "MYSHARDID" => bulk(&format!("{:040x}", self.topo.shards[self.shard].id)),
            "KEYSLOT" => match args {
                [k] => int(key_slot(k) as u64),
                _ => Reply::err("wrong number of arguments for 'cluster|keyslot' command"),
            },
            other => Reply::err(format!(
                "unknown subcommand '{}'. Try CLUSTER SLOTS, SHARDS, NODES, INFO, MYID, MYSHARDID, KEYSLOT.",
                other.chars().take(32).collect::<String>().escape_default()
            )),
        }
    }
}
