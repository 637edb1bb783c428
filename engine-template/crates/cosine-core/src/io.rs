//! Block-I/O counters: the numbers the cost model is validated against, and
//! the provisioned volume ([`Device`]) those blocks may be made to pay for.
//!
//! A *block* is one logical data block of `B` entries, one index block, or one
//! filter block moved between storage and memory. Hits in the buffer or the
//! block cache never reach these counters.
//!
//! A counter linked to a [`Device`] makes every block it counts pay the
//! device: the blocks the cost model predicts are exactly the I/Os the
//! device throttles.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a provisioned volume grants (a cloud block device: EBS gp3, pd-ssd, Premium SSD).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceSpec {
    /// I/O operations per second (each block moved is one I/O).
    pub iops: f64,
    /// Bytes per second.
    pub bytes_per_s: f64,
    /// Time a foreground read waits for the volume once it holds its token.
    pub read_latency: Duration,
    /// I/Os the token bucket holds (the burst the volume absorbs after idling).
    pub burst_ios: f64,
}

/// A token bucket at a volume's IOPS and throughput plus a per-read latency.
///
/// The bucket is a generic cell-rate algorithm (GCRA, the virtual-time form of
/// a token bucket): a request of `n` I/Os and `b` bytes needs
/// `max(n / iops, b / bytes_per_s)` seconds of the bucket; it may start once
/// the bucket's theoretical arrival time minus the burst tolerance has passed,
/// and moves that time on by its cost. Because the time is virtual, a thread
/// that oversleeps does not lose the volume's rate (up to the burst).
/// Foreground reads then wait `read_latency` (the volume's service time);
/// background I/O (flushes, merges, log GC) is sequential and asynchronous on a
/// real volume (read-ahead, write-back), so it pays the rate but not the latency.
#[derive(Debug)]
pub struct Device {
    spec: DeviceSpec,
    origin: Instant,
    /// Theoretical arrival time, seconds since `origin`.
    tat: Mutex<f64>,
    ios: AtomicU64,
    bytes: AtomicU64,
    /// I/Os of block reads (the rest of `ios` are writes).
    read_ios: AtomicU64,
    /// I/Os of foreground reads (an operation's own, which wait the latency).
    foreground_read_ios: AtomicU64,
    waited_ns: AtomicU64,
    /// Times a caller slept (each a block and a wake-up of its thread, as a read from a real
    /// volume blocks its thread until the completion wakes it).
    sleeps: AtomicU64,
    /// Running mean of how much longer than asked the OS lets a thread sleep (ns).
    overshoot_ns: AtomicU64,
    /// When false, I/O is counted but not throttled (a benchmark's load phase).
    throttling: AtomicBool,
}

/// Weight of the newest sample in the running mean of the sleep overshoot (1/16).
const OVERSHOOT_WEIGHT: f64 = 1.0 / 16.0;

/// What a device was asked to do so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSnapshot {
    /// I/Os paid for.
    pub ios: u64,
    /// Bytes paid for.
    pub bytes: u64,
    /// I/Os of block reads, foreground and background (`ios - read_ios` are writes).
    pub read_ios: u64,
    /// I/Os of foreground reads (an operation's own; each waits the read latency).
    pub foreground_read_ios: u64,
    /// Nanoseconds callers slept for tokens and latency, summed over threads.
    pub waited_ns: u64,
    /// Times a caller slept for tokens or latency.
    pub sleeps: u64,
}

impl Device {
    /// A volume that starts with a full bucket.
    pub fn new(spec: DeviceSpec) -> Self {
        Device {
            spec,
            origin: Instant::now(),
            tat: Mutex::new(0.0),
            ios: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            read_ios: AtomicU64::new(0),
            foreground_read_ios: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            overshoot_ns: AtomicU64::new(0),
            throttling: AtomicBool::new(true),
        }
    }

    /// Turns throttling on or off (counting goes on): a benchmark loads its data
    /// at full speed and measures its run on the volume.
    pub fn set_throttling(&self, on: bool) {
        self.throttling.store(on, Ordering::Relaxed);
    }

    /// What the volume grants.
    pub fn spec(&self) -> DeviceSpec {
        self.spec
    }

    /// Seconds of the bucket `n` I/Os of `bytes` bytes use.
    pub fn cost(&self, n: u64, bytes: u64) -> f64 {
        (n as f64 / self.spec.iops).max(bytes as f64 / self.spec.bytes_per_s)
    }

    /// Reserves the bucket for a request arriving at `now` (seconds since the
    /// device was made); returns the seconds until it may start.
    pub fn reserve(&self, now: f64, n: u64, bytes: u64) -> f64 {
        let tau = self.spec.burst_ios / self.spec.iops;
        let mut tat = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        let start = tat.max(now);
        *tat = start + self.cost(n, bytes);
        (start - tau - now).max(0.0)
    }

