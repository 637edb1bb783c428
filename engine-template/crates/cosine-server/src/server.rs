//! The network side: an accept loop on tokio, one task per connection, pipelined
//! batches, and a graceful shutdown.
//!
//! A connection parses every complete request already received (a pipeline) into one
//! batch and runs it (point reads on the network task; anything that writes or scans on
//! tokio's blocking pool: the engine's calls block on WAL syncs, stalls, disk reads). If
//! the batch wrote, its replies wait *once* for the WAL policy's durability
//! ([`Engine::wait_durable`]) in a reply queue, while the next batches already run; the
//! replies leave in request order. So an `+OK` to a `SET` is never sent before the write
//! is durable, pipelined writes share one sync, and a proxy multiplexing many clients on
//! one connection keeps the shard busy during group commits.

use crate::command::Command;
use crate::resp::{Fatal, Limits, Parsed, Parser, Reply};
use crate::stats::ServerStats;
use bytes::BytesMut;
use cosine_engine::Engine;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

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
    /// How long a shutdown waits for connections to finish their batch.
    pub drain: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { limits: Limits::default(), max_clients: 10_000, max_batch: 1024, drain: Duration::from_secs(10) }
    }
}

/// Runs the commands of one batch in order. Returns the replies and the positions of
/// the writes among them: those are provisional until [`acknowledge`] has the outcome
/// of [`Engine::wait_durable`].
pub fn execute_batch(engine: &Engine, stats: &ServerStats, batch: Vec<Result<Command, String>>) -> (Vec<Reply>, Vec<usize>) {
    let mut replies = Vec::with_capacity(batch.len());
    let mut wrote = Vec::new();
    for (i, c) in batch.into_iter().enumerate() {
        ServerStats::bump(&stats.commands);
        match c {
            Ok(cmd) => {
                let writes = cmd.writes();
                let r = cmd.execute(engine, stats);
                if matches!(r, Reply::Error(_)) {
                    ServerStats::bump(&stats.rejected);
                } else if writes {
                    wrote.push(i);
                }
                replies.push(r);
            }
            Err(m) => {
                ServerStats::bump(&stats.rejected);
                replies.push(Reply::err(m));
            }
        }
    }
    (replies, wrote)
}

/// Turns the provisional write replies into errors if their durability wait failed.
pub fn acknowledge(replies: &mut [Reply], wrote: &[usize], durable: Result<(), String>) {
    if let Err(e) = durable {
        for &i in wrote {
            replies[i] = Reply::err(format!("write not acknowledged: the WAL sync failed: {e}"));
        }
    }
}

/// A batch's replies on their way to the client, with the durability wait they need.
struct Outgoing {
    replies: Vec<Reply>,
    wrote: Vec<usize>,
    durable: Option<JoinHandle<cosine_engine::Result<()>>>,
    close: bool,
}

/// Batches whose replies may wait for durability while the next batches run.
const REPLY_QUEUE: usize = 16;

/// Writes batches' replies in request order, each once its writes are durable.
async fn reply_writer(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Outgoing>) {
    let mut out = Vec::with_capacity(16 << 10);
    while let Some(mut o) = rx.recv().await {
        if let Some(h) = o.durable.take() {
            let res = match h.await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(e) => Err(format!("durability wait failed: {e}")),
            };
            acknowledge(&mut o.replies, &o.wrote, res);
        }
        out.clear();
        for r in &o.replies {
            r.encode(&mut out);
        }
        if wr.write_all(&out).await.is_err() {
            return;
        }
        if o.close {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

/// Serves `engine` on `listener` until `shutdown` resolves, then stops accepting,
/// lets every connection finish the batch it is running (at most `cfg.drain`), and
/// returns. The caller flushes and closes the engine.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    stats: Arc<ServerStats>,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((sock, _)) = accepted else { continue };
                ServerStats::bump(&stats.connections);
                if stats.connected.load(Ordering::Relaxed) >= cfg.max_clients {
                    ServerStats::bump(&stats.refused);
                    let mut sock = sock;
                    conns.spawn(async move {
                        let _ = sock.write_all(b"-ERR max number of clients reached\r\n").await;
                    });
                    continue;
                }
                let (engine, stats, stop) = (engine.clone(), stats.clone(), stop_rx.clone());
                stats.connected.fetch_add(1, Ordering::Relaxed);
                conns.spawn(async move {
                    connection(sock, engine, &stats, cfg, stop).await;
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
    }
}

/// One client: the reader parses and executes batches; the reply writer sends each
/// batch's replies in order once its writes are durable. So a batch waiting for its
/// group commit does not hold up the execution of the batches behind it (they join the
/// same or the next group), and no reply overtakes an earlier one.
async fn connection(sock: TcpStream, engine: Arc<Engine>, stats: &Arc<ServerStats>, cfg: ServerConfig, mut stop: watch::Receiver<bool>) {
    let _ = sock.set_nodelay(true);
    let (mut rd, wr) = sock.into_split();
    let (tx, rx) = mpsc::channel::<Outgoing>(REPLY_QUEUE);
    let writer = tokio::spawn(reply_writer(wr, rx));
    let key_bytes = engine.config().layout.key_bytes;
    let mut parser = Parser::new(cfg.limits);
    let mut buf = BytesMut::with_capacity(16 << 10);
    loop {
        let mut batch = Vec::new();
        let mut fatal = None;
        while batch.len() < cfg.max_batch {
            match parser.next(&mut buf) {
                Ok(Some(Parsed::Request(args))) => batch.push(Command::parse(args, key_bytes)),
                Ok(Some(Parsed::Rejected(m))) => batch.push(Err(m)),
                Ok(None) => break,
                Err(Fatal(m)) => {
                    fatal = Some(m);
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
            let n = batch.len();
            let (replies, wrote) = if batch.iter().all(|c| c.as_ref().map_or(true, Command::is_quick)) {
                // point reads of a snapshot never wait for a writer or the disk queue for long:
                // run them here rather than pay a hand-off to the blocking pool
                execute_batch(&engine, stats, batch)
            } else {
                let (e, s) = (engine.clone(), stats.clone());
                tokio::task::spawn_blocking(move || execute_batch(&e, &s, batch))
                    .await
                    .unwrap_or_else(|_| (vec![Reply::err("internal error executing the request"); n], Vec::new()))
            };
            let durable = (!wrote.is_empty()).then(|| {
                ServerStats::bump(&stats.durable_waits);
                let e = engine.clone();
                tokio::task::spawn_blocking(move || e.wait_durable())
            });
            let close = quit.is_some();
            if tx.send(Outgoing { replies, wrote, durable, close }).await.is_err() || close {
                break;
            }
        }
        if let Some(m) = fatal {
            ServerStats::bump(&stats.protocol_errors);
            let _ = tx.send(Outgoing { replies: vec![Reply::err(m)], wrote: Vec::new(), durable: None, close: true }).await;
            break;
        }
        if full {
            continue; // more complete requests may be buffered
        }
        if *stop.borrow() {
            break;
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 << 10);
        }
        tokio::select! {
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = stop.changed() => break,
        }
    }
    drop(tx);
    let _ = writer.await; // every reply already queued is sent (after its durability wait)
}
