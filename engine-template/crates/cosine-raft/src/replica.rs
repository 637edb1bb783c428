//! One replica of a shard: its Raft node, its engine, its bus, and the two doors the
//! server uses: [`Replica::write`] and [`Replica::read_barrier`].
//!
//! **Writes are batched** before they enter the log. openraft 0.9 appends each client
//! request as one entry, and its core waits for that append's durability before it goes
//! on, so one request per entry would cost one fdatasync each. The proposer takes every
//! write request waiting when the previous entry is done (at most [`MAX_IN_FLIGHT`] in flight,
//! each at most [`MAX_ENTRY_OPS`] writes or [`MAX_ENTRY_BYTES`]) into one entry: the engine's
//! write groups, one level up. A request's answer comes once its entry is committed (a
//! majority has it durable under the design's `wal_sync`) and applied on this leader.
//!
//! **Elections with a pre-vote.** openraft 0.9 has no pre-vote: a follower cut off for longer
//! than its election timeout (a paused process) stands for election when it comes back, with a
//! higher term, and the leader that hears of that term steps down (measured: ~0.9 s without a
//! leader after a follower's SIGSTOP/SIGCONT). So openraft's own election timer is off and
//! [`elections`] stands instead: once this replica has not heard from a leader for a random
//! `[election_min_ms, election_max_ms)`, it asks the other replicas whether they still hear
//! from one (within the leader lease, `election_max_ms`, after which openraft grants votes) and
//! whether its log is at least as up to date as theirs, and triggers openraft's election only
//! if a majority, itself included, grants both (the Raft thesis's pre-vote, section 9.6).
//! Without the log check, a replica whose log is behind stood again and again after a split
//! vote: openraft refuses its vote for the log without taking its term, so its term ran ahead
//! and the replica with the longer log, standing with lower terms, was refused too (measured:
//! 20 elections each and no leader for over 10 s, with both replicas' timeouts in 300-600 ms).
//! Safety is openraft's vote; this only decides when to ask for one.
//!
//! **Linearizable reads** confirm leadership with a heartbeat round to a majority and wait
//! until the state machine has applied everything committed before (openraft's
//! `ensure_linearizable`, the Raft paper's read-index). Concurrent readers share rounds: a
//! reader joins the next round that starts after it arrived, never one already under way.

use crate::log_store::{LogStore, LogSync};
use crate::network::Network;
use crate::state_machine::{Shared, StateMachine};
use crate::types::{NodeId, Raft, Request, WriteOp};
use cosine_config::Config;
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, RaftMetrics, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Entries the proposer keeps in flight at once. One: openraft 0.9's core handles an
/// entry at a time (local append and sync, then replication), so entries queued behind it
/// only wait there; waiting in the proposer instead, they join the next entry. Measured with
/// redis-benchmark --cluster (2 shards x 3 replicas, 50 clients, `every_write`, this 2-core
/// machine): 1 in flight 6,217 SET/s at p50 6.2 ms (12 writes per entry), 2: 4,152/s at
/// 10.6 ms, 4: 4,857/s at 9.2 ms.
pub const MAX_IN_FLIGHT: usize = 1;
/// Most writes one entry carries.
pub const MAX_ENTRY_OPS: usize = 4096;
/// Most bytes of keys and values one entry carries.
pub const MAX_ENTRY_BYTES: usize = 4 << 20;
/// The log's directory in a replica's directory.
pub const LOG_DIR: &str = "raft";

