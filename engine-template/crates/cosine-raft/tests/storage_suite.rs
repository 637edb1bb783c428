//! openraft's own storage test suite (`openraft::testing::Suite`: about 40 tests of the
//! log store and the state machine: log state after appends, truncations and purges,
//! votes, the initial state, membership recovery, applying, building, getting and
//! installing snapshots) run against cosine-raft's durable log and engine state machine.

use cosine_config::presets::{tiny, Preset};
use cosine_raft::log_store::{LogStore, LogSync};
use cosine_raft::state_machine::StateMachine;
use cosine_raft::TypeConfig;
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use std::sync::Arc;

/// Each store in a directory of its own, all under one scratch directory (a snapshot moves
/// from one store's directory to another's by rename).
struct Builder {
    root: Arc<tempfile::TempDir>,
}

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<u64>> {
        let dir = tempfile::Builder::new().prefix("store-").tempdir_in(self.root.path()).expect("scratch directory");
        let log = LogStore::open(&dir.path().join("raft"), LogSync::EveryWrite)?;
        let sm = StateMachine::open(dir.path(), &tiny(Preset::RocksDb)).expect("state machine");
        Ok((dir, log, sm))
    }
}

type S = Suite<TypeConfig, LogStore, StateMachine, Builder, tempfile::TempDir>;

macro_rules! suite {
    ($b:expr, $rt:expr, $($name:ident),* $(,)?) => {{
        let mut failed = Vec::new();
        $(
            let res = $rt.block_on(async {
                let (_guard, store, sm) = $b.build().await?;
                S::$name(store, sm).await
            });
            if let Err(e) = res {
                failed.push(format!("{}: {e}", stringify!($name)));
            }
        )*
        failed
    }};
}

#[test]
fn openraft_storage_suite() {
    let root = Arc::new(tempfile::Builder::new().prefix("cosine-raft-suite-").tempdir().expect("scratch directory"));
    let b = Builder { root };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut failed = suite!(
        b,
        rt,
        last_membership_in_log_initial,
        last_membership_in_log,
        last_membership_in_log_multi_step,
        get_membership_initial,
        get_membership_from_log_and_empty_sm,
        get_membership_from_empty_log_and_sm,
        get_membership_from_log_le_sm_last_applied,
        get_membership_from_log_gt_sm_last_applied_1,
        get_membership_from_log_gt_sm_last_applied_2,
        get_initial_state_without_init,
        get_initial_state_membership_from_log_and_sm,
        get_initial_state_with_state,
        get_initial_state_last_log_gt_sm,
        get_initial_state_last_log_lt_sm,
        get_initial_state_log_ids,
        get_initial_state_re_apply_committed,
        save_vote,
        get_log_entries,
        limited_get_log_entries,
        try_get_log_entry,
        initial_logs,
        get_log_state,
        get_log_id,
        last_id_in_log,
        last_applied_state,
        purge_logs_upto_0,
        purge_logs_upto_5,
        purge_logs_upto_20,
        delete_logs_since_11,
        delete_logs_since_0,
        append_to_log,
        snapshot_meta,
        apply_single,
        apply_multiple,
    );
    if let Err(e) = rt.block_on(S::transfer_snapshot(&b)) {
        failed.push(format!("transfer_snapshot: {e}"));
    }
    assert!(failed.is_empty(), "openraft's storage suite failed:\n{}", failed.join("\n"));
}
