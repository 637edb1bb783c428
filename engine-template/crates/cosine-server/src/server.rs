//! The network side: an accept loop on tokio, one task per connection, pipelined
//! batches, and a graceful shutdown.
//!
//! A connection parses every complete request already received (a pipeline) into one
//! batch and runs it (point reads and writes, and short scans of a tree, on the network task;
//! INFO, long scans and a hash log's (it walks its whole index) on tokio's blocking pool; see
//! [`Command::is_quick`]). If
//! the batch wrote, its replies wait *once* for the WAL policy's durability
//! of its own writes ([`Engine::durable_mark`]) in a reply queue, while the next batches already run; the
//! replies leave in request order. So an `+OK` to a `SET` is never sent before the write
//! is durable, pipelined writes share one sync, and a proxy multiplexing many clients on
//! one connection keeps the shard busy during group commits.
//!
//! Running ahead of the replies is bounded twice. A batch hands its replies to the
//! writer every [`ServerConfig::max_batch_bytes`] (a pipeline of large values streams
//! instead of being produced whole first), and at most [`REPLY_QUEUE`] such pieces wait
//! for the writer: so a client that does not read stops the server producing for it
//! after about `REPLY_QUEUE * max_batch_bytes` (plus one reply per piece). And every
//! reply is counted in the connection's output buffer ([`crate::output`]) as it is
//! produced, uncounted once written to the socket: a connection at its hard limit (or
//! over its soft limit for its seconds) stops executing in the middle of its batch and
//! is closed, its queued replies dropped. The limit is what bounds large replies
//! (values up to 64 MiB, MGET, RANGE): 16 pieces of one 64 MiB value each would be 1 GiB.

use crate::cluster::{ClusterNode, Session};
use crate::command::{get_into, Command};
use crate::error::ServerError;
use crate::output::{OutputBuffer, OutputLimit};
use crate::resp::{Limits, Parsed, Parser, Reply};
use crate::stats::{ReplyWait, ServerStats, SyncBy};
use bytes::BytesMut;
use cosine_config::DesignClass;
use cosine_engine::{DurableMark, Engine};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

/// Tunables of one server.
#[derive(Debug, Clone, Copy)]
pub struct ServerConfig {
    /// The protocol parser's bounds.
    pub limits: Limits,
    /// Connections served at once; more are answered with an error and closed
    /// (Redis' `maxclients` default is 10,000).
    pub max_clients: u64,
    /// Most pipelined requests executed as one batch.
    pub max_batch: usize,
    /// A batch hands its replies to the writer once they add up to this many bytes,
    /// then goes on with its remaining requests.
    pub max_batch_bytes: usize,
    /// How long a shutdown waits for connections to finish their batch.
    pub drain: Duration,
    /// Reply bytes one connection may have queued ([`crate::output`]).
    pub output: OutputLimit,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: Limits::default(),
            max_clients: 10_000,
            max_batch: 1024,
            max_batch_bytes: 1 << 20,
            drain: Duration::from_secs(10),
            output: OutputLimit::default(),
        }
    }
}

/// What a server serves: one engine, or one replica of a replicated shard.
#[derive(Clone)]
pub enum Backend {
    /// An engine of its own (`--dir`): every command runs on it, each write batch acknowledged
    /// once the waiter has made it durable (give the runtime its [`DurabilityWaiter::on_idle`]).
    Engine(Arc<Engine>, DurabilityWaiter),
    /// A replica of a shard (`--cluster`): the Redis Cluster protocol ([`crate::cluster`]).
    Cluster(Arc<ClusterNode>),
}

/// A backend as its connections serve it: an engine with the server's durability waiter, or
/// a replica (its writes are acknowledged once committed, so it needs no waiter).
#[derive(Clone)]
enum Served {
    Engine(Arc<Engine>, DurabilityWaiter),
    Cluster(Arc<ClusterNode>),
}

/// The requests of a batch still to run (or refused at parsing), in order.
pub type Batch = VecDeque<Result<Command, ServerError>>;

