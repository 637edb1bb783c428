//! A replicated shard of `cosine-server` processes on loopback for the tests, and a
//! client that follows `-MOVED` the way cluster-aware clients do.

use cosine_config::presets::to_toml;
use cosine_config::Config;
use cosine_server::client::Client;
use cosine_server::Reply;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Raft timing for tests: short timeouts on loopback.
pub const FAST_RAFT: &str = r#"{"heartbeat_ms": 50, "election_min_ms": 300, "election_max_ms": 600, "request_timeout_ms": 3000}"#;

/// How long [`Cluster::spawn`] retries a replica whose port is still taken.
pub const BIND_PATIENCE: Duration = Duration::from_secs(5);

/// How long [`Cluster::spawn`] waits for a replica's `ready` line.
pub const READY_PATIENCE: Duration = Duration::from_secs(30);

/// One replica process.
pub struct Node {
    /// Its id.
    pub id: u64,
    /// Its RESP address.
    pub addr: SocketAddr,
    dir: PathBuf,
    child: Option<Child>,
}

/// The shards' replicas, started and stopped by the test.
pub struct Cluster {
    /// Every replica, shard by shard.
    pub nodes: Vec<Node>,
    /// Replicas per shard.
    pub replicas: usize,
    config: PathBuf,
    topology: PathBuf,
}

/// The first port [`free_port`] hands out and how many it cycles through: below Linux's ephemeral
/// range (32768-60999 by default), which the kernel numbers its own sockets from (a client's
/// connection, another `bind(0)`). A port taken with `bind(0)` and released could be given to such
/// a socket before the replica binds it ("Address already in use": a flaky start seen in CI).
const PORTS: (u32, u32) = (20_000, 12_000);

/// A port for a replica: the next of [`PORTS`] from an offset of this process's own (test binaries
/// after one another do not reuse each other's), skipping any in use now.
fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = (std::process::id() % 500) * 20;
    for _ in 0..PORTS.1 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(PORTS.0 + (offset + n) % PORTS.1).expect("a port below 65536");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {}..{}", PORTS.0, PORTS.0 + PORTS.1)
}

impl Cluster {
    /// Writes `cfg` and a cluster file of `shards` x `replicas` under `root` and starts every
    /// replica; `raft` is the file's `raft` section, strong consistency.
    pub fn start(root: &Path, cfg: &Config, shards: usize, replicas: usize, raft: &str) -> Cluster {
        Cluster::start_with(root, cfg, shards, replicas, raft, "strong")
    }

