//! The one iterator trait every sorted source implements, and the merge over them.

use crate::error::Result;

/// A forward cursor over `(key, value)` pairs in ascending key order, one entry per key.
///
/// `value()` is `None` for a tombstone. Sources are merged by [`MergingIterator`],
/// which is how memtables, runs and levels compose for scans, flushes and compactions.
pub trait KvIterator {
    /// True while the cursor points at an entry.
    fn valid(&self) -> bool;
    /// Current key; only meaningful while `valid()`.
    fn key(&self) -> &[u8];
    /// Current value (`None` = tombstone); only meaningful while `valid()`.
    fn value(&self) -> Option<&[u8]>;
    /// Advances to the next entry. Errors (e.g. a corrupted block) are sticky for the caller.
    fn next(&mut self) -> Result<()>;
}

/// An iterator over an owned, sorted vector (memtable snapshots, test inputs).
#[derive(Debug, Default)]
pub struct VecIterator {
    items: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pos: usize,
}

impl VecIterator {
    /// Wraps `items`, which must be sorted by key with unique keys.
    pub fn new(items: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> Self {
        VecIterator { items, pos: 0 }
    }
}

impl KvIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.items.len()
    }
    fn key(&self) -> &[u8] {
        &self.items[self.pos].0
    }
    fn value(&self) -> Option<&[u8]> {
        self.items[self.pos].1.as_deref()
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }
}

/// Merges sources where index 0 is the newest: for equal keys the lowest index wins
/// and the older versions are skipped.
///
/// A linear scan over the sources picks the minimum; an engine merges at most a few
/// dozen runs at once, where this beats a heap and keeps the code obvious.
pub struct MergingIterator<'a> {
    sources: Vec<Box<dyn KvIterator + Send + 'a>>,
    current: Option<usize>,
    scratch: Vec<u8>,
}

impl<'a> MergingIterator<'a> {
    /// Builds the merge; `sources[0]` has priority over `sources[1]`, and so on.
    pub fn new(sources: Vec<Box<dyn KvIterator + Send + 'a>>) -> Self {
        let mut m = MergingIterator { sources, current: None, scratch: Vec::new() };
        m.pick();
        m
    }

    fn pick(&mut self) {
        let mut best: Option<usize> = None;
        for (i, s) in self.sources.iter().enumerate() {
            if !s.valid() {
                continue;
            }
            match best {
                None => best = Some(i),
                Some(b) => {
                    if s.key() < self.sources[b].key() {
                        best = Some(i);
                    }
                }
            }
        }
        self.current = best;
    }
}

impl KvIterator for MergingIterator<'_> {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn key(&self) -> &[u8] {
        match self.current {
            Some(c) => self.sources[c].key(),
            None => &[],
        }
    }
    fn value(&self) -> Option<&[u8]> {
        match self.current {
            Some(c) => self.sources[c].value(),
            None => None,
        }
    }
    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current else { return Ok(()) };
        self.scratch.clear();
        self.scratch.extend_from_slice(self.sources[cur].key());
        // Skip shadowed (older) versions of the current key in every source.
        for s in self.sources.iter_mut() {
            while s.valid() && s.key() == self.scratch.as_slice() {
                s.next()?;
            }
        }
        self.pick();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[(&str, Option<&str>)]) -> Box<dyn KvIterator + Send> {
        Box::new(VecIterator::new(items.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.map(|x| x.as_bytes().to_vec()))).collect()))
    }

    #[test]
    fn newest_wins_and_order_holds() {
        let mut m = MergingIterator::new(vec![
            v(&[("b", Some("new")), ("d", None)]),
            v(&[("a", Some("1")), ("b", Some("old")), ("d", Some("x")), ("e", Some("5"))]),
        ]);
        let mut out = Vec::new();
        while m.valid() {
            out.push((m.key().to_vec(), m.value().map(|x| x.to_vec())));
            m.next().expect("next");
        }
        let keys: Vec<_> = out.iter().map(|(k, _)| String::from_utf8_lossy(k).to_string()).collect();
        assert_eq!(keys, vec!["a", "b", "d", "e"]);
        assert_eq!(out[1].1.as_deref(), Some(&b"new"[..]));
        assert_eq!(out[2].1, None);
    }
}