/// What [`execute_batch`] ran.
#[derive(Debug)]
pub struct Executed {
    /// The replies, in request order (consecutive GETs' replies as one [`Reply::Encoded`]).
    pub replies: Vec<Reply>,
    /// Positions of the writes among them: provisional until [`acknowledge`] has the
    /// outcome of their durability wait ([`DurabilityWaiter::wait`]).
    pub wrote: Vec<usize>,
    /// The requests not run yet (the replies reached `max_bytes`).
    pub rest: Batch,
}

/// Runs the requests of `batch` in order, counting each reply in `output` as it is
/// produced, until they are all run or the replies add up to `max_bytes`.
///
/// The first reply that takes the connection to its output limit stops the batch: the
/// requests after it are not run, and the error says to close the connection (writes
/// already run stay written, unacknowledged, as when a client disconnects).
pub fn execute_batch(
    engine: &Engine,
    stats: &ServerStats,
    output: &OutputBuffer,
    mut batch: Batch,
    max_bytes: usize,
) -> Result<Executed, ServerError> {
    let mut replies = Vec::with_capacity(batch.len());
    let mut wrote = Vec::new();
    let mut bytes = 0;
    while bytes < max_bytes {
        if let Some(n) = set_run(&batch, output) {
            // consecutive SETs: one write group (one WAL append, one sync under every_write)
            let sets = batch.drain(..n).filter_map(|c| match c {
                Ok(Command::Set(k, v)) => Some((k, Some(v))),
                _ => None,
            });
            let done = engine.write_batch(sets.collect());
            for _ in 0..n {
                ServerStats::bump(&stats.commands);
                let reply = match &done {
                    Ok(()) => {
                        wrote.push(replies.len());
                        Reply::ok()
                    }
                    Err(e) => {
                        ServerStats::bump(&stats.rejected);
                        Reply::error(&ServerError::Engine(e.clone()))
                    }
                };
                bytes += reply.encoded_len();
                output.produce(reply.encoded_len())?;
                replies.push(reply);
            }
            continue;
        }
        let Some(c) = batch.pop_front() else { break };
        let i = replies.len();
        ServerStats::bump(&stats.commands);
        let reply = match c {
            Ok(Command::Get(k)) => {
                // encoded onto the batch's trailing run of encoded replies (the value's one copy)
                let mut out = match replies.pop() {
                    Some(Reply::Encoded(out)) => out,
                    other => {
                        replies.extend(other);
                        output.spare()
                    }
                };
                let got = get_into(engine, &k, &mut out, 1 + batch.len());
                if !out.is_empty() {
                    replies.push(Reply::Encoded(out));
                }
                match got {
                    Ok(n) => {
                        bytes += n;
                        output.produce(n)?;
                        continue;
                    }
                    Err(e) => {
                        ServerStats::bump(&stats.rejected);
                        Reply::error(&ServerError::Engine(e))
                    }
                }
            }
            Ok(cmd) => {
                let writes = cmd.writes();
                let r = cmd.execute(engine, stats);
                if matches!(r, Reply::Error(_)) {
                    ServerStats::bump(&stats.rejected);
                } else if writes {
                    wrote.push(i);
                }
                r
            }
            Err(e) => {
                ServerStats::bump(&stats.rejected);
                Reply::error(&e)
            }
        };
        bytes += reply.encoded_len();
        output.produce(reply.encoded_len())?;
        replies.push(reply);
    }
    Ok(Executed { replies, wrote, rest: batch })
}

/// Most payload bytes of the SETs [`execute_batch`] writes as one write group.
const SET_RUN_BYTES: usize = 1 << 20;

/// How many SETs at the front of `batch` to write as one group: `None` for fewer than two,
/// or when their replies could reach the connection's output limit (a reply crossing it
/// stops the batch before the requests after it run, so those must not have run already).
fn set_run(batch: &Batch, output: &OutputBuffer) -> Option<usize> {
    let mut n = 0;
    let mut bytes = 0;
    for c in batch {
        match c {
            Ok(Command::Set(k, v)) if bytes < SET_RUN_BYTES => {
                bytes += k.len() + v.len();
                n += 1;
            }
            _ => break,
        }
    }
    (n >= 2 && output.has_room(n * Reply::ok().encoded_len())).then_some(n)
}

