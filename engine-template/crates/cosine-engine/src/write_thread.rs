//! Write groups (RocksDB's `WriteThread`): concurrent writers queue up; the
//! first becomes the *leader*, takes the writers waiting behind it as its
//! group, and appends the whole group to the WAL in one write. Then the group
//! is made durable (under `wal_sync = every_write`, one fdatasync shared with
//! any group appended meanwhile) and every member inserts its own entry into
//! the memtable, all at the same time; only then is anyone acknowledged.
//!
//! The leader holds the *baton* only while it appends: it releases the baton
//! before syncing, so the WAL append of group N+1 overlaps the sync and the
//! memtable inserts of group N (RocksDB's pipelined write). On a slow device,
//! writers pile up behind a sync and share it; on a fast one, nobody waits for
//! a sync they do not need.
//!
//! The baton is released, not handed over: the first waiter is told it may take
//! it, and a writer that arrives running takes it first, with the queued writes
//! in its group. Handing it to the first waiter (RocksDB's order) makes every
//! writer wait for that waiter to be scheduled; with more threads than cores
//! (client threads plus the background worker) the scheduler often has not run
//! it yet, and the cores idle behind it (docs/journal/s22-s30.md §24.1). An exclusive
//! caller first in line is not overtaken, so it cannot starve.
//!
//! This is not the `group_commit` sync policy, which only moves the fdatasync
//! to a timer: write groups batch the WAL write itself, under every policy.
//!
//! Exactly one thread holds the baton at a time: a leader, or an
//! [`WriteThread::exclusive`] caller such as a flush rotating the WAL. A
//! memtable counts the group members still inserting into it
//! (`MemTable::begin_writes`), and a rotation, which holds the baton, waits for
//! them before freezing it, so a frozen memtable never takes an insert.

use crate::MemTable;
use cosine_core::{Error, Result};
use cosine_wal::SyncTicket;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Payload bytes of `ops` (what a group's size is counted in).
fn ops_bytes(ops: &[WriteOp]) -> usize {
    ops.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len())).sum()
}

/// Inserts `ops` into `mem` with sequence numbers from `seq` on, and ends the `n` pending
/// writes counted for them.
fn insert_all(mem: &MemTable, ops: Vec<WriteOp>, seq: u64, n: usize) {
    let mut inserted = 0;
    for (i, (k, v)) in ops.into_iter().enumerate() {
        mem.insert(k, v, seq + i as u64);
        mem.end_write();
        inserted += 1;
    }
    for _ in inserted..n {
        mem.end_write();
    }
}

/// One write: normalized key and value (`None` deletes).
pub(crate) type WriteOp = (Vec<u8>, Option<Vec<u8>>);

/// What the leader's append returns: the memtable to insert into (its pending
/// writes already counted for the group), the sequence number of the group's
/// first write (the others follow in order), and the promise of durability.
pub(crate) type Appended = (Arc<MemTable>, u64, SyncTicket);

/// Bytes of keys and values a leader takes into one group (RocksDB's
/// `max_write_batch_group_size_bytes` default, 1 MiB).
const MAX_GROUP_BYTES: usize = 1 << 20;

/// How long a waiting writer polls before it sleeps on its condition variable. A
/// group is often through in a few microseconds (tmpfs, `group_commit`, `none`),
/// less than a sleep and wake-up, so waiting writers first spin, as RocksDB's
/// `WriteThread::AwaitState` does (about 1 us of spinning, then adaptive yields).
const SPIN: Duration = Duration::from_micros(5);

enum Turn {
    /// The baton is free: take it if your write is still queued.
    TryLead,
    /// The group is durable: insert your writes from this sequence number on.
    Insert(Arc<MemTable>, u64),
    /// The group failed.
    Done(Result<()>),
}

struct Waiter {
    /// The writer's writes, in order; `None` for an exclusive caller.
    op: Mutex<Option<Vec<WriteOp>>>,
    /// How many writes `op` holds (what the memtable counts for it).
    n: usize,
    exclusive: bool,
    slot: Mutex<Option<Turn>>,
    ready: AtomicBool,
    cv: Condvar,
}

impl Waiter {
    fn new(op: Option<Vec<WriteOp>>) -> Arc<Waiter> {
        let exclusive = op.is_none();
        let n = op.as_ref().map_or(0, Vec::len);
        Arc::new(Waiter { op: Mutex::new(op), n, exclusive, slot: Mutex::new(None), ready: AtomicBool::new(false), cv: Condvar::new() })
    }

    fn set(&self, t: Turn) {
        *self.slot.lock() = Some(t);
        self.ready.store(true, Ordering::Release);
        self.cv.notify_one();
    }

    fn wait(&self) -> Turn {
        let start = Instant::now();
        let mut polls = 0u32;
        while !self.ready.load(Ordering::Acquire) {
            polls += 1;
            if polls.is_multiple_of(64) && start.elapsed() > SPIN {
                break;
            }
            std::hint::spin_loop();
        }
        let mut slot = self.slot.lock();
        loop {
            if let Some(t) = slot.take() {
                self.ready.store(false, Ordering::Release);
                return t;
            }
            self.cv.wait(&mut slot);
        }
    }

    fn bytes(&self) -> usize {
        self.op.lock().as_deref().map_or(0, ops_bytes)
    }
}

#[derive(Default)]
struct Queue {
    busy: bool,
    waiting: VecDeque<Arc<Waiter>>,
}

