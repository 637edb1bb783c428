//! The peer bus: the Raft RPCs between the replicas of a shard, over TCP (Redis Cluster
//! keeps its bus on a port of its own too).
//!
//! A frame is `[len u32 little-endian][bincode]`. A connection carries one request at a
//! time and its response (openraft drives each peer from one task). A snapshot is a
//! [`BusRequest::Snapshot`] header naming its files and their lengths, then the files'
//! bytes, in order; the receiver writes them into a new directory and installs them.
//! [`BusRequest::Leader`] asks a replica whom it follows, whether it heard from that leader
//! within the leader lease, and whether the asker's log is at least as up to date as its own
//! (the other shards' servers route with it; the pre-vote asks it).

use crate::log_store::LogStore;
use crate::replica::Contact;
use crate::state_machine::SNAPSHOT_META;
use crate::types::{LogId, NodeId, Raft, SnapshotFiles, SnapshotMeta, TypeConfig, Vote};
use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError, Timeout, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, SnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Snapshot};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest frame accepted (an append of `max_payload_entries` large batches fits).
pub const MAX_FRAME: usize = 1 << 30;
/// How long a failed peer is left alone before the next attempt.
pub const BACKOFF: Duration = Duration::from_millis(200);
/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// A request on the bus.
#[derive(Debug, Serialize, Deserialize)]
pub enum BusRequest {
    /// AppendEntries (and heartbeats).
    Append(AppendEntriesRequest<TypeConfig>),
    /// RequestVote.
    Vote(VoteRequest<NodeId>),
    /// A snapshot follows: its files (name, bytes), in the order their bytes follow.
    Snapshot {
        /// The leader's vote.
        vote: Vote,
        /// What the snapshot holds.
        meta: SnapshotMeta,
        /// Its files.
        files: Vec<(String, u64)>,
    },
    /// Whom do you follow? Would you vote for a log ending at `last_log_id` (the pre-vote)?
    Leader {
        /// The asker's last log id (None: an empty log, or an asker that only routes).
        last_log_id: Option<LogId>,
    },
}

