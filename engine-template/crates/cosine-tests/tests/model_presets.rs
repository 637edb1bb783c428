//! Every preset behaves exactly like a `BTreeMap`: random operation sequences (a
//! property test with its own cases per preset) and a long seeded sequence, on
//! each of `Preset::ALL` shrunk by `tiny` (a few entries per buffer, block and
//! file, so flushes, compactions, deep and cold levels and reopens happen).

use cosine_config::presets::{tiny, Preset};
use cosine_tests::{check_against_model, long_sequence, op_strategy, proptest_cases};
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Runs `check` on every preset, each in its own thread, and fails naming every
/// preset whose check failed.
fn for_every_preset(check: impl Fn(Preset) -> Result<(), String> + Sync) {
    let check = &check;
    let failures: Vec<String> = std::thread::scope(|s| {
        let running: Vec<_> = Preset::ALL.into_iter().map(|p| (p, s.spawn(move || check(p)))).collect();
        running
            .into_iter()
            .filter_map(|(p, t)| match t.join() {
                Ok(Ok(())) => None,
                Ok(Err(m)) => Some(format!("preset {}: {m}", p.name())),
                Err(_) => Some(format!("preset {}: the check panicked", p.name())),
            })
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn random_operation_sequences_behave_like_a_btreemap() {
    for_every_preset(|p| {
        let cfg = tiny(p);
        let config = Config { cases: proptest_cases(64), max_shrink_iters: 200, source_file: Some(file!()), ..Config::default() };
        let ops = proptest::collection::vec(op_strategy(48), 1..300);
        TestRunner::new(config).run(&ops, |ops| check_against_model(&cfg, &ops).map_err(TestCaseError::fail)).map_err(|e| e.to_string())
    });
}

/// A longer seeded sequence over more keys reaches deeper levels (and cold ones).
#[test]
fn a_long_sequence_behaves_like_a_btreemap() {
    for_every_preset(|p| check_against_model(&tiny(p), &long_sequence(7)));
}
