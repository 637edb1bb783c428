//! Fault: one flipped bit at a random offset of every file kind (WAL segments,
//! MANIFEST, run files, run filters, hash-log segments).
//!
//! Either the open is refused with a corruption error and every file is left as
//! it was, or the database opens and no read returns a wrong value or misses an
//! acknowledged entry (a read of damaged data fails with a corruption error).
//! Damage to the WAL, the manifest or a hash-log segment (whose index is rebuilt
//! by reading every block) is always refused at open.

use cosine_tests::{copy_dir, every_file_kind, files_of_kind, open_damaged, pristine, Damaged, TempDir, FILE_KINDS};
use rand::{Rng, SeedableRng};

const FLIPS_PER_KIND: usize = 10;

#[test]
fn a_flipped_bit_anywhere_is_refused_or_read_as_corruption() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(14);
    let mut tried = 0;
    for cfg in every_file_kind() {
        let good = TempDir::new("bitflip-good");
        let model = pristine(good.path(), &cfg);
        let work = TempDir::new("bitflip");
        for ext in FILE_KINDS {
            let files = files_of_kind(good.path(), ext);
            if files.is_empty() {
                continue;
            }
            for _ in 0..FLIPS_PER_KIND {
                copy_dir(good.path(), work.path());
                let f = &files[rng.gen_range(0..files.len())];
                let target = work.path().join(f.file_name().expect("name"));
                let mut b = std::fs::read(&target).expect("read");
                let (at, bit) = (rng.gen_range(0..b.len()), rng.gen_range(0..8));
                b[at] ^= 1 << bit;
                std::fs::write(&target, &b).expect("write");
                let what = format!("{}: {} byte {at} bit {bit}", cfg.design.name, target.display());
                match open_damaged(work.path(), &cfg, &model) {
                    Err(defect) => panic!("{what}: {defect}"),
                    Ok(Damaged::Refused(err)) => assert!(err.is_corruption(), "{what}: refused with {err}"),
                    Ok(Damaged::Opened(_)) => {
                        assert!(!["wal", "MANIFEST", "log"].contains(&ext), "{what}: damage to the {ext} must stop the open")
                    }
                }
                tried += 1;
            }
        }
    }
    assert!(tried >= 5 * 3 * FLIPS_PER_KIND, "{tried} flips");
}