/// Turns the provisional write replies into the error if their durability wait failed.
pub fn acknowledge(replies: &mut [Reply], wrote: &[usize], durable: Result<(), ServerError>) {
    if let Err(e) = durable {
        let r = Reply::error(&e);
        for &i in wrote {
            replies[i] = r.clone();
        }
    }
}

/// A batch's replies on their way to the client, with the durability wait they need.
struct Outgoing {
    replies: Vec<Reply>,
    /// More than one request's reply (a pipeline's; a [`Reply::Encoded`] may hold several).
    pipelined: bool,
    wrote: Vec<usize>,
    durable: Option<oneshot::Receiver<Result<(), String>>>,
    close: bool,
    /// When the batch's execution ended (its reply wait starts: [`ServerStats::reply_written`]).
    made: Instant,
}

/// What the durability waiter answers: the outcome of one [`DurableMark::sync`].
type Durable = oneshot::Sender<Result<(), String>>;

/// Makes the connections' writes durable before their replies leave (issue 48.6): a group
/// commit synced when the server has nothing else to do, as Redis' `appendfsync always`
/// fsyncs once per event-loop pass before it sleeps.
///
/// A batch that wrote takes the log's [`DurableMark`] right after its writes and queues it
/// with a oneshot sender ([`DurabilityWaiter::wait`]). The queue is answered by
/// [`DurabilityWaiter::on_idle`], which the runtime calls whenever a worker thread is about to
/// park (tokio's `on_thread_park`): one fdatasync covers every mark queued (the first
/// [`DurableMark::sync`] syncs all that was appended; the others find themselves covered), and
/// the replies' tasks wake on the same thread, so a lightly loaded server answers a write
/// after one sync and no thread hand-off. A server too busy to park is answered by the
/// waiter's own thread every `interval` (the design's `group_commit_interval_us`): one sync
/// for every batch of that interval, as the engine's group-commit thread does. Without the
/// park hook ([`serve`]) every write waits for that thread.
///
/// What it replaced, each measured (BENCHMARKS §20, §20b, §26):
/// * a blocking-pool thread per batch for the wait: 50 connections writing at depth 1 made
///   50 threads block on the same group commit, and a `SET` cost ~32 us of server CPU;
/// * one waiter thread waiting for the engine's group-commit tick ([`Engine::wait_durable`]
///   for all it had taken): a batch written before sync k but taken after it waited for sync
///   k + 1 too, and under a closed loop the clients answered by one tick sent their next
///   writes together right after it, each waiting nearly a whole interval: YCSB A's update
///   p50 was 1.46 ms for a 1 ms interval on tmpfs, and nutcracker's one connection per shard
///   held the reads behind it;
/// * that thread syncing as soon as a batch queued: a wake-up and two context switches per
///   batch on the server's core, +1.8 us per operation at depth 16.
#[derive(Clone)]
pub struct DurabilityWaiter {
    inner: Arc<WaiterInner>,
}

struct WaiterInner {
    queue: std::sync::Mutex<Vec<(DurableMark, Durable)>>,
    /// The server's counters, once [`DurabilityWaiter::start`] gave them (its syncs are counted).
    stats: std::sync::OnceLock<Arc<ServerStats>>,
    /// Whether the queue may hold marks: the park hook's test without the lock.
    queued: std::sync::atomic::AtomicBool,
    stop: std::sync::atomic::AtomicBool,
    interval: Duration,
}

impl DurabilityWaiter {
    /// A waiter whose own thread answers every `interval` (the design's group-commit interval).
    pub fn new(interval: Duration) -> DurabilityWaiter {
        DurabilityWaiter {
            inner: Arc::new(WaiterInner {
                queue: std::sync::Mutex::new(Vec::new()),
                stats: std::sync::OnceLock::new(),
                queued: std::sync::atomic::AtomicBool::new(false),
                stop: std::sync::atomic::AtomicBool::new(false),
                interval: interval.max(Duration::from_micros(1)),
            }),
        }
    }

    /// The waiter for `engine`'s design.
    pub fn for_engine(engine: &Engine) -> DurabilityWaiter {
        DurabilityWaiter::new(Duration::from_micros(engine.config().durability.group_commit_interval_us))
    }

