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
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Raft timing for tests: short timeouts on loopback.
pub const FAST_RAFT: &str = r#"{"heartbeat_ms": 50, "election_min_ms": 300, "election_max_ms": 600, "request_timeout_ms": 3000}"#;

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
    pub fn spawn(&mut self, i: usize) {
        let n = &self.nodes[i];
        assert!(n.child.is_none(), "node {} is running", n.id);
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
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).expect("ready line");
        assert!(line.starts_with("ready "), "node {} did not start: {line:?}; its log: {}", self.nodes[i].id, self.log(i));
        self.nodes[i].child = Some(child);
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
            assert!(Instant::now() < deadline, "shard {shard} has no leader after {wait:?}");
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