/// Timing and snapshot policy of a shard's Raft group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Milliseconds between a leader's heartbeats.
    pub heartbeat_ms: u64,
    /// A follower that hears no leader for a time drawn from `[election_min_ms, election_max_ms)` stands.
    pub election_min_ms: u64,
    /// See `election_min_ms`.
    pub election_max_ms: u64,
    /// A snapshot is built once this many entries were applied since the last one.
    pub snapshot_entries: u64,
    /// Entries kept in the log behind a snapshot (a follower that far behind catches up from the log).
    pub keep_entries: u64,
    /// How long a write or a read barrier may wait for the group before the client is told to retry.
    pub request_timeout_ms: u64,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            heartbeat_ms: 100,
            election_min_ms: 500,
            election_max_ms: 1000,
            snapshot_entries: 20_000,
            keep_entries: 1000,
            request_timeout_ms: 5000,
        }
    }
}

/// What a replica needs to start.
#[derive(Debug, Clone)]
pub struct ReplicaSpec {
    /// This replica's id.
    pub id: NodeId,
    /// Every member of the shard (this one included): id -> bus address.
    pub members: BTreeMap<NodeId, String>,
    /// The replica's directory (engine, snapshots, log).
    pub dir: PathBuf,
    /// The group's timing.
    pub timing: Timing,
}

/// Why a request was not served here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// This replica does not lead its shard; the leader it knows, if any.
    NotLeader(Option<NodeId>),
    /// The group could not answer in time (no majority, an election); retry.
    Unavailable(String),
    /// The replica stopped (its log or engine failed).
    Stopped(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NotLeader(Some(l)) => write!(f, "not the leader (node {l} is)"),
            ClientError::NotLeader(None) => write!(f, "not the leader (no leader known)"),
            ClientError::Unavailable(m) => write!(f, "unavailable: {m}"),
            ClientError::Stopped(m) => write!(f, "replica stopped: {m}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Why a replica cannot start.
#[derive(Debug)]
pub enum StartError {
    /// The log cannot be opened.
    Log(String),
    /// The engine or a snapshot cannot be opened.
    Engine(std::io::Error),
    /// openraft refused the configuration or failed to start.
    Raft(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Log(m) => write!(f, "the Raft log: {m}"),
            StartError::Engine(e) => write!(f, "the engine: {e}"),
            StartError::Raft(m) => write!(f, "raft: {m}"),
        }
    }
}

impl std::error::Error for StartError {}

type Reply = oneshot::Sender<Result<Vec<i64>, ClientError>>;

struct Proposal {
    ops: Vec<WriteOp>,
    reply: Reply,
}

/// A reader waiting for a heartbeat round.
type Waiter = oneshot::Sender<Result<(), ClientError>>;

/// Concurrent read barriers sharing heartbeat rounds: (a round runs, the readers for the next).
#[derive(Default)]
struct Barrier {
    state: Mutex<(bool, Vec<Waiter>)>,
}

/// When this replica last heard from a leader (an append or a snapshot it accepted), and
/// whether that is recent enough to refuse a vote (the pre-vote's question).
#[derive(Debug)]
pub struct Contact {
    base: Instant,
    last_ms: AtomicU64,
    lease: Duration,
}

impl Contact {
    /// Heard from no one yet; `lease` is openraft's leader lease (`election_max_ms`).
    pub fn new(lease: Duration) -> Contact {
        Contact { base: Instant::now(), last_ms: AtomicU64::new(0), lease }
    }

    /// A leader was heard from now.
    pub fn touch(&self) {
        self.last_ms.store(self.base.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Since a leader was last heard from (or since start).
    pub fn since(&self) -> Duration {
        self.base.elapsed().saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }

    /// This replica would refuse a vote now: it leads and a majority acknowledged it within
    /// the lease, or it follows a leader it heard from within the lease.
    pub fn fresh(&self, m: &RaftMetrics<NodeId, BasicNode>) -> bool {
        let lease = self.lease.as_millis() as u64;
        match m.state {
            ServerState::Leader => m.millis_since_quorum_ack.is_some_and(|ms| ms < lease),
            _ => m.current_leader.is_some() && self.since() < self.lease,
        }
    }
}

/// Counters of one replica (for `INFO replication`).
#[derive(Debug, Default)]
pub struct ReplicaStats {
    /// Log entries proposed by this replica as leader.
    pub entries_proposed: AtomicU64,
    /// Writes they carried.
    pub writes_proposed: AtomicU64,
    /// Read barriers (heartbeat rounds) run.
    pub read_rounds: AtomicU64,
    /// Reads that waited for them.
    pub reads_waited: AtomicU64,
    /// Elections this replica triggered after its pre-vote.
    pub elections: AtomicU64,
    /// Elections its pre-vote held back (a majority still heard from a leader).
    pub prevotes_lost: AtomicU64,
}

/// One running replica.
pub struct Replica {
    id: NodeId,
    raft: Raft,
    shared: Arc<Shared>,
    log: LogStore,
    network: Network,
    proposals: mpsc::Sender<Proposal>,
    barrier: Arc<Barrier>,
    timeout: Duration,
    /// The replica's counters.
    pub stats: Arc<ReplicaStats>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("id", &self.id).finish()
    }
}

fn client_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ClientError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ClientError::NotLeader(f.leader_id),
        RaftError::APIError(e) => ClientError::Unavailable(e.to_string()),
        RaftError::Fatal(e) => ClientError::Stopped(e.to_string()),
    }
}

