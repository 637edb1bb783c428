//! Model-based property test: random operation sequences on the rocksdb-like preset
//! (tiny buffer, blocks and files, so flushes, compactions and reopens happen)
//! behave exactly like a `BTreeMap`.

use cosine_config::presets::{tiny, Preset};
use cosine_tests::{check_against_model, Op};
use proptest::prelude::*;

fn op(keys: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..keys, any::<u32>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0..keys).prop_map(Op::Delete),
        3 => (0..keys, any::<u32>()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => (0..keys, any::<u8>()).prop_map(|(k, b)| Op::Rmw(k, b)),
        5 => (0..keys).prop_map(Op::Get),
        1 => (0..keys, 0..keys).prop_map(|(a, b)| Op::Scan(a, b)),
        1 => (0..keys, 0usize..10).prop_map(|(a, n)| Op::Range(a, n)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cosine_tests::proptest_cases(64), max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn behaves_like_a_btreemap(ops in proptest::collection::vec(op(48), 1..300)) {
        let cfg = tiny(Preset::RocksDb);
        if let Err(m) = check_against_model(&cfg, &ops) {
            prop_assert!(false, "{}", m);
        }
    }
}

/// A longer seeded sequence over more keys reaches deeper levels (and cold ones).
#[test]
fn long_sequence_reaches_deep_levels() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let keys = 600;
    let mut ops = Vec::new();
    for i in 0..4000 {
        ops.push(match rng.gen_range(0..100) {
            0..=59 => Op::Put(rng.gen_range(0..keys), rng.gen()),
            60..=69 => Op::Delete(rng.gen_range(0..keys)),
            70..=74 => Op::Rmw(rng.gen_range(0..keys), rng.gen()),
            75..=97 => Op::Get(rng.gen_range(0..keys)),
            _ => Op::Range(rng.gen_range(0..keys), 20),
        });
        if i % 1500 == 1499 {
            ops.push(Op::Reopen);
        }
    }
    let cfg = tiny(Preset::RocksDb);
    if let Err(m) = check_against_model(&cfg, &ops) {
        panic!("{m}");
    }
}