    /// [`Cluster::start`] with a consistency level (`strong`, `eventual`).
    pub fn start_with(root: &Path, cfg: &Config, shards: usize, replicas: usize, raft: &str, consistency: &str) -> Cluster {
        let config = root.join("engine.toml");
        std::fs::write(&config, to_toml(cfg)).expect("write engine.toml");
        let mut nodes = Vec::new();
        let mut shard_json = Vec::new();
        let per = 16384 / shards;
        for s in 0..shards {
            let mut reps = Vec::new();
            for _ in 0..replicas {
                let id = nodes.len() as u64 + 1;
                let (port, bus) = (free_port(), free_port());
                reps.push(format!(r#"{{"id": {id}, "host": "127.0.0.1", "port": {port}, "bus_port": {bus}}}"#));
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                nodes.push(Node { id, addr, dir: root.join(format!("node-{id}")), child: None });
            }
            let hi = if s + 1 == shards { 16383 } else { (s + 1) * per - 1 };
            shard_json.push(format!(r#"{{"id": {s}, "slots": [[{}, {hi}]], "replicas": [{}]}}"#, s * per, reps.join(", ")));
        }
        let topology = root.join("cluster.json");
        std::fs::write(&topology, format!(r#"{{"raft": {raft}, "consistency": "{consistency}", "shards": [{}]}}"#, shard_json.join(", ")))
            .expect("write cluster.json");
        let mut c = Cluster { nodes, replicas, config, topology };
        for i in 0..c.nodes.len() {
            c.spawn(i);
        }
        c
    }

    /// Starts (or restarts) replica `i` on its directory; waits for its `ready` line.
    ///
    /// A replica that cannot bind its port (the kernel may still hold it for a moment) is started
    /// again, for up to [`BIND_PATIENCE`]; one that neither says `ready` nor exits within
    /// [`READY_PATIENCE`] is killed and fails the test (a test must not wait for ever).
    pub fn spawn(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "node {} is running", self.nodes[i].id);
        let t = Instant::now();
        loop {
            let logged = self.log(i).len();
            let (mut child, line) = self.start_once(i);
            if line.starts_with("ready ") {
                self.nodes[i].child = Some(child);
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            let this = self.log(i).get(logged..).unwrap_or_default().to_string();
            if this.contains("Address already in use") && t.elapsed() < BIND_PATIENCE {
                // who holds the ports, in the test's output should it fail after all
                let addr = this.split("listen on ").nth(1).and_then(|r| r.split(": ").next()).unwrap_or("?").to_string();
                let ss = Command::new("ss").args(["-tanp"]).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
                let holders = ss.map(|s| s.lines().filter(|l| l.contains(&format!("{addr} "))).collect::<Vec<_>>().join(" | "));
                eprintln!("node {}: {}; retrying. Sockets on {addr}: {holders:?}", self.nodes[i].id, this.trim());
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            panic!("node {} did not start: {line:?}; its log: {}", self.nodes[i].id, self.log(i));
        }
    }

    /// One start of replica `i`: the child and its first line of output ("" if it exited, or
    /// said nothing within [`READY_PATIENCE`]).
    fn start_once(&self, i: usize) -> (Child, String) {
        let n = &self.nodes[i];
        let log = std::fs::OpenOptions::new().create(true).append(true).open(n.dir.with_extension("log")).expect("log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cosine-server"))
            .arg("--config")
            .arg(&self.config)
            .arg("--dir")
            .arg(&n.dir)
            .arg("--cluster")
            .arg(&self.topology)
            .args(["--node-id", &n.id.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn cosine-server");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(READY_PATIENCE).unwrap_or_default();
        (child, line)
    }

    /// Replica `i`'s stderr so far.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.nodes[i].dir.with_extension("log")).unwrap_or_default()
    }

    /// SIGKILLs replica `i` and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `sig` (`STOP`, `CONT`, `TERM`) to replica `i`.
    pub fn signal(&self, i: usize, sig: &str) {
        let pid = self.nodes[i].child.as_ref().expect("running").id();
        let st = Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status().expect("kill");
        assert!(st.success());
    }

    /// Whether replica `i` runs.
    pub fn running(&mut self, i: usize) -> bool {
        self.nodes[i].child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// `INFO replication` of replica `i` as (name, value) pairs; None if it does not answer.
    pub fn replication(&self, i: usize) -> Option<Vec<(String, String)>> {
        let mut c = Client::connect(self.nodes[i].addr, Duration::from_millis(500)).ok()?;
        match c.call(&[b"INFO", b"replication"]).ok()? {
            Reply::Bulk(b) => Some(
                String::from_utf8_lossy(&b)
                    .lines()
                    .filter_map(|l| l.split_once(':').map(|(k, v)| (k.to_string(), v.trim().to_string())))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// A field of replica `i`'s `INFO replication`.
    pub fn field(&self, i: usize, name: &str) -> Option<String> {
        self.replication(i)?.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// The applied index of replica `i`.
    pub fn applied(&self, i: usize) -> Option<u64> {
        self.field(i, "raft_applied_index")?.parse().ok()
    }

    /// What each replica says of its Raft state (state, term, leader, elections, pre-votes lost,
    /// bus failures) and the last lines of its log: for a failed assertion's message.
    pub fn describe(&mut self) -> String {
        const FIELDS: [&str; 7] = [
            "raft_state",
            "raft_term",
            "raft_leader",
            "raft_elections_started",
            "raft_prevotes_lost",
            "raft_bus_failures",
            "raft_millis_since_quorum_ack",
        ];
        (0..self.nodes.len())
            .map(|i| {
                let said = match (self.running(i), self.replication(i)) {
                    (false, _) => "not running".to_string(),
                    (true, None) => "no answer".to_string(),
                    (true, Some(r)) => r
                        .iter()
                        .filter(|(k, _)| FIELDS.contains(&k.as_str()))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                };
                let log = self.log(i);
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                format!("node {}: {said}; log: {:?}", self.nodes[i].id, tail.into_iter().rev().collect::<Vec<_>>())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The replica of shard `shard` that says it leads (one a majority follows), waiting up to `wait`.
    pub fn wait_leader(&mut self, shard: usize, wait: Duration) -> usize {
        let deadline = Instant::now() + wait;
        loop {
            let members: Vec<usize> = (shard * self.replicas..(shard + 1) * self.replicas).collect();
            for &i in &members {
                if !self.running(i) || self.field(i, "raft_state").as_deref() != Some("leader") {
                    continue;
                }
                let id = self.nodes[i].id.to_string();
                let followers = members.iter().filter(|&&j| self.field(j, "raft_leader").as_deref() == Some(id.as_str())).count();
                if 2 * followers > members.len() {
                    return i;
                }
            }
            if Instant::now() >= deadline {
                panic!("shard {shard} has no leader after {wait:?}:\n{}", self.describe());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            if self.nodes[i].child.is_some() {
                let _ = self.signal_quiet(i, "CONT");
            }
            self.kill(i);
        }
    }
}

impl Cluster {
    fn signal_quiet(&self, i: usize, sig: &str) -> Option<()> {
        let pid = self.nodes[i].child.as_ref()?.id();
        Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status().ok().map(|_| ())
    }
}

/// What a request to the cluster came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Answered (a `-MOVED` is followed, not answered).
    Done(Reply),
    /// Certainly not executed (no replica reachable, no leader).
    Failed(String),
    /// Maybe executed: the connection broke after the request was sent, or the server said
    /// the write may still commit.
    Unknown(String),
}

/// A client of one shard that follows `-MOVED` and tries the other replicas when one is down.
pub struct ShardClient {
    addrs: Vec<SocketAddr>,
    target: usize,
    conn: Option<Client>,
    timeout: Duration,
}

impl ShardClient {
    /// A client of the replicas at `addrs`.
    pub fn new(addrs: Vec<SocketAddr>, start: usize) -> ShardClient {
        ShardClient { target: start % addrs.len(), addrs, conn: None, timeout: Duration::from_secs(5) }
    }

    /// Sends the next request to replica `i` first (a client that does not know the leader).
    pub fn retarget(&mut self, i: usize) {
        if i % self.addrs.len() != self.target {
            self.target = i % self.addrs.len();
            self.conn = None;
        }
    }

    /// Waits at most `t` for a reply (default 5 s).
    pub fn with_timeout(mut self, t: Duration) -> ShardClient {
        self.timeout = t;
        self
    }

    /// Sends one request, following redirections for up to `patience`.
    pub fn call(&mut self, args: &[&[u8]], patience: Duration) -> Outcome {
        let deadline = Instant::now() + patience;
        let mut last = String::from("no attempt");
        while Instant::now() < deadline {
            if self.conn.is_none() {
                match Client::connect(self.addrs[self.target], self.timeout) {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => {
                        last = format!("connect {}: {e}", self.addrs[self.target]);
                        self.target = (self.target + 1) % self.addrs.len();
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                }
            }
            let Some(c) = self.conn.as_mut() else { continue };
            if let Err(e) = c.send(args) {
                // nothing reached the server
                last = format!("send: {e}");
                self.conn = None;
                self.target = (self.target + 1) % self.addrs.len();
                continue;
            }
            match c.recv() {
                Err(e) => {
                    self.conn = None;
                    return Outcome::Unknown(format!("no reply: {e}"));
                }
                Ok(Reply::Error(m)) if m.starts_with("MOVED ") => {
                    let to: Option<SocketAddr> = m.split_whitespace().nth(2).and_then(|a| a.parse().ok());
                    match to.and_then(|a| self.addrs.iter().position(|x| *x == a)) {
                        Some(t) => {
                            if t != self.target {
                                self.target = t;
                                self.conn = None;
                            }
                        }
                        None => return Outcome::Failed(format!("redirected outside the shard: {m}")),
                    }
                    last = m;
                }
                Ok(Reply::Error(m)) if m.starts_with("CLUSTERDOWN the shard has no leader") => {
                    last = m;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(Reply::Error(m)) if m.starts_with("CLUSTERDOWN") => return Outcome::Unknown(m),
                Ok(r) => return Outcome::Done(r),
            }
        }
        Outcome::Failed(last)
    }
}

/// Ends a test's client threads when the thread driving the faults leaves its scope, also by a
/// panic (a failed assertion): `std::thread::scope` waits for every thread it spawned, and client
/// threads that loop until `stop` would otherwise keep a failed test running for ever. A client
/// also stops by itself after [`StopOnDrop::LIMIT`] (a fault sequence stuck without panicking).
pub struct StopOnDrop<'a> {
    stop: &'a AtomicBool,
    start: Instant,
}

impl<'a> StopOnDrop<'a> {
    /// The longest a client runs: the fault sequences take a few seconds, each of their waits at
    /// most 10 s.
    pub const LIMIT: Duration = Duration::from_secs(120);

    /// Sets `stop` when dropped.
    pub fn new(stop: &'a AtomicBool) -> StopOnDrop<'a> {
        StopOnDrop { stop, start: Instant::now() }
    }

    /// Whether a client should end: `stop` is set, or the test has run [`StopOnDrop::LIMIT`].
    pub fn stopped(stop: &AtomicBool, since: Instant) -> bool {
        stop.load(Ordering::Relaxed) || since.elapsed() > Self::LIMIT
    }

    /// When the guard was made.
    pub fn since(&self) -> Instant {
        self.start
    }
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
