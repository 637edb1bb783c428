//! Fault: one file of the database is deleted (each file kind in turn).
//!
//! Deleting a WAL segment, the MANIFEST, a run file, a run filter or a hash-log
//! segment makes the open fail (the manifest names every one of them) and
//! changes nothing else; deleting `LOCK` costs nothing.

use cosine_engine::{Error, LOCK};
use cosine_tests::{copy_dir, every_file_kind, files_with_ext, open_damaged, pristine, Damaged, TempDir};

#[test]
fn every_deleted_database_file_is_detected() {
    let mut tried = 0;
    for cfg in every_file_kind() {
        let good = TempDir::new("delete-good");
        let model = pristine(good.path(), &cfg);
        let work = TempDir::new("delete");
        let mut victims = vec![good.path().join("MANIFEST")];
        for ext in ["wal", "sst", "rbf", "log"] {
            // The first and the last file of each kind.
            let files = files_with_ext(good.path(), ext);
            victims.extend(files.first().cloned());
            victims.extend(files.last().cloned().filter(|_| files.len() > 1));
        }
        for v in victims {
            copy_dir(good.path(), work.path());
            let name = v.file_name().expect("name").to_string_lossy().to_string();
            std::fs::remove_file(work.path().join(&name)).expect("delete");
            let what = format!("{}: {name} deleted", cfg.design.name);
            match open_damaged(work.path(), &cfg, &model) {
                Err(defect) => panic!("{what}: {defect}"),
                Ok(Damaged::Opened(_)) => panic!("{what}: the database opened without it"),
                Ok(Damaged::Refused(err)) => {
                    let named = err.to_string().contains(&name)
                        || matches!(&err, Error::MissingManifest { .. })
                        || matches!(&err, Error::Io { path, .. } if path.ends_with(&name));
                    assert!(named, "{what}: the error names the missing file: {err}");
                }
            }
            tried += 1;
        }
        copy_dir(good.path(), work.path());
        std::fs::remove_file(work.path().join(LOCK)).expect("delete LOCK");
        assert!(matches!(open_damaged(work.path(), &cfg, &model), Ok(Damaged::Opened(0))), "{}: LOCK is recreated", cfg.design.name);
    }
    assert!(tried >= 5 * 3, "{tried} deletions");
}
