//! The per-client output limit, Redis' `client-output-buffer-limit`: how many bytes of
//! replies one connection may have produced and not yet written to its socket.
//!
//! A connection runs its pipelined requests ahead of the replies it sends (see
//! [`crate::server`]), so a client that sends requests and does not read the replies
//! makes the server hold them. Measured before this limit: one connection pipelining
//! `GET` of a 1 MB value about 135,000 times without reading grew the server to
//! 12.8 GB RSS. Now every reply is counted when it is produced (its encoded size, see
//! [`crate::Reply::encoded_len`]) and uncounted once the reply writer has handed its
//! bytes to the socket, and
//! * at or over the **hard** limit the connection is closed at once: execution stops
//!   in the middle of the batch (the rest of the pipeline is not run), the queued
//!   replies are dropped, the connection is reset (`SO_LINGER` 0: the replies already in
//!   the kernel's send buffer are dropped too, where a FIN would wait behind them), and
//!   `client_output_buffer_limit_disconnections` in `INFO stats` counts it;
//! * over the **soft** limit for **soft seconds** in a row, the same (a reader slower
//!   than its requests' replies for that long).
//!
//! So a connection holds at most the hard limit plus the one reply that crossed it (and
//! the writer's copy of the reply it is writing). No reply is sent to a client closed
//! this way: it is not reading them; the server logs one line on stderr. (Replies of
//! up to about 1 MiB are held back earlier: a batch hands its replies to the writer in
//! pieces of `max_batch_bytes` and at most 16 pieces wait, see [`crate::server`], so a
//! client that does not read small or medium replies is simply no longer served, by
//! TCP flow control, with about 16 MiB queued. The limits bound large replies, and
//! close the clients that hold memory that way for too long.)
//!
//! **Defaults: hard 256 MiB, soft 64 MiB for 60 s**, Redis' `replica` class
//! (`client-output-buffer-limit replica 256mb 64mb 60`). Redis leaves `normal` clients
//! unlimited (`0 0 0`), the case measured above; `pubsub`'s 32 MiB hard limit would
//! close a client reading one value of the largest size a `SET` may write (64 MiB, the
//! default `--max-bulk-bytes`). The replica class is the one sized for a client that
//! streams bulk data and reads it: four largest values fit under the hard limit, and
//! a client reading slower than its pipeline for a minute is dropped. A client that
//! sends one request and reads its reply before the next never queues more than one
//! reply. 0 turns a limit off (Redis' meaning): `0 0 0` is Redis' `normal` class, and
//! memory then grows with whatever a client pipelines.