    /// For the runtime's `on_thread_park`: answers the queued marks after one sync; nothing
    /// (one atomic load) when none is queued.
    pub fn on_idle(&self) {
        if self.inner.queued.load(Ordering::Acquire) {
            self.answer(SyncBy::Idle);
        }
    }

    /// Syncs once and answers every queued mark (a sync `by` the worker or the tick).
    fn answer(&self, by: SyncBy) {
        let taken = match self.inner.queue.lock() {
            Ok(mut q) => {
                self.inner.queued.store(false, Ordering::Release);
                std::mem::take(&mut *q)
            }
            Err(_) => return, // (a panic while holding it: the connections' waits end with their tasks)
        };
        if let (false, Some(stats)) = (taken.is_empty(), self.inner.stats.get()) {
            stats.synced(by);
        }
        for (mark, answer) in taken {
            let _ = answer.send(mark.sync().map_err(|e| e.to_string()));
        }
    }

    /// Starts the thread that answers every interval (until [`DurabilityWaiter::stop`]), its syncs
    /// and the idle workers' counted in `stats`; [`serve_backend`] runs it while it serves.
    pub fn start(&self, stats: Arc<ServerStats>) -> std::io::Result<std::thread::JoinHandle<()>> {
        let _ = self.inner.stats.set(stats);
        let me = self.clone();
        std::thread::Builder::new().name("cosine-durable".into()).spawn(move || {
            while !me.inner.stop.load(Ordering::Acquire) {
                std::thread::park_timeout(me.inner.interval);
                me.answer(SyncBy::Tick);
            }
            me.answer(SyncBy::Tick);
        })
    }

    /// Stops the thread [`DurabilityWaiter::start`] started, once it answered what is queued.
    pub fn stop(&self, thread: std::thread::JoinHandle<()>) {
        self.inner.stop.store(true, Ordering::Release);
        thread.thread().unpark();
        let _ = thread.join();
    }

    /// The outcome of the durability wait for every write `engine` executed so far, or `None`
    /// when its WAL policy has nothing to wait for ([`Engine::durable_mark`]).
    pub fn wait(&self, engine: &Engine) -> Option<oneshot::Receiver<Result<(), String>>> {
        let mark = engine.durable_mark()?;
        let (tx, rx) = oneshot::channel();
        match self.inner.queue.lock() {
            Ok(mut q) => {
                q.push((mark, tx));
                self.inner.queued.store(true, Ordering::Release);
            }
            Err(_) => {
                let _ = tx.send(Err("the durability waiter failed".into()));
            }
        }
        Some(rx)
    }
}

/// Batches (or pieces of `max_batch_bytes`) whose replies may wait for durability, or
/// for the writer, while the next batches run.
pub const REPLY_QUEUE: usize = 16;

/// Room a connection's read buffer offers every read: a pipeline of
/// 16 SETs of 1 KB values (17.6 KB) arrives in one read, not two half batches with a reply
/// write and a durability wait each.
const READ_ROOM: usize = 32 << 10;

/// Encoded replies are written to the socket in pieces of about this size, each
/// uncounted from the output buffer once written.
const WRITE_CHUNK: usize = 64 << 10;

