//! Fault: the disk fills up during a WAL append (injected, so no root is needed).
//!
//! The WAL's writes go through `cosine_core::fault`, which here lets a few
//! bytes through and then fails the rest of the append with `StorageFull`, as a
//! full file system does. The failed append is rolled back and the writer is
//! poisoned: no later write is acknowledged, even after space comes back, and
//! the reopened log has no partial record in it at all (it opens under
//! `absolute_consistency`) and holds every acknowledged write.

use cosine_config::presets::{tiny, Preset};
use cosine_config::{WalRecovery, WalSync};
use cosine_core::fault;
use cosine_engine::{Engine, Error};
use cosine_tests::{key, TempDir};
use std::collections::BTreeMap;

#[test]
fn failed_wal_append_is_rolled_back_and_nothing_later_is_acknowledged() {
    for mode in [WalSync::EveryWrite, WalSync::GroupCommit, WalSync::None] {
        let mut cfg = tiny(Preset::RocksDb);
        cfg.durability.wal_sync = mode;
        cfg.layout.buffer_bytes = 100_000 * cfg.entry_bytes() as u64; // the WAL is all there is
        let dir = TempDir::new("fault-enospc-injected");
        let e = Engine::open(dir.path(), &cfg).expect("open");
        let mut acked: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for i in 0..20u64 {
            e.put(&key(i), &i.to_le_bytes()).expect("put");
            acked.insert(i, i.to_le_bytes().to_vec());
        }
        // `none` buffers 64 KiB in the process: the failure comes with the first hand-off.
        fault::fail_writes_after(dir.path(), 30);
        let mut first_failure = None;
        for i in 20..5000u64 {
            match e.put(&key(i), &i.to_le_bytes()) {
                Ok(()) if first_failure.is_none() => {
                    acked.insert(i, i.to_le_bytes().to_vec());
                }
                Ok(()) => panic!("{mode:?}: write {i} acknowledged after the WAL failed"),
                Err(_) => {
                    first_failure.get_or_insert(i);
                }
            }
            if i == 4000 {
                fault::clear(dir.path()); // space comes back: still nothing is acknowledged
            }
        }
        assert!(first_failure.is_some(), "{mode:?}: the injected full disk never failed an append");
        let refused = e.put(&key(0), b"after");
        assert!(matches!(refused, Err(Error::Poisoned(_))), "{mode:?}: poisoned until reopened: {refused:?}");
        assert!(e.close().is_err(), "{mode:?}: close reports the earlier failure");
        let mut strict = cfg.clone();
        strict.durability.wal_recovery = WalRecovery::AbsoluteConsistency;
        let e = Engine::open(dir.path(), &strict).unwrap_or_else(|err| panic!("{mode:?}: reopen: {err}"));
        if mode != WalSync::None {
            // `none` promises nothing for writes still buffered in the process.
            for (k, v) in &acked {
                assert_eq!(e.get(&key(*k)).expect("get").as_ref(), Some(v), "{mode:?}: acknowledged write {k} lost");
            }
        }
        for i in first_failure.unwrap_or(0)..5000 {
            assert_eq!(e.get(&key(i)).expect("get"), None, "{mode:?}: unacknowledged write {i} present");
        }
        e.close().expect("close");
    }
}
