//! A GET's reply is the same bytes on the wire however the server produces it: since issue 48
//! the server encodes GET replies straight from the engine's value (`command::get_into`), so
//! these pin the exact RESP bytes of pipelined GETs of a memtable key, a flushed key, a deleted
//! key, a missing key, an empty value and large values, mixed with other commands.

mod common;

use common::{client, design, InProcess};
use cosine_config::presets::Preset;
use cosine_config::WalSync;
use cosine_server::client::encode_request as request;
use cosine_server::{Reply, ServerConfig, ServerError};
use cosine_tests::TempDir;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The bulk reply of `v` as Redis writes it.
fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", v.len()).into_bytes();
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
    out
}

/// The wire form of `r`.
fn encoded(r: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    r.encode(&mut out);
    out
}

/// Sends `wire` whole on a new connection and reads `want.len()` bytes back.
fn exchange(srv: &InProcess, wire: &[u8], want: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(srv.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(wire).expect("send");
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).expect("the replies");
    got
}

#[test]
fn pipelined_get_replies_are_the_bytes_redis_sends() {
    let dir = TempDir::new("server-get-bytes");
    let srv = InProcess::start(dir.path(), &design(Preset::RocksDb, WalSync::GroupCommit), ServerConfig::default());
    let mut c = client(srv.addr);
    let big = vec![b'x'; 1024];
    let huge: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    // old keys: the 64-entry buffer flushes them to runs
    for i in 0..300u32 {
        assert_eq!(c.call(&[b"SET", format!("old{i}").as_bytes(), format!("v{i}").as_bytes()]).expect("set"), Reply::ok());
    }
    assert_eq!(c.call(&[b"DEL", b"old7"]).expect("del"), Reply::Int(1));
    for (k, v) in [(&b"mem"[..], &b"hello"[..]), (b"empty", b""), (b"big", &big), (b"huge", &huge)] {
        assert_eq!(c.call(&[b"SET", k, v]).expect("set"), Reply::ok());
    }
    // each request's reply, as Redis would send it
    let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (request(&[b"GET", b"mem"]), bulk(b"hello")),
        (request(&[b"GET", b"old3"]), bulk(b"v3")),
        (request(&[b"GET", b"old7"]), b"$-1\r\n".to_vec()),
        (request(&[b"GET", b"never"]), b"$-1\r\n".to_vec()),
        (request(&[b"GET", b"empty"]), b"$0\r\n\r\n".to_vec()),
        (request(&[b"GET", b"big"]), bulk(&big)),
        (request(&[b"SET", b"new", b"fresh"]), b"+OK\r\n".to_vec()),
        (request(&[b"GET", b"new"]), bulk(b"fresh")),
        (request(&[b"PING"]), b"+PONG\r\n".to_vec()),
        (request(&[b"GET", b"huge"]), bulk(&huge)),
        (request(&[b"GET", b"old299"]), bulk(b"v299")),
        (request(&[b"GET", b"k\x00"]), encoded(&Reply::error(&ServerError::KeyEndsWithNul))),
        (request(&[b"EXISTS", b"mem", b"old7", b"old3"]), b":2\r\n".to_vec()),
    ];
    // one at a time, then all pipelined, then a pipeline of 16 GETs of the 1 KB value
    for (req, want) in &cases {
        assert_eq!(String::from_utf8_lossy(&exchange(&srv, req, want)), String::from_utf8_lossy(want));
    }
    let wire: Vec<u8> = cases.iter().flat_map(|(r, _)| r.clone()).collect();
    let want: Vec<u8> = cases.iter().flat_map(|(_, w)| w.clone()).collect();
    assert!(exchange(&srv, &wire, &want) == want, "the pipelined replies differ");
    let wire = request(&[b"GET", b"big"]).repeat(16);
    assert!(exchange(&srv, &wire, &bulk(&big).repeat(16)) == bulk(&big).repeat(16));
}