impl Replica {
    /// Opens the log and the engine in `spec.dir`, starts the Raft node and serves the bus
    /// on `bus`. A pristine group is initialized with `spec.members` by its lowest id at once,
    /// and by the others if no leader reached them within a few election timeouts.
    /// Must run inside a multi-threaded tokio runtime.
    pub async fn start(spec: ReplicaSpec, cfg: &Config, bus: TcpListener) -> Result<Replica, StartError> {
        let log = LogStore::open(&spec.dir.join(LOG_DIR), LogSync::of(&cfg.durability)).map_err(|e| StartError::Log(e.to_string()))?;
        let sm = StateMachine::open(&spec.dir, cfg).map_err(StartError::Engine)?;
        let shared = sm.shared();
        let t = spec.timing;
        let config = openraft::Config {
            cluster_name: "cosine-shard".into(),
            heartbeat_interval: t.heartbeat_ms,
            election_timeout_min: t.election_min_ms,
            election_timeout_max: t.election_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_entries),
            max_in_snapshot_log_to_keep: t.keep_entries,
            max_payload_entries: 64,
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Raft(e.to_string()))?;
        let network = Network::default();
        let raft =
            Raft::new(spec.id, Arc::new(config), network.clone(), log.clone(), sm).await.map_err(|e| StartError::Raft(e.to_string()))?;
        // elections are decided by the pre-vote (see the module doc)
        raft.runtime_config().elect(false);
        let contact = Arc::new(Contact::new(Duration::from_millis(t.election_max_ms)));
        tokio::spawn(crate::network::serve(bus, raft.clone(), spec.dir.clone(), contact.clone(), log.clone()));
        let members: BTreeMap<NodeId, BasicNode> = spec.members.iter().map(|(id, a)| (*id, BasicNode::new(a))).collect();
        let first = spec.members.keys().next().copied() == Some(spec.id);
        let r = raft.clone();
        let wait = Duration::from_millis(3 * t.election_max_ms);
        tokio::spawn(async move {
            if !first {
                tokio::time::sleep(wait).await;
            }
            if let Ok(false) = r.is_initialized().await {
                let _ = r.initialize(members).await;
            }
        });
        let (tx, rx) = mpsc::channel::<Proposal>(4096);
        let stats = Arc::new(ReplicaStats::default());
        let peers: Vec<String> = spec.members.iter().filter(|(id, _)| **id != spec.id).map(|(_, a)| a.clone()).collect();
        tokio::spawn(elections(raft.clone(), contact, log.clone(), peers, t, spec.id, stats.clone()));
        let timeout = Duration::from_millis(t.request_timeout_ms);
        tokio::spawn(proposer(raft.clone(), rx, stats.clone(), timeout));
        Ok(Replica { id: spec.id, raft, shared, log, network, proposals: tx, barrier: Arc::new(Barrier::default()), timeout, stats })
    }

    /// This replica's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The Raft handle.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The engine, the applied index (what a read on this replica sees).
    pub fn state(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The log (bounds and syncs, for `INFO`).
    pub fn log(&self) -> &LogStore {
        &self.log
    }

    /// Bus RPCs that failed since start.
    pub fn bus_failures(&self) -> u64 {
        self.network.failures.load(Ordering::Relaxed)
    }

    /// openraft's view of this replica.
    pub fn metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// The leader this replica knows of.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Waits until a leader is known (at most `wait`); the leader.
    pub async fn wait_leader(&self, wait: Duration) -> Option<NodeId> {
        let mut rx = self.raft.metrics();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(l) = rx.borrow().current_leader {
                return Some(l);
            }
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                return None;
            }
        }
    }

    /// Replicates `ops` and returns their results once committed and applied here, or why not.
    pub async fn write(&self, ops: Vec<WriteOp>) -> Result<Vec<i64>, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.proposals.send(Proposal { ops, reply: tx }).await.map_err(|_| ClientError::Stopped("the proposer stopped".into()))?;
        rx.await.map_err(|_| ClientError::Unavailable("the write's entry was dropped".into()))?
    }

    /// Returns once a read on this replica's engine is linearizable: this replica leads and
    /// has applied everything committed before the call.
    pub async fn read_barrier(&self) -> Result<(), ClientError> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut st = self.barrier.state.lock();
            st.1.push(tx);
            !std::mem::replace(&mut st.0, true)
        };
        if start {
            tokio::spawn(rounds(self.raft.clone(), self.barrier.clone(), self.stats.clone(), self.timeout));
        }
        rx.await.map_err(|_| ClientError::Unavailable("the read barrier was dropped".into()))?
    }

    /// Resolves with a message once the Raft node has stopped on a fatal error.
    pub async fn stopped(&self) -> String {
        let mut rx = self.raft.metrics();
        loop {
            if let Err(e) = &rx.borrow().running_state {
                return e.to_string();
            }
            if rx.changed().await.is_err() {
                return "the Raft node stopped".into();
            }
        }
    }

    /// Stops the Raft node and closes the engine (flushing its memtable).
    pub async fn shutdown(&self) -> std::io::Result<()> {
        let _ = self.raft.shutdown().await;
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.close()).await.map_err(std::io::Error::other)?
    }
}