use crate::error::{OutputLimitKind, ServerError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Default hard limit, bytes (Redis' `replica` class: 256 MiB).
pub const DEFAULT_HARD_BYTES: u64 = 256 << 20;
/// Default soft limit, bytes (Redis' `replica` class: 64 MiB).
pub const DEFAULT_SOFT_BYTES: u64 = 64 << 20;
/// Default time over the soft limit before a close, seconds (Redis' `replica` class: 60).
pub const DEFAULT_SOFT_SECONDS: u64 = 60;

/// One client's output-buffer limit (`[server]` of engine.toml, or the
/// `--client-output-buffer-*` flags of `cosine-server`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// Queued reply bytes at which the connection is closed at once (0: no hard limit).
    pub hard_bytes: u64,
    /// Queued reply bytes the connection may stay over only for `soft_seconds` (0: no soft limit).
    pub soft_bytes: u64,
    /// Seconds in a row over `soft_bytes` before the connection is closed (0: at once).
    pub soft_seconds: u64,
}

impl Default for OutputLimit {
    fn default() -> Self {
        OutputLimit { hard_bytes: DEFAULT_HARD_BYTES, soft_bytes: DEFAULT_SOFT_BYTES, soft_seconds: DEFAULT_SOFT_SECONDS }
    }
}

impl OutputLimit {
    /// No limit at all (Redis' `normal` class default, `0 0 0`).
    pub const UNLIMITED: OutputLimit = OutputLimit { hard_bytes: 0, soft_bytes: 0, soft_seconds: 0 };

    /// Refuses a soft limit at or above the hard limit: it could never apply.
    pub fn validate(&self) -> Result<(), ServerError> {
        if self.hard_bytes > 0 && self.soft_bytes >= self.hard_bytes {
            return Err(ServerError::Settings(format!(
                "the soft output-buffer limit ({} bytes) is not below the hard limit ({} bytes), so it never applies: \
                 lower client_output_buffer_soft_bytes, or set it to 0 for no soft limit",
                self.soft_bytes, self.hard_bytes
            )));
        }
        Ok(())
    }
}

/// One connection's queued reply bytes and its soft-limit clock, shared by the task
/// that produces the replies and the task that writes them.
#[derive(Debug)]
pub struct OutputBuffer {
    limit: OutputLimit,
    queued: AtomicU64,
    /// Milliseconds after `origin`, plus one, since which `queued` is over the soft
    /// limit; 0 while it is not.
    soft_since: AtomicU64,
    origin: Instant,
    closed: AtomicBool,
    /// A written reply buffer kept for the next batch's GET replies ([`OutputBuffer::spare`]).
    spare: std::sync::Mutex<Option<Vec<u8>>>,
}

/// Largest capacity of a reply buffer kept as a connection's spare (the reply writer's write
/// size): an idle connection holds at most this much more.
pub const SPARE_BYTES: usize = 64 << 10;

impl OutputBuffer {
    /// An empty buffer enforcing `limit`.
    pub fn new(limit: OutputLimit) -> OutputBuffer {
        OutputBuffer {
            limit,
            queued: AtomicU64::new(0),
            soft_since: AtomicU64::new(0),
            origin: Instant::now(),
            closed: AtomicBool::new(false),
            spare: std::sync::Mutex::new(None),
        }
    }

    /// An empty buffer for a batch's encoded replies ([`crate::Reply::Encoded`]): the one the
    /// reply writer last handed back ([`OutputBuffer::recycle`]), else a new one.
    ///
    /// Without it each batch allocated its buffer and the writer freed it once written: at
    /// GET pipeline depth 16 (50 connections, ~17 KB a batch) the allocator kept returning
    /// the freed pages to the kernel and faulting them back in, zeroed, 6 % of the server's
    /// CPU in page faults (perf, issue 48).
    pub fn spare(&self) -> Vec<u8> {
        let spare = self.spare.lock().ok().and_then(|mut s| s.take());
        spare.unwrap_or_default()
    }

    /// Keeps `buf`, emptied, as the next [`OutputBuffer::spare`] (unless one is kept already or
    /// it is larger than [`SPARE_BYTES`]).
    pub fn recycle(&self, mut buf: Vec<u8>) {
        if buf.capacity() == 0 || buf.capacity() > SPARE_BYTES {
            return;
        }
        buf.clear();
        if let Ok(mut s) = self.spare.lock() {
            if s.is_none() {
                *s = Some(buf);
            }
        }
    }

    /// Reply bytes produced and not yet written.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// Counts a reply of `bytes` just produced. An error once the connection is over
    /// its limit (stop producing and close it), or gone.
    pub fn produce(&self, bytes: usize) -> Result<(), ServerError> {
        let queued = self.queued.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        self.check_at(queued)
    }

    /// The reply writer handed `bytes` of counted replies to the socket.
    pub fn written(&self, bytes: usize) {
        let queued = self.queued.fetch_sub(bytes as u64, Ordering::Relaxed).saturating_sub(bytes as u64);
        if queued <= self.limit.soft_bytes {
            self.soft_since.store(0, Ordering::Relaxed);
        }
    }

    /// Replies already counted changed size (a write's `+OK` became an error): counts the difference.
    pub fn resized(&self, before: usize, after: usize) {
        if after > before {
            self.queued.fetch_add((after - before) as u64, Ordering::Relaxed);
        } else {
            self.written(before - after);
        }
    }

    /// The writer cannot write any more (the client went away): producing stops.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    /// True when `bytes` more of replies keep the connection at or under its soft limit and
    /// under its hard one (so producing them, in any number of replies, cannot trip either).
    pub fn has_room(&self, bytes: usize) -> bool {
        let after = self.queued().saturating_add(bytes as u64);
        let l = &self.limit;
        (l.hard_bytes == 0 || after < l.hard_bytes) && (l.soft_bytes == 0 || after <= l.soft_bytes)
    }

    /// Checks the limit without producing (when the soft clock may have run out).
    pub fn check(&self) -> Result<(), ServerError> {
        self.check_at(self.queued())
    }

    /// When the soft limit will have been exceeded for `soft_seconds`, if it is exceeded now.
    pub fn soft_deadline(&self) -> Option<Instant> {
        let since = self.soft_since.load(Ordering::Relaxed);
        if since == 0 || self.limit.soft_bytes == 0 {
            return None;
        }
        let at = Duration::from_millis(since - 1) + Duration::from_secs(self.limit.soft_seconds);
        self.origin.checked_add(at)
    }

    fn check_at(&self, queued: u64) -> Result<(), ServerError> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(ServerError::ClientGone);
        }
        let l = &self.limit;
        if l.hard_bytes > 0 && queued >= l.hard_bytes {
            return Err(ServerError::OutputBufferLimit { queued, limit: OutputLimitKind::Hard { bytes: l.hard_bytes } });
        }
        if l.soft_bytes == 0 || queued <= l.soft_bytes {
            self.soft_since.store(0, Ordering::Relaxed);
            return Ok(());
        }
        let now = self.origin.elapsed().as_millis() as u64 + 1;
        let since = match self.soft_since.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => now,
            Err(s) => s,
        };
        if now - since.min(now) >= l.soft_seconds.saturating_mul(1000) {
            return Err(ServerError::OutputBufferLimit {
                queued,
                limit: OutputLimitKind::Soft { bytes: l.soft_bytes, seconds: l.soft_seconds },
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_hard(r: Result<(), ServerError>) -> bool {
        matches!(r, Err(ServerError::OutputBufferLimit { limit: OutputLimitKind::Hard { .. }, .. }))
    }

    #[test]
    fn one_written_buffer_is_kept_empty_for_the_next_batch() {
        let b = OutputBuffer::new(OutputLimit::default());
        assert_eq!(b.spare().capacity(), 0, "none kept yet: a new, empty one");
        let mut written = Vec::with_capacity(4096);
        written.extend_from_slice(b"$1\r\nv\r\n");
        b.recycle(written);
        b.recycle(Vec::with_capacity(100)); // one is kept already
        let spare = b.spare();
        assert!(spare.is_empty() && spare.capacity() >= 4096);
        assert_eq!(b.spare().capacity(), 0, "taken");
        b.recycle(Vec::with_capacity(SPARE_BYTES + 1)); // too large to keep
        assert_eq!(b.spare().capacity(), 0);
    }

    #[test]
    fn hard_limit_counts_produced_until_written() {
        let b = OutputBuffer::new(OutputLimit { hard_bytes: 100, soft_bytes: 0, soft_seconds: 0 });
        b.produce(60).expect("under");
        b.written(30);
        b.produce(60).expect("90 queued: under");
        assert!(is_hard(b.produce(10)), "100 queued: at the hard limit");
        assert_eq!(b.queued(), 100);
        let free = OutputBuffer::new(OutputLimit::UNLIMITED);
        free.produce(usize::MAX >> 2).expect("no limit");
    }

    #[test]
    fn soft_limit_needs_its_seconds_in_a_row() {
        let b = OutputBuffer::new(OutputLimit { hard_bytes: 0, soft_bytes: 10, soft_seconds: 1 });
        b.produce(20).expect("over the soft limit: the clock starts");
        let deadline = b.soft_deadline().expect("clock running");
        assert!(deadline > Instant::now() + Duration::from_millis(900));
        b.written(15);
        assert_eq!(b.soft_deadline(), None, "back under: the clock stops");
        b.produce(20).expect("over again: a new clock");
        std::thread::sleep(Duration::from_millis(1050));
        assert!(matches!(b.check(), Err(ServerError::OutputBufferLimit { limit: OutputLimitKind::Soft { .. }, .. })));
        let at_once = OutputBuffer::new(OutputLimit { hard_bytes: 0, soft_bytes: 10, soft_seconds: 0 });
        assert!(at_once.produce(11).is_err(), "0 soft seconds: at once");
    }

    #[test]
    fn a_closed_buffer_stops_production_and_resizes_count() {
        let b = OutputBuffer::new(OutputLimit::default());
        b.produce(5).expect("ok");
        b.resized(5, 50);
        assert_eq!(b.queued(), 50);
        b.resized(50, 5);
        assert_eq!(b.queued(), 5);
        b.close();
        assert!(matches!(b.produce(1), Err(ServerError::ClientGone)));
    }

    #[test]
    fn a_soft_limit_not_below_the_hard_one_is_refused() {
        assert!(OutputLimit::default().validate().is_ok());
        assert!(OutputLimit::UNLIMITED.validate().is_ok());
        let e = OutputLimit { hard_bytes: 10, soft_bytes: 10, soft_seconds: 1 }.validate().expect_err("never applies");
        assert!(e.to_string().contains("client_output_buffer_soft_bytes"), "{e}");
    }
}
