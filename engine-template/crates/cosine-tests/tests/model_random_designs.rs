//! Model-based property test over random *designs*: every combination of the
//! template's knobs (T, K, Z, B, E_B, hot levels, bits per key, filter
//! granularity, compaction, run strategy, file picking, merge threshold,
//! full-compaction levels, file size, block cache) behaves like a `BTreeMap`.

use cosine_config::presets::{tiny, Preset};
use cosine_config::{CompactionKind, Config, FilePicking, FilterGranularity, RunStrategy};
use cosine_tests::{check_against_model, op_strategy};
use proptest::prelude::*;

fn design() -> impl Strategy<Value = Config> {
    (
        (2u32..7, 1usize..5, 1usize..4, 1usize..5, 1u64..7, 0usize..4),
        (0u32..13, 0usize..3, 0usize..3, 0usize..3, 0usize..5),
        (3u32..11, 0usize..4, 0usize..9, any::<bool>(), any::<bool>()),
    )
        .prop_map(|((t, k, z, b, eb, hot), (bits, gran, comp, rs, fp), (m, full, fe, cache, lsh))| {
            let mut c = tiny(if lsh { Preset::Faster } else { Preset::RocksDb });
            c.design.name = "random".into();
            c.layout.size_ratio = t as f64;
            c.layout.runs_per_hot_level = k;
            c.layout.runs_per_cold_level = z;
            c.layout.block_entries = b;
            c.layout.buffer_bytes = eb * c.entry_bytes() as u64;
            c.layout.hot_levels = hot;
            c.layout.bloom_bits_per_key = vec![bits as f64, (bits / 2) as f64];
            c.layout.block_cache_bytes = if cache { 4096 } else { 0 };
            c.algorithms.filter_granularity = [FilterGranularity::Block, FilterGranularity::File, FilterGranularity::Run][gran];
            c.algorithms.compaction = [CompactionKind::Full, CompactionKind::Partial, CompactionKind::Hybrid][comp];
            c.algorithms.run_strategy = [RunStrategy::First, RunStrategy::LastFull, RunStrategy::Fullest][rs];
            c.algorithms.file_picking = [
                FilePicking::OldestMerged,
                FilePicking::OldestFlushed,
                FilePicking::DenseFp,
                FilePicking::SparseFp,
                FilePicking::ChooseFirst,
            ][fp];
            c.algorithms.merge_threshold = m as f64 / 10.0;
            c.algorithms.full_compaction_levels = full;
            c.algorithms.file_entries = b + fe;
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cosine_tests::proptest_cases(96), max_shrink_iters: 300, ..ProptestConfig::default() })]
    #[test]
    fn every_design_behaves_like_a_btreemap(cfg in design(), ops in proptest::collection::vec(op_strategy(64), 1..400)) {
        cfg.validate().map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Err(m) = check_against_model(&cfg, &ops) {
            prop_assert!(false, "{}\n{:?}", m, cfg);
        }
    }
}