impl Queue {
    /// Whether an arriving writer may take the baton now: it is free and no exclusive
    /// caller waits first in line (which would otherwise starve behind arriving writers).
    /// An exclusive caller arriving waits behind any queued writer.
    fn free_for(&self, exclusive: bool) -> bool {
        !self.busy && (self.waiting.is_empty() || !exclusive && !self.waiting.front().is_some_and(|w| w.exclusive))
    }
}

/// The queue of writers and the leadership baton.
#[derive(Default)]
pub(crate) struct WriteThread {
    q: Mutex<Queue>,
}

impl std::fmt::Debug for WriteThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteThread").field("waiting", &self.q.lock().waiting.len()).finish()
    }
}

impl WriteThread {
    /// Writes `ops` (in order) as part of a group. If this writer leads, `append` is called
    /// with the group's writes in log order, holding the baton; it must append them to the
    /// WAL and count them as pending writes of the memtable it returns.
    pub(crate) fn write(&self, ops: Vec<WriteOp>, append: impl FnOnce(&[&WriteOp]) -> Result<Appended>) -> Result<()> {
        let w = {
            let mut q = self.q.lock();
            if q.free_for(false) {
                q.busy = true;
                drop(q);
                return self.lead(ops, append);
            }
            let w = Waiter::new(Some(ops));
            q.waiting.push_back(w.clone());
            w
        };
        loop {
            match w.wait() {
                Turn::TryLead => {
                    if !self.claim(&w) {
                        continue; // taken into a running leader's group (its Insert follows), or not free
                    }
                    let Some(ops) = w.op.lock().take() else {
                        self.handoff();
                        return Err(Error::Closed("a queued write lost its record".into()));
                    };
                    return self.lead(ops, append);
                }
                Turn::Insert(mem, seq) => {
                    let ops = w.op.lock().take().unwrap_or_default();
                    insert_all(&mem, ops, seq, w.n);
                    return Ok(());
                }
                Turn::Done(r) => return r,
            }
        }
    }

    /// Takes the baton for the queued `w` if it is free and `w` still queued (no running
    /// leader took its write meanwhile).
    fn claim(&self, w: &Arc<Waiter>) -> bool {
        let mut q = self.q.lock();
        if q.busy {
            return false;
        }
        let Some(pos) = q.waiting.iter().position(|x| Arc::ptr_eq(x, w)) else { return false };
        q.waiting.remove(pos);
        q.busy = true;
        true
    }

    fn lead(&self, ops: Vec<WriteOp>, append: impl FnOnce(&[&WriteOp]) -> Result<Appended>) -> Result<()> {
        let followers: Vec<Arc<Waiter>> = {
            let mut q = self.q.lock();
            let mut bytes = ops_bytes(&ops);
            let mut group = Vec::new();
            while let Some(w) = q.waiting.front() {
                if w.exclusive || bytes >= MAX_GROUP_BYTES {
                    break;
                }
                bytes += w.bytes();
                group.extend(q.waiting.pop_front());
            }
            group
        };
        let appended = if followers.is_empty() {
            let refs: Vec<&WriteOp> = ops.iter().collect();
            append(&refs)
        } else {
            let guards: Vec<_> = followers.iter().map(|w| w.op.lock()).collect();
            let mut refs: Vec<&WriteOp> = ops.iter().collect();
            refs.extend(guards.iter().filter_map(|g| g.as_ref()).flatten());
            append(&refs)
        };
        // The group is in the log: the next group may append while this one syncs.
        self.handoff();
        let fail = |e: Error| {
            for w in &followers {
                w.set(Turn::Done(Err(e.clone())));
            }
            Err(e)
        };
        let (mem, seq, ticket) = match appended {
            Ok(a) => a,
            Err(e) => return fail(e),
        };
        if let Err(e) = ticket.wait() {
            // every_write: durable before anyone in the group is acknowledged.
            for _ in 0..ops.len() + followers.iter().map(|w| w.n).sum::<usize>() {
                mem.end_write();
            }
            return fail(e);
        }
        let mut next = seq + ops.len() as u64;
        for w in &followers {
            w.set(Turn::Insert(mem.clone(), next));
            next += w.n as u64;
        }
        let n = ops.len();
        insert_all(&mem, ops, seq, n);
        Ok(())
    }

    // Releases the baton and tells the first waiter it may take it. The baton is not handed
    // to that waiter: a writer that is running takes it first (and the queued writes into its
    // group), so a waiter the scheduler has not run yet holds up nobody (BENCHMARKS.md).
    fn handoff(&self) {
        let mut q = self.q.lock();
        q.busy = false;
        if let Some(w) = q.waiting.front() {
            w.set(Turn::TryLead);
        }
    }

    /// Runs `f` holding the baton: no group appends meanwhile (a flush rotating the
    /// WAL, a close sealing it). Groups appended earlier may still be inserting.
    pub(crate) fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        let wait = {
            let mut q = self.q.lock();
            if q.free_for(true) {
                q.busy = true;
                None
            } else {
                let w = Waiter::new(None);
                q.waiting.push_back(w.clone());
                Some(w)
            }
        };
        if let Some(w) = wait {
            // an exclusive waiter is only ever told the baton is free; no leader takes it into a group
            while !(matches!(w.wait(), Turn::TryLead) && self.claim(&w)) {}
        }
        let r = f();
        self.handoff();
        r
    }
}