/// Stands for election when no leader was heard from for a random election timeout and the
/// pre-vote passes (see the module doc). A lone replica stands at once.
async fn elections(raft: Raft, contact: Arc<Contact>, log: LogStore, peers: Vec<String>, t: Timing, id: NodeId, stats: Arc<ReplicaStats>) {
    let span = t.election_max_ms.saturating_sub(t.election_min_ms).max(1);
    let mut seed = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ contact.base.elapsed().as_nanos() as u64 ^ u64::from(std::process::id());
    let mut draw = move || {
        // splitmix64
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Duration::from_millis(t.election_min_ms + (z ^ (z >> 31)) % span)
    };
    let mut timeout = draw();
    let mut tried = Instant::now();
    let mut conns: Vec<Option<tokio::net::TcpStream>> = peers.iter().map(|_| None).collect();
    let tick = Duration::from_millis((t.heartbeat_ms / 2).max(5));
    let ask = Duration::from_millis(t.heartbeat_ms.max(50));
    loop {
        tokio::time::sleep(tick).await;
        let m = raft.metrics().borrow().clone();
        if m.running_state.is_err() {
            return;
        }
        if m.state == ServerState::Leader {
            contact.touch();
            continue;
        }
        if !m.membership_config.membership().voter_ids().any(|v| v == id) {
            continue; // not initialized yet (or not a voter)
        }
        // (not the contact: a replica's own failed pre-vote is no news of a leader, and touching
        // it would make it answer "fresh" to the others, who would then never stand either)
        if !peers.is_empty() && (contact.since() < timeout || tried.elapsed() < timeout) {
            continue;
        }
        let replicas = peers.len() + 1;
        let majority = replicas / 2 + 1;
        let mut grants = 1;
        let mine = log.bounds().1;
        for (addr, conn) in peers.iter().zip(conns.iter_mut()) {
            if crate::network::ask_leader(addr, conn, ask, mine).await.is_ok_and(|a| a.grants_prevote()) {
                grants += 1;
            }
        }
        if grants >= majority {
            stats.elections.fetch_add(1, Ordering::Relaxed);
            let _ = raft.trigger().elect().await;
        } else {
            stats.prevotes_lost.fetch_add(1, Ordering::Relaxed);
        }
        tried = Instant::now();
        timeout = draw();
    }
}

