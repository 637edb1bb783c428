//! Model-based property test: random operation sequences on the hybrid-like preset
//! (tiny buffer, blocks and files, so flushes, compactions and reopens happen)
//! behave exactly like a `BTreeMap`.

use cosine_config::presets::{tiny, Preset};
use cosine_tests::{check_against_model, long_sequence, op_strategy};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: cosine_tests::proptest_cases(64), max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn behaves_like_a_btreemap(ops in proptest::collection::vec(op_strategy(48), 1..300)) {
        if let Err(m) = check_against_model(&tiny(Preset::Hybrid), &ops) {
            prop_assert!(false, "{}", m);
        }
    }
}

/// A longer seeded sequence over more keys reaches deeper levels (and cold ones).
#[test]
fn long_sequence_reaches_deep_levels() {
    if let Err(m) = check_against_model(&tiny(Preset::Hybrid), &long_sequence(7)) {
        panic!("{m}");
    }
}
