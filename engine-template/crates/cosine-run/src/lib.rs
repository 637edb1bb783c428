//! Immutable sorted runs.
//!
//! A *run* is a sorted, non-overlapping sequence of *files* (SSTs); a file is a
//! sequence of data blocks of `B` entries, each with its own checksum, followed
//! by its filter section, its index blocks (on-disk fence pointers), a meta
//! block and a fixed footer. Whether a file's fence pointers and filters are held
//! in memory depends on the level it lives in (hot or cold), not on its bytes.
#![deny(unsafe_code, clippy::unwrap_used)]

pub mod block;
pub mod cache;
pub mod hit;
pub mod run;
pub mod table;
pub mod warm;

pub use block::{Block, BlockBuilder};
pub use cache::BlockCache;
pub use hit::Hit;
pub use run::{read_run_filter, run_filter_path, write_run_filter, Run, RunIter};
pub use table::{table_path, FilterKind, Table, TableBuilder, TableIter, TableOptions};
pub use warm::{WarmSpans, Warmed, WARM_MAX_BYTES};