/// Writes batches' replies in request order, each once its writes are durable.
async fn reply_writer(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Outgoing>, output: Arc<OutputBuffer>, stats: Arc<ServerStats>) {
    let mut out = Vec::with_capacity(WRITE_CHUNK);
    while let Some(mut o) = rx.recv().await {
        let kind = match (o.durable.is_some(), o.pipelined) {
            (true, _) => ReplyWait::Durable,
            (false, true) => ReplyWait::Pipelined,
            (false, false) => ReplyWait::Single,
        };
        if o.durable.is_none() && o.pipelined {
            // A pipeline's replies: let the worker run its other ready connections first, so the
            // writes of one pass leave together, as Redis writes its replies once per event-loop
            // pass. Written right after each batch (the writer ran next, in the LIFO slot), the
            // client had gone back to sleep between two writes and every send paid a full
            // cross-core wake-up: ~25 % of the server's CPU at GET pipeline 16 in
            // `sock_def_readable`, 4-5 % after; GET P16 ~2.4-3.1 -> ~1.6-2.2 us of server CPU
            // per request. (A yielded task runs after the worker's next poll of the I/O driver.)
            // Not for a single reply (a depth-1 client waits for each): depth 1 keeps the
            // immediate write it was measured with.
            tokio::task::yield_now().await;
        }
        if let Some(h) = o.durable.take() {
            let res = match h.await {
                Ok(r) => r.map_err(ServerError::DurabilityWaitFailed),
                Err(e) => Err(ServerError::DurabilityWaitFailed(e.to_string())),
            };
            if res.is_err() {
                let len = |replies: &[Reply]| o.wrote.iter().map(|&i| replies[i].encoded_len()).sum::<usize>();
                let before = len(&o.replies);
                acknowledge(&mut o.replies, &o.wrote, res);
                output.resized(before, len(&o.replies));
            }
        }
        for r in o.replies.drain(..) {
            match r {
                // already in wire form: becomes the output as it is, not copied into it, and the
                // output buffer before it goes back to the batches as their next spare
                Reply::Encoded(bytes) if out.is_empty() => output.recycle(std::mem::replace(&mut out, bytes)),
                Reply::Encoded(bytes) => {
                    out.extend_from_slice(&bytes);
                    output.recycle(bytes);
                }
                r => r.encode(&mut out),
            }
            if out.len() >= WRITE_CHUNK && write_out(&mut wr, &mut out, &output).await.is_err() {
                output.close();
                return;
            }
        }
        if !out.is_empty() && write_out(&mut wr, &mut out, &output).await.is_err() {
            output.close();
            return;
        }
        stats.reply_written(kind, o.made.elapsed());
        if o.close {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

/// Writes `out` whole, uncounts it from the output buffer and empties it (dropping the
/// allocation a large reply grew it to).
async fn write_out(wr: &mut OwnedWriteHalf, out: &mut Vec<u8>, output: &OutputBuffer) -> std::io::Result<()> {
    wr.write_all(out).await?;
    output.written(out.len());
    out.clear();
    if out.capacity() > 4 * WRITE_CHUNK {
        *out = Vec::with_capacity(WRITE_CHUNK);
    }
    Ok(())
}

/// Serves `engine` on `listener` until `shutdown` resolves, then stops accepting,
/// lets every connection finish the batch it is running (at most `cfg.drain`), and
/// returns. The caller flushes and closes the engine.
///
/// Its writes are made durable by the waiter's own thread, every group-commit interval: a
/// runtime built with a [`DurabilityWaiter`]'s `on_idle` as its `on_thread_park` hook, serving
/// [`Backend::Engine`] through [`serve_backend`], answers them as soon as it is idle.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    stats: Arc<ServerStats>,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()>,
) {
    let waiter = DurabilityWaiter::for_engine(&engine);
    serve_backend(listener, Backend::Engine(engine, waiter), stats, cfg, shutdown).await
}

/// [`serve`] for either backend.
pub async fn serve_backend(
    listener: TcpListener,
    backend: Backend,
    stats: Arc<ServerStats>,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let (served, waiter) = match backend {
        Backend::Engine(engine, durable) => match durable.start(stats.clone()) {
            Ok(thread) => {
                // every write's reply waits for a mark covering it (the waiter's): its log
                // records may wait in the process for that sync, written once for all of them
                engine.defer_log_writes();
                (Served::Engine(engine, durable.clone()), Some((durable, thread)))
            }
            Err(e) => {
                eprintln!("cosine-server: cannot start the durability waiter: {e}");
                return;
            }
        },
        // (a replica's writes are durable when committed: the Raft log's policy)
        Backend::Cluster(node) => (Served::Cluster(node), None),
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((sock, peer)) = accepted else { continue };
                ServerStats::bump(&stats.connections);
                if stats.connected.load(Ordering::Relaxed) >= cfg.max_clients {
                    ServerStats::bump(&stats.refused);
                    let mut sock = sock;
                    conns.spawn(async move {
                        let mut out = Vec::new();
                        Reply::error(&ServerError::MaxClients).encode(&mut out);
                        let _ = sock.write_all(&out).await;
                    });
                    continue;
                }
                let (served, stats, stop) = (served.clone(), stats.clone(), stop_rx.clone());
                stats.connected.fetch_add(1, Ordering::Relaxed);
                conns.spawn(async move {
                    if let Err(e @ ServerError::OutputBufferLimit { .. }) = connection(sock, served, &stats, cfg, stop).await {
                        ServerStats::bump(&stats.output_limit_disconnections);
                        eprintln!("cosine-server: closed the connection of {peer}: {e}");
                    }
                    stats.connected.fetch_sub(1, Ordering::Relaxed);
                });
            }
            // reap finished connections so the set does not grow
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(cfg.drain, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    // every connection is done: the waiter's thread answers what is left and ends
    drop(served);
    if let Some((durable, thread)) = waiter {
        let _ = tokio::task::spawn_blocking(move || durable.stop(thread)).await;
    }
}

/// One client: the reader parses and executes batches; the reply writer sends each
/// batch's replies in order once its writes are durable. So a batch waiting for its
/// group commit does not hold up the execution of the batches behind it (they join the
/// same or the next group), and no reply overtakes an earlier one.
///
/// A [`ServerError::OutputBufferLimit`] error: the connection went over its output
/// limit and was closed, its queued replies dropped.
async fn connection(
    sock: TcpStream,
    served: Served,
    stats: &Arc<ServerStats>,
    cfg: ServerConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let _ = sock.set_nodelay(true);
    let (mut rd, wr) = sock.into_split();
    let output = Arc::new(OutputBuffer::new(cfg.output));
    let (tx, rx) = mpsc::channel::<Outgoing>(REPLY_QUEUE);
    let mut writer = tokio::spawn(reply_writer(wr, rx, output.clone(), stats.clone()));
    let mut result = requests(&mut rd, &tx, &output, served, stats, cfg, stop).await;
    drop(tx);
    if result.is_ok() {
        // every reply already queued is sent (after its durability wait), within the limit
        result = guarded(&output, &mut writer).await.map(|_| ());
    }
    if let Err(ServerError::OutputBufferLimit { .. }) = result {
        // The client does not read: drop its queued replies rather than wait to write them,
        // and reset the connection (the replies in the kernel's send buffer go too; a FIN
        // would wait behind them for a client that does not read).
        let _ = rd.as_ref().set_zero_linger();
        writer.abort();
        let _ = writer.await;
    }
    result
}

/// The reader's side of a connection: parses the pipelined requests, executes them in
/// batches, hands each batch's replies to the writer. `Ok` when the client is done
/// (EOF, QUIT, a protocol error answered, the server stopping).
async fn requests(
    rd: &mut OwnedReadHalf,
    tx: &mpsc::Sender<Outgoing>,
    output: &Arc<OutputBuffer>,
    served: Served,
    stats: &Arc<ServerStats>,
    cfg: ServerConfig,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let (key_bytes, syncs_in_put, short_ranges) = match &served {
        Served::Engine(engine, _) => {
            let c = engine.config();
            (c.layout.key_bytes, engine.syncs_in_put(), c.design.class != DesignClass::Lsh)
        }
        Served::Cluster(node) => (node.key_bytes(), false, false),
    };
    let mut session = Session::default();
    let mut parser = Parser::new(cfg.limits);
    let mut buf = BytesMut::with_capacity(READ_ROOM);
    loop {
        let mut batch = Batch::new();
        let mut fatal = None;
        while batch.len() < cfg.max_batch {
            match parser.next(&mut buf) {
                Ok(Some(Parsed::Request(args))) => batch.push_back(Command::parse(args, key_bytes)),
                Ok(Some(Parsed::Rejected(e))) => batch.push_back(Err(e)),
                Ok(None) => break,
                Err(e) => {
                    fatal = Some(e);
                    break;
                }
            }
        }
        let full = batch.len() >= cfg.max_batch;
        if !batch.is_empty() {
            let quit = batch.iter().position(|c| matches!(c, Ok(Command::Quit)));
            if let Some(q) = quit {
                batch.truncate(q + 1); // nothing after QUIT runs
            }
            // point reads and writes, and a tree's short scans, never take long (a write's sync
            // is the durability waiter's, under `every_write` too: serve_backend defers the log's
            // writes): run them here rather than pay a hand-off to the blocking pool. Where a put
            // waits for its own write group's fdatasync (an engine not deferring) writes go to the
            // pool, where concurrent connections' puts form one group and share a sync.
            let quick = batch.iter().all(|c| {
                c.as_ref().map_or(true, |c| (c.is_quick() || (short_ranges && c.is_short_range())) && !(c.writes() && syncs_in_put))
            });
            let close = quit.is_some();
            if let Served::Cluster(node) = &served {
                // replicated: each reply is final when produced (writes committed, reads checked)
                let replies = node.execute(std::mem::take(&mut batch), &mut session, stats, output).await?;
                let out = Outgoing { pipelined: replies.len() > 1, replies, wrote: Vec::new(), durable: None, close, made: Instant::now() };
                guarded(output, tx.send(out)).await?.map_err(|_| ServerError::ClientGone)?;
            }
            while !batch.is_empty() {
                let Served::Engine(engine, durable) = &served else { break }; // (a cluster ran it above)
                let n = batch.len();
                let Executed { replies, wrote, rest } = if quick {
                    execute_batch(engine, stats, output, batch, cfg.max_batch_bytes)?
                } else {
                    let (e, s, o, max) = (engine.clone(), stats.clone(), output.clone(), cfg.max_batch_bytes);
                    match tokio::task::spawn_blocking(move || execute_batch(&e, &s, &o, batch, max)).await {
                        Ok(executed) => executed?,
                        Err(_) => {
                            // (the replies the failed task counted stay counted: a panic is a bug)
                            let r = Reply::error(&ServerError::ExecutionFailed);
                            output.produce(r.encoded_len() * n)?;
                            Executed { replies: vec![r; n], wrote: Vec::new(), rest: Batch::new() }
                        }
                    }
                };
                let pipelined = n - rest.len() > 1;
                batch = rest;
                let durable = if wrote.is_empty() {
                    None
                } else {
                    ServerStats::bump(&stats.durable_waits);
                    durable.wait(engine)
                };
                let out = Outgoing { replies, pipelined, wrote, durable, close: close && batch.is_empty(), made: Instant::now() };
                guarded(output, tx.send(out)).await?.map_err(|_| ServerError::ClientGone)?;
                if !batch.is_empty() {
                    // let the writer (woken on this worker) start on this piece before the next
                    tokio::task::yield_now().await;
                }
            }
            if close {
                return Ok(());
            }
        }
        if let Some(e) = fatal {
            ServerStats::bump(&stats.protocol_errors);
            let r = Reply::error(&e);
            output.produce(r.encoded_len())?;
            let out = Outgoing { replies: vec![r], pipelined: false, wrote: Vec::new(), durable: None, close: true, made: Instant::now() };
            let _ = guarded(output, tx.send(out)).await?;
            return Ok(());
        }
        if full {
            continue; // more complete requests may be buffered
        }
        if *stop.borrow() {
            return Ok(());
        }
        if buf.capacity() - buf.len() < READ_ROOM {
            buf.reserve(READ_ROOM);
        }
        let read = guarded(output, async {
            tokio::select! {
                r = rd.read_buf(&mut buf) => r.ok().filter(|n| *n > 0),
                _ = stop.changed() => None,
            }
        })
        .await?;
        if read.is_none() {
            return Ok(()); // EOF, a read error, or the server stopping
        }
    }
}

/// Awaits `fut` while keeping the connection's soft output limit: whenever the soft
/// clock may have run out, the limit is checked, so a client over the soft limit for
/// its seconds is closed also while the connection waits (for a request, for room in
/// the reply queue, for the writer).
async fn guarded<F: Future>(output: &OutputBuffer, fut: F) -> Result<F::Output, ServerError> {
    tokio::pin!(fut);
    loop {
        let deadline = output.soft_deadline();
        let expired = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            v = &mut fut => return Ok(v),
            () = expired => output.check()?,
        }
    }
}
