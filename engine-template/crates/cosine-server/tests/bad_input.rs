//! Bad input never panics the server and never desynchronizes a connection:
//! unknown commands, wrong arity, bad keys and oversized bulk strings get an error
//! and the connection goes on; unrecoverable framing errors get an error and a
//! close; random bytes (a property test) leave the server serving everyone else.

mod common;

use common::{client, design, InProcess};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::{Limits, Reply, ServerConfig};
use cosine_tests::TempDir;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::io::Read;
use std::time::Duration;

fn small_limits() -> ServerConfig {
    ServerConfig { limits: Limits { max_bulk: 1024, max_args: 64, max_inline: 256, max_request: 4096 }, ..ServerConfig::default() }
}

fn is_err(r: &Reply, needle: &str) -> bool {
    matches!(r, Reply::Error(m) if m.starts_with("ERR") && m.contains(needle))
}

#[test]
fn recoverable_errors_keep_the_connection() {
    let dir = TempDir::new("server-bad");
    let srv = InProcess::start(dir.path(), &design(Preset::RocksDb, WalSync::None), small_limits());
    let mut c = client(srv.addr);
    let long_key = vec![b'k'; 17];
    let cases: Vec<(Vec<&[u8]>, &str)> = vec![
        (vec![b"FLUSHALL"], "unknown command"),
        (vec![b"GET"], "wrong number of arguments"),
        (vec![b"SET", b"k"], "wrong number of arguments"),
        (vec![b"SET", b"k", b"v", b"NX"], "syntax error"),
        (vec![b"GET", &long_key], "key_bytes"),
        (vec![b"SET", b"k\0", b"v"], "NUL"),
        (vec![b"RANGE", b"a", b"0"], "count"),
        (vec![b"RANGE", b"a", b"-1"], "count"),
        (vec![b"MSET", b"a"], "wrong number of arguments"),
    ];
    for (args, needle) in cases {
        let r = c.call(&args).expect("reply");
        assert!(is_err(&r, needle), "{:?} -> {r:?}", args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>());
        assert_eq!(c.call(&[b"PING"]).expect("ping"), Reply::Simple("PONG".into()));
    }
    // An oversized bulk string is skipped without being buffered; the pipeline after it is served.
    let big = vec![b'x'; 5000];
    let mut wire = cosine_server::client::encode_request(&[b"SET", b"big", &big]);
    wire.extend(cosine_server::client::encode_request(&[b"SET", b"small", b"1"]));
    wire.extend(cosine_server::client::encode_request(&[b"GET", b"small"]));
    c.send_raw(&wire).expect("send");
    assert!(is_err(&c.recv().expect("reply"), "exceeds the limit"));
    assert_eq!(c.recv().expect("reply"), Reply::ok());
    assert_eq!(c.recv().expect("reply"), Reply::Bulk(b"1".to_vec()));
    assert_eq!(c.call(&[b"GET", b"big"]).expect("get"), Reply::Nil);
}

#[test]
fn framing_errors_close_only_that_connection() {
    let dir = TempDir::new("server-framing");
    let srv = InProcess::start(dir.path(), &design(Preset::RocksDb, WalSync::None), small_limits());
    let mut bystander = client(srv.addr);
    assert_eq!(bystander.call(&[b"SET", b"stay", b"1"]).expect("set"), Reply::ok());
    let bad: [&[u8]; 6] =
        [b"*abc\r\n", b"*2\r\n$3\r\nGET\r\n+k\r\n", b"*1\r\n$-7\r\n", b"*1\r\n$2\r\nPINGPONG\r\n", b"*100000\r\n", &[b'A'; 300]];
    for wire in bad {
        let mut c = client(srv.addr);
        c.send_raw(wire).expect("send");
        let r = c.recv().expect("an error reply before the close");
        assert!(is_err(&r, "Protocol error"), "{:?} -> {r:?}", String::from_utf8_lossy(wire));
        assert!(c.recv().is_err(), "connection left open after {:?}", String::from_utf8_lossy(wire));
    }
    assert_eq!(bystander.call(&[b"GET", b"stay"]).expect("get"), Reply::Bulk(b"1".to_vec()));
}

/// Random bytes, random RESP-looking fragments and valid requests mixed (300 cases on one
/// server): the server answers with well-formed replies and closes at the client's EOF,
/// and then still serves a fresh connection.
#[test]
fn random_bytes_never_break_the_server() {
    let dir = TempDir::new("server-fuzz");
    let srv = InProcess::start(dir.path(), &design(Preset::RocksDb, WalSync::None), small_limits());
    let chunk = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        Just(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec()),
        Just(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".to_vec()),
        Just(b"$99999999\r\n".to_vec()),
        Just(b"*-1\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        "[A-Z ]{0,12}\r\n".prop_map(|s| s.into_bytes()),
    ];
    let mut runner = TestRunner::new(ProptestConfig { cases: 300, ..ProptestConfig::default() });
    runner
        .run(&prop::collection::vec(chunk, 1..12), |chunks| {
            let wire: Vec<u8> = chunks.concat();
            let mut raw = std::net::TcpStream::connect(srv.addr).expect("connect");
            raw.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
            std::io::Write::write_all(&mut raw, &wire).expect("send");
            raw.shutdown(std::net::Shutdown::Write).expect("half-close"); // the server sees EOF and closes
            let mut got = Vec::new();
            raw.read_to_end(&mut got).expect("the server closes the connection");
            let mut buf = bytes::BytesMut::from(&got[..]);
            while !buf.is_empty() {
                match Reply::decode(&mut buf) {
                    Ok(Some(_)) => {}
                    Ok(None) => prop_assert!(false, "truncated reply {:?}", String::from_utf8_lossy(&got)),
                    Err(e) => prop_assert!(false, "malformed reply {:?}: {}", String::from_utf8_lossy(&got), e),
                }
            }
            let mut probe = cosine_server::client::Client::connect(srv.addr, Duration::from_secs(5)).expect("connect");
            prop_assert_eq!(probe.call(&[b"PING"]).expect("ping"), Reply::Simple("PONG".into()));
            Ok(())
        })
        .expect("the property holds");
}
