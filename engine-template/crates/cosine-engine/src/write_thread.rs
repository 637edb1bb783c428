//! Write groups (RocksDB's `WriteThread`): concurrent writers queue up; the
//! first becomes the *leader*, takes the writers waiting behind it as its
//! group, and appends the whole group to the WAL in one write. Then the group
//! is made durable (under `wal_sync = every_write`, one fdatasync shared with
//! any group appended meanwhile) and every member inserts its own entry into
//! the memtable, all at the same time; only then is anyone acknowledged.
//!
//! The leader holds the *baton* only while it appends: it passes the baton to
//! the next waiting writer before syncing, so the WAL append of group N+1
//! overlaps the sync and the memtable inserts of group N (RocksDB's pipelined
//! write). On a slow device, writers pile up behind a sync and share it; on a
//! fast one, nobody waits for a sync they do not need.
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
    /// Take the baton.
    Lead,
    /// The group is durable: insert your write with this sequence number.
    Insert(Arc<MemTable>, u64),
    /// The group failed.
    Done(Result<()>),
}

struct Waiter {
    /// `None` for an exclusive caller.
    op: Mutex<Option<WriteOp>>,
    exclusive: bool,
    slot: Mutex<Option<Turn>>,
    ready: AtomicBool,
    cv: Condvar,
}

impl Waiter {
    fn new(op: Option<WriteOp>) -> Arc<Waiter> {
        let exclusive = op.is_none();
        Arc::new(Waiter { op: Mutex::new(op), exclusive, slot: Mutex::new(None), ready: AtomicBool::new(false), cv: Condvar::new() })
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
        self.op.lock().as_ref().map_or(0, |(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
    }
}

#[derive(Default)]
struct Queue {
    busy: bool,
    waiting: VecDeque<Arc<Waiter>>,
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
    /// Writes `op` as part of a group. If this writer leads, `append` is called with the
    /// group's writes in log order, holding the baton; it must append them to the WAL and
    /// count them as pending writes of the memtable it returns.
    pub(crate) fn write(&self, op: WriteOp, append: impl FnOnce(&[&WriteOp]) -> Result<Appended>) -> Result<()> {
        let me = {
            let mut q = self.q.lock();
            if q.busy {
                let w = Waiter::new(Some(op));
                q.waiting.push_back(w.clone());
                Err(w)
            } else {
                q.busy = true;
                Ok(op)
            }
        };
        let op = match me {
            Ok(op) => op,
            Err(w) => match (w.wait(), w.op.lock().take()) {
                (Turn::Lead, Some(op)) => op,
                (Turn::Insert(mem, seq), op) => {
                    if let Some((k, v)) = op {
                        mem.insert(k, v, seq);
                    }
                    mem.end_write();
                    return Ok(());
                }
                (Turn::Done(r), _) => return r,
                (Turn::Lead, None) => {
                    self.handoff();
                    return Err(Error::Closed("a queued write lost its record".into()));
                }
            },
        };
        self.lead(op, append)
    }

    fn lead(&self, op: WriteOp, append: impl FnOnce(&[&WriteOp]) -> Result<Appended>) -> Result<()> {
        let followers: Vec<Arc<Waiter>> = {
            let mut q = self.q.lock();
            let mut bytes = op.0.len() + op.1.as_ref().map_or(0, |v| v.len());
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
            append(&[&op])
        } else {
            let guards: Vec<_> = followers.iter().map(|w| w.op.lock()).collect();
            let mut ops: Vec<&WriteOp> = Vec::with_capacity(followers.len() + 1);
            ops.push(&op);
            ops.extend(guards.iter().filter_map(|g| g.as_ref()));
            append(&ops)
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
            for _ in 0..=followers.len() {
                mem.end_write();
            }
            return fail(e);
        }
        for (i, w) in followers.iter().enumerate() {
            w.set(Turn::Insert(mem.clone(), seq + 1 + i as u64));
        }
        mem.insert(op.0, op.1, seq);
        mem.end_write();
        Ok(())
    }

    fn handoff(&self) {
        let mut q = self.q.lock();
        match q.waiting.pop_front() {
            Some(w) => w.set(Turn::Lead),
            None => q.busy = false,
        }
    }

    /// Runs `f` holding the baton: no group appends meanwhile (a flush rotating the
    /// WAL, a close sealing it). Groups appended earlier may still be inserting.
    pub(crate) fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        let wait = {
            let mut q = self.q.lock();
            if q.busy {
                let w = Waiter::new(None);
                q.waiting.push_back(w.clone());
                Some(w)
            } else {
                q.busy = true;
                None
            }
        };
        if let Some(w) = wait {
            while !matches!(w.wait(), Turn::Lead) {} // an exclusive waiter is only ever handed the baton
        }
        let r = f();
        self.handoff();
        r
    }
}
