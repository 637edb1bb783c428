//! A linearizability checker for a history of operations on one register (one key):
//! the Wing & Gong search with Lowe's memoization, as `porcupine` does it.
//!
//! An operation has a call time, a return time and what it did: a write of a value, or
//! a read and what it saw (None: the key was absent). A write whose outcome the client
//! does not know (its connection broke, or the server said it might still commit) has no
//! return time: it may take effect at any point after its call, or never (linearized
//! after everything else, it changes nothing anyone saw). Failed reads are left out.
//!
//! The search walks the history's call and return events in time order, trying to
//! linearize a called, not yet linearized operation whose effect matches the register
//! (a read must see the current value); reaching the return of an operation not yet
//! linearized means the choices so far are wrong, and it backtracks. Each (set of
//! linearized operations, register value) is tried once.
//!
//! Bounded: unknown writes whose value no read saw are left out first (linearized anywhere,
//! no read would fall between them and the next write, so without them every read sees the
//! same), as each such write otherwise doubles the sets the search may visit; and the search
//! gives up with an error after [`MAX_STATES`] states, so that a tangled history fails a test
//! instead of running it for hours.

use std::collections::HashSet;

/// What an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Wrote the value.
    Write(u64),
    /// Read, and saw the value (None: absent).
    Read(Option<u64>),
}

/// One operation of a history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// When the client called it (any monotonic clock, the same for every client).
    pub call: u64,
    /// When it returned; None when its outcome is unknown (writes only).
    pub ret: Option<u64>,
    /// What it did.
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    op: usize,
    is_call: bool,
}

/// The most (linearized operations, value) states the search tries before it gives up: the
/// histories of the tests (about 1,500 operations a key) take a few thousand.
pub const MAX_STATES: usize = 200_000;

/// `Ok(())` if the operations on one register starting at `init` are linearizable; else
/// the error names the first return that no linearization reaches (operations numbered
/// as in `ops`), or says the search gave up.
pub fn check(ops: &[Op], init: Option<u64>) -> Result<(), String> {
    if let Some(bad) = ops.iter().position(|o| o.ret.is_none() && matches!(o.kind, Kind::Read(_))) {
        return Err(format!("op {bad}: a read without a return (leave failed reads out)"));
    }
    let seen_values: HashSet<u64> = ops
        .iter()
        .filter_map(|o| match o.kind {
            Kind::Read(v) => v,
            Kind::Write(_) => None,
        })
        .collect();
    let kept: Vec<usize> =
        (0..ops.len()).filter(|&i| ops[i].ret.is_some() || matches!(ops[i].kind, Kind::Write(v) if seen_values.contains(&v))).collect();
    let sub: Vec<Op> = kept.iter().map(|&i| ops[i]).collect();
    search(&sub, init).map_err(|(op, why)| match op {
        Some(i) => {
            let o = ops[kept[i]];
            format!("no linearization reaches the return of op {} ({:?}, called {}, returned {:?})", kept[i], o.kind, o.call, o.ret)
        }
        None => why,
    })
}

/// The search over `ops`; an error is the op whose return no linearization reaches, or a reason.
fn search(ops: &[Op], init: Option<u64>) -> Result<(), (Option<usize>, String)> {
    // events in time order; at equal times calls first (the operations overlap)
    let mut events: Vec<(u64, bool, Event)> = Vec::with_capacity(2 * ops.len());
    for (i, o) in ops.iter().enumerate() {
        events.push((o.call, false, Event { op: i, is_call: true }));
        events.push((o.ret.unwrap_or(u64::MAX), true, Event { op: i, is_call: false }));
    }
    events.sort_by_key(|(t, is_ret, e)| (*t, *is_ret, e.op));
    let n = events.len();
    // a doubly linked list over the events, with the position of each op's call and return
    let mut next: Vec<usize> = (1..=n).collect(); // n = end
    let mut prev: Vec<usize> = (0..n).map(|i| if i == 0 { usize::MAX } else { i - 1 }).collect();
    let mut head = if n == 0 { n } else { 0 };
    let mut pos = vec![(0usize, 0usize); ops.len()];
    for (i, (_, _, e)) in events.iter().enumerate() {
        if e.is_call {
            pos[e.op].0 = i;
        } else {
            pos[e.op].1 = i;
        }
    }
    let words = ops.len().div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut state = init;
    let mut seen: HashSet<(Vec<u64>, Option<u64>)> = HashSet::new();
    let mut stack: Vec<(usize, Option<u64>)> = Vec::new(); // (op, state before it)
    let unlink = |i: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>, head: &mut usize| {
        let (p, nx) = (prev[i], next[i]);
        if p == usize::MAX {
            *head = nx;
        } else {
            next[p] = nx;
        }
        if nx < n {
            prev[nx] = p;
        }
    };
    let relink = |i: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>, head: &mut usize| {
        let (p, nx) = (prev[i], next[i]);
        if p == usize::MAX {
            *head = i;
        } else {
            next[p] = i;
        }
        if nx < n {
            prev[nx] = i;
        }
    };
    let mut cur = head;
    while head < n {
        if cur >= n {
            return Err((None, "internal: ran off the list".into()));
        }
        let e = events[cur].2;
        if e.is_call {
            let op = ops[e.op];
            let (ok, after) = match op.kind {
                Kind::Write(v) => (true, Some(v)),
                Kind::Read(saw) => (saw == state, state),
            };
            let mut lin = linearized.clone();
            lin[e.op / 64] |= 1 << (e.op % 64);
            if ok && seen.insert((lin.clone(), after)) {
                if seen.len() > MAX_STATES {
                    return Err((
                        None,
                        format!("gave up after {MAX_STATES} states: too tangled a history to decide ({} operations)", ops.len()),
                    ));
                }
                stack.push((e.op, state));
                linearized = lin;
                state = after;
                // lift the op: its call and its return leave the list (return first: it is later)
                let (c, r) = pos[e.op];
                unlink(r, &mut next, &mut prev, &mut head);
                unlink(c, &mut next, &mut prev, &mut head);
                cur = head;
            } else {
                cur = next[cur];
            }
        } else {
            if ops[e.op].ret.is_none() {
                // only unknown writes are left: they need not have happened
                return Ok(());
            }
            // the return of an op not linearized yet: undo the last choice
            let Some((op, before)) = stack.pop() else {
                return Err((Some(e.op), String::new()));
            };
            linearized[op / 64] &= !(1 << (op % 64));
            state = before;
            let (c, r) = pos[op];
            relink(c, &mut next, &mut prev, &mut head);
            relink(r, &mut next, &mut prev, &mut head);
            cur = next[c];
        }
    }
    Ok(())
}