/// A response on the bus.
#[derive(Debug, Serialize, Deserialize)]
pub enum BusResponse {
    /// To [`BusRequest::Append`].
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`BusRequest::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To [`BusRequest::Snapshot`].
    Snapshot(Result<SnapshotResponse<NodeId>, String>),
    /// To [`BusRequest::Leader`]: the leader this replica knows, in its current term.
    Leader {
        /// The leader's id.
        leader: Option<NodeId>,
        /// This replica's term.
        term: u64,
        /// It heard from that leader within the lease (a leader: a majority acknowledged it
        /// within the lease): it would refuse a vote now.
        fresh: bool,
        /// The asker's log is at least as up to date as this replica's: it would not refuse
        /// the asker's vote for its log (openraft's `handle_vote_req`).
        log_ok: bool,
    },
}

/// A replica's answer to [`BusRequest::Leader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderAnswer {
    /// The leader it knows.
    pub leader: Option<NodeId>,
    /// Its term.
    pub term: u64,
    /// It heard from that leader within the lease.
    pub fresh: bool,
    /// The asker's log is at least as up to date as its own.
    pub log_ok: bool,
}

impl LeaderAnswer {
    /// It would grant the asker a pre-vote: no leader within the lease, and the asker's log
    /// at least as up to date (the Raft thesis, section 9.6).
    pub fn grants_prevote(&self) -> bool {
        !self.fresh && self.log_ok
    }
}

/// Writes one frame.
pub async fn write_frame<T: Serialize>(s: &mut TcpStream, v: &T) -> io::Result<()> {
    let body = bincode::serialize(v).map_err(io::Error::other)?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    s.write_all(&out).await
}

/// Reads one frame.
pub async fn read_frame<T: DeserializeOwned>(s: &mut TcpStream) -> io::Result<T> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await?;
    bincode::deserialize(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

async fn connect(addr: &str) -> io::Result<TcpStream> {
    let s = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {addr}")))??;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Makes one [`Peer`] per replica openraft talks to.
#[derive(Debug, Clone, Default)]
pub struct Network {
    /// Bus RPCs that failed (connection refused, reset, timed out), for `INFO`.
    pub failures: Arc<AtomicU64>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer { target, addr: node.addr.clone(), conn: None, failures: self.failures.clone() }
    }
}

/// The connection to one peer.
#[derive(Debug)]
pub struct Peer {
    target: NodeId,
    addr: String,
    conn: Option<TcpStream>,
    failures: Arc<AtomicU64>,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl Peer {
    /// One request and its response within `ttl`; the connection is dropped on any failure.
    async fn call(
        &mut self,
        req: &BusRequest,
        ttl: Duration,
        action: RPCTypes,
    ) -> Result<BusResponse, RPCError<NodeId, BasicNode, Unreachable>> {
        let res = tokio::time::timeout(ttl, async {
            if self.conn.is_none() {
                self.conn = Some(connect(&self.addr).await?);
            }
            let Some(c) = self.conn.as_mut() else { return Err(io::Error::other("no connection")) };
            write_frame(c, req).await?;
            read_frame::<BusResponse>(c).await
        })
        .await;
        match res {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.conn = None;
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(_) => {
                self.conn = None;
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(RPCError::Timeout(Timeout { action, id: 0, target: self.target, timeout: ttl }))
            }
        }
    }

    fn remote<E: std::error::Error>(&self, e: E) -> RemoteError<NodeId, BasicNode, E> {
        RemoteError { target: self.target, target_node: None, source: e }
    }
}

fn widen<E: std::error::Error>(e: RPCError<NodeId, BasicNode, Unreachable>) -> RpcErr<E> {
    match e {
        RPCError::Timeout(t) => RPCError::Timeout(t),
        RPCError::Unreachable(u) => RPCError::Unreachable(u),
        RPCError::PayloadTooLarge(p) => RPCError::PayloadTooLarge(p),
        RPCError::Network(n) => RPCError::Network(n),
        RPCError::RemoteError(r) => RPCError::Unreachable(r.source),
    }
}

fn unexpected<E: std::error::Error>(what: &BusResponse) -> RpcErr<E> {
    RPCError::Network(NetworkError::new(&io::Error::other(format!("unexpected response {what:?}"))))
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        match self.call(&BusRequest::Append(rpc), option.hard_ttl(), RPCTypes::AppendEntries).await.map_err(widen)? {
            BusResponse::Append(Ok(r)) => Ok(r),
            BusResponse::Append(Err(e)) => Err(RPCError::RemoteError(self.remote(e))),
            other => Err(unexpected(&other)),
        }
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> Result<VoteResponse<NodeId>, RpcErr> {
        match self.call(&BusRequest::Vote(rpc), option.hard_ttl(), RPCTypes::Vote).await.map_err(widen)? {
            BusResponse::Vote(Ok(r)) => Ok(r),
            BusResponse::Vote(Err(e)) => Err(RPCError::RemoteError(self.remote(e))),
            other => Err(unexpected(&other)),
        }
    }

    #[allow(deprecated)]
    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcErr<InstallSnapshotError>> {
        Err(RPCError::Network(NetworkError::new(&io::Error::other("snapshots are sent whole (full_snapshot)"))))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let send = send_snapshot(&self.addr, vote, snapshot);
        let res = tokio::select! {
            r = send => r,
            closed = cancel => return Err(StreamingError::Closed(closed)),
        };
        match res {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(remote)) => Err(StreamingError::Network(NetworkError::new(&io::Error::other(remote)))),
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(StreamingError::Unreachable(Unreachable::new(&e)))
            }
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(BACKOFF))
    }
}

/// Sends a snapshot's files on a connection of its own; the receiver's answer.
async fn send_snapshot(addr: &str, vote: Vote, snapshot: Snapshot<TypeConfig>) -> io::Result<Result<SnapshotResponse<NodeId>, String>> {
    let dir = snapshot.snapshot.dir().to_path_buf();
    let mut files = Vec::new();
    for e in std::fs::read_dir(&dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name != SNAPSHOT_META {
            files.push((name, e.metadata()?.len()));
        }
    }
    let mut conn = connect(addr).await?;
    write_frame(&mut conn, &BusRequest::Snapshot { vote, meta: snapshot.meta.clone(), files: files.clone() }).await?;
    for (name, len) in &files {
        let mut f = tokio::fs::File::open(dir.join(name)).await?;
        let sent = tokio::io::copy(&mut (&mut f).take(*len), &mut conn).await?;
        if sent != *len {
            return Err(io::Error::other(format!("{name}: {sent} bytes of {len}")));
        }
    }
    conn.flush().await?;
    match read_frame::<BusResponse>(&mut conn).await? {
        BusResponse::Snapshot(r) => Ok(r),
        other => Err(io::Error::other(format!("unexpected response {other:?}"))),
    }
}

/// Serves the bus on `listener` for `raft` until the runtime stops; `data_dir` is where
/// received snapshots are written (the replica's directory: the same file system as its engine).
/// Every append or snapshot a leader sends that is not refused touches `contact`.
pub async fn serve(listener: TcpListener, raft: Raft, data_dir: PathBuf, contact: Arc<Contact>, log: LogStore) {
    let seq = Arc::new(AtomicU64::new(0));
    loop {
        let Ok((sock, _)) = listener.accept().await else { continue };
        let (raft, dir, seq, contact, log) = (raft.clone(), data_dir.clone(), seq.clone(), contact.clone(), log.clone());
        tokio::spawn(async move {
            let _ = sock.set_nodelay(true);
            let _ = connection(sock, raft, dir, seq, contact, log).await;
        });
    }
}

async fn connection(
    mut sock: TcpStream,
    raft: Raft,
    dir: PathBuf,
    seq: Arc<AtomicU64>,
    contact: Arc<Contact>,
    log: LogStore,
) -> io::Result<()> {
    loop {
        let req: BusRequest = match read_frame(&mut sock).await {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let resp = match req {
            BusRequest::Append(r) => {
                let res = raft.append_entries(r).await;
                if matches!(res, Ok(ref a) if !matches!(a, AppendEntriesResponse::HigherVote(_))) {
                    contact.touch();
                }
                BusResponse::Append(res)
            }
            BusRequest::Vote(r) => BusResponse::Vote(raft.vote(r).await),
            BusRequest::Leader { last_log_id } => {
                let m = raft.metrics().borrow().clone();
                let mine = log.bounds().1;
                BusResponse::Leader {
                    leader: m.current_leader,
                    term: m.current_term,
                    fresh: contact.fresh(&m),
                    log_ok: last_log_id >= mine,
                }
            }
            BusRequest::Snapshot { vote, meta, files } => {
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let to = dir.join(format!("tmp-recv-{}-{n}", std::process::id()));
                let received = receive_files(&mut sock, &to, &files).await;
                let files = SnapshotFiles::temporary(to);
                BusResponse::Snapshot(match received {
                    Err(e) => {
                        drop(files);
                        return Err(e); // the stream is out of step: drop the connection
                    }
                    Ok(()) => {
                        raft.install_full_snapshot(vote, Snapshot { meta, snapshot: Box::new(files) }).await.map_err(|e| e.to_string())
                    }
                })
            }
        };
        write_frame(&mut sock, &resp).await?;
    }
}

async fn receive_files(sock: &mut TcpStream, to: &std::path::Path, files: &[(String, u64)]) -> io::Result<()> {
    tokio::fs::create_dir(to).await?;
    for (name, len) in files {
        if name.contains('/') || name.starts_with('.') {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad snapshot file name {name:?}")));
        }
        let mut f = tokio::fs::File::create(to.join(name)).await?;
        let got = tokio::io::copy(&mut (&mut *sock).take(*len), &mut f).await?;
        if got != *len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{name}: {got} bytes of {len}")));
        }
        f.sync_all().await?;
    }
    std::fs::File::open(to)?.sync_all()
}

/// Asks the replica at `addr` whom it follows and whether it would grant a pre-vote to a log
/// ending at `last_log_id` (None from a server that only routes).
pub async fn ask_leader(addr: &str, conn: &mut Option<TcpStream>, ttl: Duration, last_log_id: Option<LogId>) -> io::Result<LeaderAnswer> {
    let res = tokio::time::timeout(ttl, async {
        if conn.is_none() {
            *conn = Some(connect(addr).await?);
        }
        let Some(c) = conn.as_mut() else { return Err(io::Error::other("no connection")) };
        write_frame(c, &BusRequest::Leader { last_log_id }).await?;
        read_frame::<BusResponse>(c).await
    })
    .await
    .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no answer")));
    match res {
        Ok(BusResponse::Leader { leader, term, fresh, log_ok }) => Ok(LeaderAnswer { leader, term, fresh, log_ok }),
        Ok(other) => {
            *conn = None;
            Err(io::Error::other(format!("unexpected response {other:?}")))
        }
        Err(e) => {
            *conn = None;
            Err(e)
        }
    }
}