/// Runs heartbeat rounds while readers wait: each round answers the readers registered before it began.
async fn rounds(raft: Raft, barrier: Arc<Barrier>, stats: Arc<ReplicaStats>, timeout: Duration) {
    loop {
        let waiters = {
            let mut st = barrier.state.lock();
            if st.1.is_empty() {
                st.0 = false;
                return;
            }
            std::mem::take(&mut st.1)
        };
        stats.read_rounds.fetch_add(1, Ordering::Relaxed);
        stats.reads_waited.fetch_add(waiters.len() as u64, Ordering::Relaxed);
        let res = match tokio::time::timeout(timeout, raft.ensure_linearizable()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f)))) => {
                Err(ClientError::NotLeader(f.leader_id))
            }
            Ok(Err(RaftError::APIError(e))) => Err(ClientError::Unavailable(e.to_string())),
            Ok(Err(RaftError::Fatal(e))) => Err(ClientError::Stopped(e.to_string())),
            Err(_) => Err(ClientError::Unavailable(format!("no majority answered within {} ms", timeout.as_millis()))),
        };
        for w in waiters {
            let _ = w.send(res.clone());
        }
    }
}

/// Batches waiting write requests into entries (see the module doc).
async fn proposer(raft: Raft, mut rx: mpsc::Receiver<Proposal>, stats: Arc<ReplicaStats>, timeout: Duration) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let mut batch = vec![first];
        let (mut ops, mut bytes) = (batch[0].ops.len(), batch[0].ops.iter().map(WriteOp::bytes).sum::<usize>());
        while ops < MAX_ENTRY_OPS && bytes < MAX_ENTRY_BYTES {
            match rx.try_recv() {
                Ok(p) => {
                    ops += p.ops.len();
                    bytes += p.ops.iter().map(WriteOp::bytes).sum::<usize>();
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        stats.entries_proposed.fetch_add(1, Ordering::Relaxed);
        stats.writes_proposed.fetch_add(ops as u64, Ordering::Relaxed);
        let raft = raft.clone();
        tokio::spawn(async move {
            let counts: Vec<usize> = batch.iter().map(|p| p.ops.len()).collect();
            let mut replies = Vec::with_capacity(batch.len());
            let mut all = Vec::with_capacity(ops);
            for p in batch {
                all.extend(p.ops);
                replies.push(p.reply);
            }
            let res = match tokio::time::timeout(timeout, raft.client_write(Request { ops: all })).await {
                Ok(Ok(r)) => Ok(r.data.results),
                Ok(Err(e)) => Err(client_error(e)),
                Err(_) => Err(ClientError::Unavailable(format!("not committed within {} ms", timeout.as_millis()))),
            };
            drop(permit);
            match res {
                Ok(results) => {
                    let mut it = results.into_iter();
                    for (reply, n) in replies.into_iter().zip(counts) {
                        let _ = reply.send(Ok(it.by_ref().take(n).collect()));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        });
    }
}
