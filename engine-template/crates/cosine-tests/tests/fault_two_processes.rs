//! Fault: two processes open one directory.
//!
//! The first opener holds an exclusive `flock` on `LOCK`; a second opener, in
//! another process or in the same one, gets a clear error and touches nothing.
//! The lock goes away with its holder (even a SIGKILLed one).

use cosine_config::presets::{tiny, Preset};
use cosine_engine::{Engine, Error, LOCK};
use cosine_tests::{dir_contents, TempDir};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn a_second_opener_is_refused_while_the_first_holds_the_lock() {
    let cfg = tiny(Preset::RocksDb);
    let dir = TempDir::new("fault-two-procs");
    let path = dir.path().to_str().expect("utf-8 path");
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash-child"))
        .args([path, "rocksdb", "7", "100000000"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    // The child has opened the engine once it acknowledges a write.
    let first = lines.by_ref().map(|l| l.expect("line")).find(|l| l.starts_with("A "));
    assert!(first.is_some(), "child acknowledged no write");

    let err = Engine::open(dir.path(), &cfg).expect_err("a second process must not open a held directory");
    assert!(matches!(&err, Error::Locked { path } if *path == dir.path().join(LOCK)), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("LOCK") && msg.contains("another"), "clear error: {msg}");

    child.kill().expect("kill");
    let _ = child.wait();
    drop(lines);
    let e = Engine::open(dir.path(), &cfg).expect("the lock dies with its holder");
    e.wait_idle().expect("idle");
    let before = dir_contents(dir.path());
    let err = Engine::open(dir.path(), &cfg).expect_err("a second opener in the same process is refused too");
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert_eq!(dir_contents(dir.path()), before, "the refused opener changed nothing");
    e.close().expect("close");
}
