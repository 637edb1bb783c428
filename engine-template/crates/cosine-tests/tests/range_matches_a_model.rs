//! `range(lo, n)` equals the first `n` live entries of a sorted-map model after any mix of
//! puts, overwrites and deletes, whichever of them sit in the memtables and which in the
//! tree: a scan copies from the memtables only up to the tree's `n`-th live key and scans
//! again with whole copies when the memtables' tombstones leave it short.

use cosine_config::presets::{tiny, Preset};
use cosine_engine::Engine;
use cosine_tests::{key, TempDir};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Op {
    Put(u64, u8),
    Delete(u64),
    Range(u64, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..60u64, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0..60u64).prop_map(Op::Delete),
        3 => (0..64u64, 1..12usize).prop_map(|(k, n)| Op::Range(k, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn ranges_equal_the_model(ops in proptest::collection::vec(op(), 1..160)) {
        for p in [Preset::RocksDb, Preset::WiredTiger, Preset::Hybrid] {
            let mut cfg = tiny(p);
            cfg.layout.buffer_bytes = 6 * cfg.entry_bytes() as u64;
            let dir = TempDir::new("range-model");
            let e = Engine::open(dir.path(), &cfg).expect("open");
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for o in &ops {
                match o {
                    Op::Put(k, v) => {
                        e.put(&key(*k), &[*v]).expect("put");
                        model.insert(key(*k), vec![*v]);
                    }
                    Op::Delete(k) => {
                        e.delete(&key(*k)).expect("delete");
                        model.remove(&key(*k));
                    }
                    Op::Range(lo, n) => {
                        let got = e.range(&key(*lo), *n).expect("range");
                        let want: Vec<(Vec<u8>, Vec<u8>)> =
                            model.range(key(*lo)..).take(*n).map(|(k, v)| (k.clone(), v.clone())).collect();
                        prop_assert_eq!(got, want, "{:?} range({}, {})", p, lo, n);
                    }
                }
            }
            e.close().expect("close");
        }
    }
}