    /// Pays for `n` I/Os of `bytes` bytes that `read` (else write) blocks: sleeps until the
    /// bucket allows them (reads and writes share it: a volume's IOPS count both), then for
    /// the read latency if `wait_latency` (a foreground read).
    pub fn pay(&self, n: u64, bytes: u64, read: bool, wait_latency: bool) {
        if n == 0 && bytes == 0 {
            return;
        }
        self.ios.fetch_add(n, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if read {
            self.read_ios.fetch_add(n, Ordering::Relaxed);
            if wait_latency {
                self.foreground_read_ios.fetch_add(n, Ordering::Relaxed);
            }
        }
        if !self.throttling.load(Ordering::Relaxed) {
            return;
        }
        let now = self.origin.elapsed().as_secs_f64();
        let mut wait = Duration::from_secs_f64(self.reserve(now, n, bytes));
        if wait_latency {
            wait += self.spec.read_latency;
        }
        if !wait.is_zero() {
            self.sleep(wait);
        }
    }

    /// Sleeps about `want` on average: a timer sleep overshoots by the OS's
    /// timer slack and scheduling delay (50-150 us on a busy VM, as much as a
    /// volume's latency), so the ask is shortened by the running mean of the
    /// overshoot observed so far.
    fn sleep(&self, want: Duration) {
        let comp = Duration::from_nanos(self.overshoot_ns.load(Ordering::Relaxed));
        let ask = want.saturating_sub(comp);
        let t = Instant::now();
        if !ask.is_zero() {
            std::thread::sleep(ask);
        }
        let got = t.elapsed();
        self.waited_ns.fetch_add(got.as_nanos() as u64, Ordering::Relaxed);
        if !ask.is_zero() {
            self.sleeps.fetch_add(1, Ordering::Relaxed);
        }
        if !ask.is_zero() {
            // a preempted sleeper's overshoot says nothing about the timer: cap it at the ask
            let sample = got.saturating_sub(ask).min(ask).as_nanos() as f64;
            let old = self.overshoot_ns.load(Ordering::Relaxed) as f64;
            self.overshoot_ns.store((old + OVERSHOOT_WEIGHT * (sample - old)) as u64, Ordering::Relaxed);
        }
    }

    /// Counters so far.
    pub fn snapshot(&self) -> DeviceSnapshot {
        DeviceSnapshot {
            ios: self.ios.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            read_ios: self.read_ios.load(Ordering::Relaxed),
            foreground_read_ios: self.foreground_read_ios.load(Ordering::Relaxed),
            waited_ns: self.waited_ns.load(Ordering::Relaxed),
            sleeps: self.sleeps.load(Ordering::Relaxed),
        }
    }
}

/// Who pays a counter's blocks: a device, and whether its reads wait the latency.
#[derive(Debug, Clone)]
struct Payer {
    device: Arc<Device>,
    foreground: bool,
}

/// Thread-safe block counters for one charge target (an operation, a flush, a compaction).
#[derive(Debug, Default)]
pub struct IoCounter {
    payer: Option<Payer>,
    data_read: AtomicU64,
    index_read: AtomicU64,
    filter_read: AtomicU64,
    data_written: AtomicU64,
    index_written: AtomicU64,
    filter_written: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// Which kind of block moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A data block of up to `B` entries.
    Data,
    /// An index block holding on-disk fence pointers.
    Index,
    /// A filter block (Bloom filter bits).
    Filter,
}

impl IoCounter {
    /// A zeroed counter that pays no device.
    pub fn new() -> Self {
        Self::default()
    }
    /// A zeroed counter whose blocks pay `device` (if any). Foreground counters
    /// (an operation's) wait the device's read latency; background ones do not.
    pub fn paying(device: Option<&Arc<Device>>, foreground: bool) -> Self {
        IoCounter { payer: device.map(|d| Payer { device: d.clone(), foreground }), ..Self::default() }
    }
    /// Records `n` blocks of `kind` read from storage (`bytes` long in total), and pays for them.
    pub fn read(&self, kind: BlockKind, n: u64, bytes: u64) {
        let c = match kind {
            BlockKind::Data => &self.data_read,
            BlockKind::Index => &self.index_read,
            BlockKind::Filter => &self.filter_read,
        };
        c.fetch_add(n, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        if let Some(p) = &self.payer {
            p.device.pay(n, bytes, true, p.foreground);
        }
    }
    /// Records `n` blocks of `kind` written to storage (`bytes` long in total), and pays for them
    /// (writes are write-back: they pay the rate, never the read latency).
    pub fn wrote(&self, kind: BlockKind, n: u64, bytes: u64) {
        let c = match kind {
            BlockKind::Data => &self.data_written,
            BlockKind::Index => &self.index_written,
            BlockKind::Filter => &self.filter_written,
        };
        c.fetch_add(n, Ordering::Relaxed);
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
        if let Some(p) = &self.payer {
            p.device.pay(n, bytes, false, false);
        }
    }
    /// Adds a snapshot taken elsewhere (already paid for where it was counted).
    pub fn add(&self, s: &IoSnapshot) {
        self.data_read.fetch_add(s.data_read, Ordering::Relaxed);
        self.index_read.fetch_add(s.index_read, Ordering::Relaxed);
        self.filter_read.fetch_add(s.filter_read, Ordering::Relaxed);
        self.data_written.fetch_add(s.data_written, Ordering::Relaxed);
        self.index_written.fetch_add(s.index_written, Ordering::Relaxed);
        self.filter_written.fetch_add(s.filter_written, Ordering::Relaxed);
        self.bytes_read.fetch_add(s.bytes_read, Ordering::Relaxed);
        self.bytes_written.fetch_add(s.bytes_written, Ordering::Relaxed);
    }
    /// A point-in-time copy.
    pub fn snapshot(&self) -> IoSnapshot {
        IoSnapshot {
            data_read: self.data_read.load(Ordering::Relaxed),
            index_read: self.index_read.load(Ordering::Relaxed),
            filter_read: self.filter_read.load(Ordering::Relaxed),
            data_written: self.data_written.load(Ordering::Relaxed),
            index_written: self.index_written.load(Ordering::Relaxed),
            filter_written: self.filter_written.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}

/// Plain copy of an [`IoCounter`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoSnapshot {
    /// Data blocks read.
    pub data_read: u64,
    /// Index blocks read.
    pub index_read: u64,
    /// Filter blocks read.
    pub filter_read: u64,
    /// Data blocks written.
    pub data_written: u64,
    /// Index blocks written.
    pub index_written: u64,
    /// Filter blocks written.
    pub filter_written: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

impl IoSnapshot {
    /// All blocks read (data + index + filter).
    pub fn blocks_read(&self) -> u64 {
        self.data_read + self.index_read + self.filter_read
    }
    /// All blocks written (data + index + filter).
    pub fn blocks_written(&self) -> u64 {
        self.data_written + self.index_written + self.filter_written
    }
    /// Field-wise sum.
    pub fn plus(&self, o: &IoSnapshot) -> IoSnapshot {
        IoSnapshot {
            data_read: self.data_read + o.data_read,
            index_read: self.index_read + o.index_read,
            filter_read: self.filter_read + o.filter_read,
            data_written: self.data_written + o.data_written,
            index_written: self.index_written + o.index_written,
            filter_written: self.filter_written + o.filter_written,
            bytes_read: self.bytes_read + o.bytes_read,
            bytes_written: self.bytes_written + o.bytes_written,
        }
    }
    /// Field-wise difference (saturating), for before/after deltas.
    pub fn minus(&self, o: &IoSnapshot) -> IoSnapshot {
        IoSnapshot {
            data_read: self.data_read.saturating_sub(o.data_read),
            index_read: self.index_read.saturating_sub(o.index_read),
            filter_read: self.filter_read.saturating_sub(o.filter_read),
            data_written: self.data_written.saturating_sub(o.data_written),
            index_written: self.index_written.saturating_sub(o.index_written),
            filter_written: self.filter_written.saturating_sub(o.filter_written),
            bytes_read: self.bytes_read.saturating_sub(o.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(o.bytes_written),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(iops: f64, mib: f64, burst: f64) -> Device {
        Device::new(DeviceSpec { iops, bytes_per_s: mib * 1048576.0, read_latency: Duration::ZERO, burst_ios: burst })
    }

    #[test]
    fn bucket_paces_requests_at_the_iops_rate() {
        // 1000 IOPS, no burst: back-to-back requests at t = 0 start 1 ms apart.
        let d = volume(1000.0, 1e6, 0.0);
        let waits: Vec<f64> = (0..5).map(|_| d.reserve(0.0, 1, 4096)).collect();
        for (i, w) in waits.iter().enumerate() {
            assert!((w - i as f64 * 1e-3).abs() < 1e-12, "request {i} waits {w}");
        }
        // After the queue drains, a request waits nothing.
        assert_eq!(d.reserve(1.0, 1, 4096), 0.0);
    }

    #[test]
    fn burst_lets_a_few_requests_through_then_the_rate_holds() {
        let d = volume(1000.0, 1e6, 4.0);
        let waits: Vec<f64> = (0..8).map(|_| d.reserve(0.0, 1, 0)).collect();
        assert!(waits[..5].iter().all(|w| *w == 0.0), "{waits:?}");
        assert!((waits[7] - 3e-3).abs() < 1e-12, "{waits:?}");
    }

    #[test]
    fn throughput_limit_binds_for_large_transfers() {
        // 1 MiB/s and 10k IOPS: a 512 KiB transfer costs half a second of bucket.
        let d = volume(10_000.0, 1.0, 0.0);
        assert!((d.cost(1, 512 * 1024) - 0.5).abs() < 1e-12);
        d.reserve(0.0, 1, 512 * 1024);
        assert!((d.reserve(0.0, 1, 0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn paying_counter_charges_every_counted_block() {
        let d = Arc::new(volume(1e9, 1e9, 1e9));
        let c = IoCounter::paying(Some(&d), true);
        c.read(BlockKind::Data, 2, 8192);
        c.wrote(BlockKind::Filter, 3, 100);
        let unpaid = IoCounter::new();
        unpaid.read(BlockKind::Data, 1, 4096);
        c.add(&unpaid.snapshot());
        let s = d.snapshot();
        assert_eq!((s.ios, s.bytes), (5, 8292));
        assert_eq!(c.snapshot().blocks_read(), 3);
    }
}
