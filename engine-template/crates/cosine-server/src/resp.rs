//! RESP2, the Redis wire protocol: an incremental request parser and reply encoding.
//!
//! Requests are arrays of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or inline
//! commands (`PING\r\n`). The parser consumes bytes from the front of a buffer and
//! yields one request at a time, so a pipeline of requests is parsed as it arrives.
//!
//! Bad input is classified by whether the stream can stay in step:
//! * a bulk string longer than [`Limits::max_bulk`] is *skipped* (its length is
//!   declared, so the parser discards exactly that many bytes without buffering them)
//!   and the request is [`Parsed::Rejected`]: the connection survives;
//! * anything that leaves the parser unable to tell where the next request starts
//!   (a bad length, a missing `$`, a missing CRLF, an over-long header or inline
//!   line, too many arguments) is a [`ServerError::Protocol`] error: the server answers
//!   `-ERR Protocol error: ...` and closes the connection, as Redis does.

use crate::error::ServerError;
use bytes::{Buf, BytesMut};

/// The parser's bounds. Every one of them keeps a hostile client from making the
/// server buffer without limit.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string accepted, bytes (Redis' `proto-max-bulk-len` is 512 MiB).
    pub max_bulk: usize,
    /// Most arguments in one request (Redis accepts up to 1024 * 1024).
    pub max_args: usize,
    /// Longest inline command or `*`/`$` header line, bytes (Redis' `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub max_inline: usize,
    /// Most payload bytes one request may carry in all (Redis' `client-query-buffer-limit`, 1 GiB).
    pub max_request: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk: 64 << 20, max_args: 1 << 20, max_inline: 64 << 10, max_request: 1 << 30 }
    }
}

/// One parsed request.
#[derive(Debug)]
pub enum Parsed {
    /// The arguments of a command (the first is its name).
    Request(Vec<Vec<u8>>),
    /// A request that was consumed but refused (an over-long bulk string); answer
    /// with this error and carry on with the next request.
    Rejected(ServerError),
}

/// Equal requests hold the same arguments; equal refusals, the same message.
impl PartialEq for Parsed {
    fn eq(&self, other: &Parsed) -> bool {
        match (self, other) {
            (Parsed::Request(a), Parsed::Request(b)) => a == b,
            (Parsed::Rejected(a), Parsed::Rejected(b)) => a.to_string() == b.to_string(),
            _ => false,
        }
    }
}

fn protocol(m: impl Into<String>) -> ServerError {
    ServerError::Protocol(m.into())
}

#[derive(Debug)]
enum State {
    /// Between requests.
    Start,
    /// Inside a `*N` array: `left` bulk strings still to come, `bytes` of payload so far.
    Array { left: usize, args: Vec<Vec<u8>>, bytes: usize, rejected: Option<ServerError> },
    /// Discarding `bytes` of an over-long bulk string (payload and CRLF).
    Skip { bytes: usize, left: usize, rejected: ServerError },
}

/// Incremental RESP2 request parser; one per connection.
#[derive(Debug)]
pub struct Parser {
    limits: Limits,
    state: State,
}

fn find_crlf(buf: &[u8], limit: usize) -> Option<usize> {
    buf.iter().take(limit + 1).position(|b| *b == b'\n').filter(|&i| i > 0 && buf[i - 1] == b'\r').map(|i| i - 1)
}

fn parse_len(digits: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(digits).ok()?;
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    s.parse::<i64>().ok()
}

impl Parser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> Parser {
        Parser { limits, state: State::Start }
    }

    /// Parses the next request from the front of `buf`, consuming its bytes.
    /// `Ok(None)`: more bytes are needed (whatever was consumed is remembered). An
    /// error is a [`ServerError::Protocol`]: the stream cannot be resynchronized.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Parsed>, ServerError> {
        loop {
            match std::mem::replace(&mut self.state, State::Start) {
                State::Start => {
                    let Some(&first) = buf.first() else { return Ok(None) };
                    if first == b'*' {
                        let Some(end) = self.header_end(buf, "multibulk")? else { return Ok(None) };
                        let n = parse_len(&buf[1..end]).ok_or_else(|| protocol("invalid multibulk length"))?;
                        buf.advance(end + 2);
                        if n <= 0 {
                            continue; // `*0` and `*-1` carry no command (Redis ignores them)
                        }
                        if n as u64 > self.limits.max_args as u64 {
                            return Err(protocol(format!("{n} arguments exceed the limit of {}", self.limits.max_args)));
                        }
                        let n = n as usize;
                        self.state = State::Array { left: n, args: Vec::with_capacity(n.min(64)), bytes: 0, rejected: None };
                    } else {
                        return self.inline(buf);
                    }
                }
                State::Array { left: 0, args, rejected, .. } => {
                    return Ok(Some(match rejected {
                        Some(m) => Parsed::Rejected(m),
                        None => Parsed::Request(args),
                    }));
                }
                State::Array { left, mut args, bytes, rejected } => {
                    let Some(&first) = buf.first() else {
                        self.state = State::Array { left, args, bytes, rejected };
                        return Ok(None);
                    };
                    if first != b'$' {
                        let c = char::from(first).escape_default().to_string();
                        return Err(protocol(format!("expected '$', got '{c}'")));
                    }
                    let Some(end) = self.header_end(buf, "bulk")? else {
                        self.state = State::Array { left, args, bytes, rejected };
                        return Ok(None);
                    };
                    let n = parse_len(&buf[1..end]).filter(|n| *n >= 0).ok_or_else(|| protocol("invalid bulk length"))? as u64;
                    let over_request = bytes as u64 + n > self.limits.max_request as u64;
                    if n > self.limits.max_bulk as u64 || over_request {
                        buf.advance(end + 2);
                        let msg = if over_request {
                            ServerError::RequestTooLarge { limit: self.limits.max_request }
                        } else {
                            ServerError::BulkTooLong { len: n, limit: self.limits.max_bulk }
                        };
                        self.state = State::Skip {
                            bytes: (n + 2).try_into().unwrap_or(usize::MAX),
                            left: left - 1,
                            rejected: rejected.unwrap_or(msg),
                        };
                        continue;
                    }
                    let n = n as usize;
                    if buf.len() < end + 2 + n + 2 {
                        buf.reserve(end + 2 + n + 2 - buf.len());
                        self.state = State::Array { left, args, bytes, rejected };
                        return Ok(None);
                    }
                    if &buf[end + 2 + n..end + 2 + n + 2] != b"\r\n" {
                        return Err(protocol("bulk string not terminated by CRLF"));
                    }
                    if rejected.is_none() {
                        // (copied from the buffer, not split off it: a split makes the buffer shared, an allocation)
                        args.push(buf[end + 2..end + 2 + n].to_vec());
                    }
                    buf.advance(end + 2 + n + 2);
                    self.state = State::Array { left: left - 1, args, bytes: bytes + n, rejected };
                }
                State::Skip { bytes, left, rejected } => {
                    let take = bytes.min(buf.len());
                    buf.advance(take);
                    if take < bytes {
                        self.state = State::Skip { bytes: bytes - take, left, rejected };
                        return Ok(None);
                    }
                    self.state = State::Array { left, args: Vec::new(), bytes: 0, rejected: Some(rejected) };
                }
            }
        }
    }

    /// Index of the CRLF ending the header at the front of `buf`; `None` if it has
    /// not arrived yet; an error if the header is longer than any valid one.
    fn header_end(&self, buf: &BytesMut, what: &str) -> Result<Option<usize>, ServerError> {
        // a length is at most 20 characters; allow the inline bound before giving up
        let limit = self.limits.max_inline.min(64);
        match find_crlf(buf, limit) {
            Some(e) => Ok(Some(e)),
            None if buf.len() > limit || buf.iter().take(limit).any(|b| *b == b'\n') => Err(protocol(format!("invalid {what} length"))),
            None => Ok(None),
        }
    }

    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Parsed>, ServerError> {
        let Some(nl) = buf.iter().take(self.limits.max_inline + 1).position(|b| *b == b'\n') else {
            if buf.len() > self.limits.max_inline {
                return Err(protocol("too big inline request"));
            }
            return Ok(None);
        };
        let line = buf.split_to(nl + 1);
        let args: Vec<Vec<u8>> = line[..nl].split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()).map(<[u8]>::to_vec).collect();
        if args.is_empty() {
            return self.next(buf); // an empty line is no command
        }
        Ok(Some(Parsed::Request(args)))
    }
}

/// A reply, encoded by [`Reply::encode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`-style status.
    Simple(String),
    /// `-ERR ...`; the text must not hold CR or LF (encode replaces them).
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n payload`
    Bulk(Vec<u8>),
    /// `$-1`, the absent value.
    Nil,
    /// `*n` followed by the elements.
    Array(Vec<Reply>),
    /// Replies already in wire form, one or more back to back: a batch's GETs, each encoded
    /// by [`encode_bulk`] straight from the engine's value ([`crate::command::get_into`]), so
    /// the value is copied once, where [`Reply::Bulk`] copies it into the reply and then into
    /// the output. Never decoded: [`Reply::decode`] gives the replies themselves.
    Encoded(Vec<u8>),
}

/// Appends the wire form of a bulk string (`None`: the nil reply), byte for byte what
/// [`Reply::Bulk`] and [`Reply::Nil`] encode to.
pub fn encode_bulk(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(b) => {
            out.reserve(b.len() + 24);
            out.push(b'$');
            out.extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        None => out.extend_from_slice(b"$-1\r\n"),
    }
}

impl Reply {
    /// `+OK`
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// An error reply with the `ERR` prefix.
    pub fn err(msg: impl AsRef<str>) -> Reply {
        Reply::Error(format!("ERR {}", msg.as_ref()))
    }

    /// The error reply for `e`: `ERR` and its message.
    pub fn error(e: &ServerError) -> Reply {
        Reply::err(e.to_string())
    }

    /// Bytes [`Reply::encode`] appends: what the reply holds in a connection's output
    /// buffer ([`crate::output`]).
    pub fn encoded_len(&self) -> usize {
        // `<prefix><decimal>\r\n`
        fn header(n: usize) -> usize {
            1 + decimal_len(n as u64) + 2
        }
        match self {
            Reply::Simple(s) | Reply::Error(s) => 1 + s.len() + 2,
            Reply::Int(n) => 1 + usize::from(*n < 0) + decimal_len(n.unsigned_abs()) + 2,
            Reply::Bulk(b) => header(b.len()) + b.len() + 2,
            Reply::Nil => 5,
            Reply::Array(items) => header(items.len()) + items.iter().map(Reply::encoded_len).sum::<usize>(),
            Reply::Encoded(bytes) => bytes.len(),
        }
    }

    /// Appends the wire form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let line = |out: &mut Vec<u8>, prefix: u8, s: &str| {
            out.push(prefix);
            out.extend(s.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
            out.extend_from_slice(b"\r\n");
        };
        // `<prefix><n>\r\n` without a String for the digits
        let count = |out: &mut Vec<u8>, prefix: u8, n: usize| {
            out.push(prefix);
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        };
        match self {
            Reply::Simple(s) => line(out, b'+', s),
            Reply::Error(s) => line(out, b'-', s),
            Reply::Int(n) => line(out, b':', itoa::Buffer::new().format(*n)),
            Reply::Bulk(b) => encode_bulk(out, Some(b)),
            Reply::Nil => encode_bulk(out, None),
            Reply::Array(items) => {
                count(out, b'*', items.len());
                for i in items {
                    i.encode(out);
                }
            }
            Reply::Encoded(bytes) => out.extend_from_slice(bytes),
        }
    }

    /// Parses one reply from the front of `buf` (the client side); `Ok(None)` when
    /// incomplete. Consumes the reply's bytes on success.
    pub fn decode(buf: &mut BytesMut) -> Result<Option<Reply>, ServerError> {
        let mut pos = 0usize;
        match decode_at(buf, &mut pos)? {
            Some(r) => {
                buf.advance(pos);
                Ok(Some(r))
            }
            None => Ok(None),
        }
    }
}

fn decimal_len(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

fn decode_at(buf: &[u8], pos: &mut usize) -> Result<Option<Reply>, ServerError> {
    let rest = &buf[*pos..];
    let Some(nl) = rest.iter().position(|b| *b == b'\n') else { return Ok(None) };
    if nl == 0 || rest[nl - 1] != b'\r' {
        return Err(ServerError::BadReply("reply line not terminated by CRLF".into()));
    }
    let text = String::from_utf8_lossy(&rest[1..nl - 1]).to_string();
    let bad = || ServerError::BadReply(format!("bad reply header {text:?}"));
    let kind = rest[0];
    *pos += nl + 1;
    Ok(Some(match kind {
        b'+' => Reply::Simple(text),
        b'-' => Reply::Error(text),
        b':' => Reply::Int(text.parse().map_err(|_| bad())?),
        b'$' => {
            let n: i64 = text.parse().map_err(|_| bad())?;
            if n < 0 {
                return Ok(Some(Reply::Nil));
            }
            let n = n as usize;
            if buf.len() < *pos + n + 2 {
                return Ok(None);
            }
            let v = buf[*pos..*pos + n].to_vec();
            *pos += n + 2;
            Reply::Bulk(v)
        }
        b'*' => {
            let n: i64 = text.parse().map_err(|_| bad())?;
            if n < 0 {
                return Ok(Some(Reply::Nil));
            }
            let mut items = Vec::with_capacity((n as usize).min(1024));
            for _ in 0..n {
                match decode_at(buf, pos)? {
                    Some(r) => items.push(r),
                    None => return Ok(None),
                }
            }
            Reply::Array(items)
        }
        _ => return Err(bad()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(p: &mut Parser, bytes: &[u8]) -> (Vec<Parsed>, Option<ServerError>) {
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        loop {
            match p.next(&mut buf) {
                Ok(Some(x)) => out.push(x),
                Ok(None) => return (out, None),
                Err(f) => return (out, Some(f)),
            }
        }
    }

    fn req(args: &[&str]) -> Parsed {
        Parsed::Request(args.iter().map(|a| a.as_bytes().to_vec()).collect())
    }

    #[test]
    fn arrays_inline_and_pipelines() {
        let mut p = Parser::new(Limits::default());
        let (out, f) = parse_all(&mut p, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\n*3\r\n$3\r\nSET\r\n$0\r\n\r\n$2\r\nv\n\r\n");
        assert!(f.is_none(), "{f:?}");
        assert_eq!(out, vec![req(&["GET", "k"]), req(&["PING"]), req(&["SET", "", "v\n"])]);
    }

    #[test]
    fn split_at_every_byte() {
        let wire = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nworld\r\n*1\r\n$4\r\nPING\r\n";
        for cut in 0..wire.len() {
            let mut p = Parser::new(Limits::default());
            let mut buf = BytesMut::from(&wire[..cut]);
            let mut out = Vec::new();
            while let Some(x) = p.next(&mut buf).expect("valid") {
                out.push(x);
            }
            buf.extend_from_slice(&wire[cut..]);
            while let Some(x) = p.next(&mut buf).expect("valid") {
                out.push(x);
            }
            assert_eq!(out, vec![req(&["SET", "hello", "world"]), req(&["PING"])], "cut at {cut}");
        }
    }

    #[test]
    fn oversized_bulk_is_skipped_and_the_stream_stays_in_step() {
        let mut p = Parser::new(Limits { max_bulk: 4, ..Limits::default() });
        let (out, f) = parse_all(&mut p, b"*3\r\n$3\r\nSET\r\n$10\r\n0123456789\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n");
        assert!(f.is_none(), "{f:?}");
        assert!(matches!(&out[0], Parsed::Rejected(m) if m.to_string().contains("10 bytes")), "{out:?}");
        assert_eq!(out[1], req(&["PING"]));
    }

    #[test]
    fn a_request_over_the_total_limit_is_refused_in_step() {
        let mut p = Parser::new(Limits { max_bulk: 8, max_request: 10, ..Limits::default() });
        let (out, f) = parse_all(&mut p, b"*3\r\n$4\r\nMSET\r\n$5\r\nabcde\r\n$5\r\nfghij\r\nPING\r\n");
        assert!(f.is_none(), "{f:?}");
        assert!(matches!(&out[0], Parsed::Rejected(m) if m.to_string().contains("request exceeds")), "{out:?}");
        assert_eq!(out[1], req(&["PING"]));
    }

    #[test]
    fn unrecoverable_input_is_fatal() {
        for bad in [&b"*x\r\n"[..], b"*1\r\n+OK\r\n", b"*1\r\n$-5\r\n", b"*1\r\n$2\r\nabcd\r\n", b"*99999999999\r\n"] {
            let mut p = Parser::new(Limits::default());
            assert!(parse_all(&mut p, bad).1.is_some(), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut p = Parser::new(Limits { max_inline: 8, ..Limits::default() });
        assert!(parse_all(&mut p, b"PINGPINGPINGPING").1.is_some());
    }

    #[test]
    fn replies_roundtrip() {
        let r = Reply::Array(vec![
            Reply::ok(),
            Reply::err("bad\r\nthing"),
            Reply::Int(-3),
            Reply::Bulk(b"a\r\nb".to_vec()),
            Reply::Nil,
            Reply::Array(vec![]),
        ]);
        let mut out = Vec::new();
        r.encode(&mut out);
        let mut buf = BytesMut::from(&out[..]);
        let back = Reply::decode(&mut buf).expect("valid").expect("complete");
        assert!(buf.is_empty());
        match back {
            Reply::Array(items) => {
                assert_eq!(items[1], Reply::Error("ERR bad  thing".into()));
                assert_eq!(items[3], Reply::Bulk(b"a\r\nb".to_vec()));
            }
            other => panic!("{other:?}"),
        }
        let mut part = BytesMut::from(&out[..out.len() - 3]);
        assert_eq!(Reply::decode(&mut part).expect("valid"), None);
    }

    #[test]
    fn encode_bulk_writes_what_bulk_and_nil_encode() {
        for v in [None, Some(&b""[..]), Some(b"v"), Some(b"a\r\nb"), Some(&[7u8; 1024][..])] {
            let (mut direct, mut reply) = (Vec::new(), Vec::new());
            encode_bulk(&mut direct, v);
            v.map_or(Reply::Nil, |b| Reply::Bulk(b.to_vec())).encode(&mut reply);
            assert_eq!(direct, reply);
        }
        let mut out = Vec::new();
        encode_bulk(&mut out, Some(b"hello"));
        encode_bulk(&mut out, None);
        assert_eq!(out, b"$5\r\nhello\r\n$-1\r\n");
    }

    #[test]
    fn encoded_len_is_what_encode_writes() {
        let mut replies = vec![Reply::ok(), Reply::err("x\ny"), Reply::Nil, Reply::Bulk(Vec::new()), Reply::Array(Vec::new())];
        for n in [0i64, 9, 10, -1, -10, 99_999, i64::MAX, i64::MIN] {
            replies.push(Reply::Int(n));
        }
        for len in [1usize, 9, 10, 99, 100, 1 << 20] {
            replies.push(Reply::Bulk(vec![b'v'; len]));
        }
        replies.push(Reply::Array(replies.clone()));
        replies.push(Reply::Encoded(b"$1\r\nv\r\n$-1\r\n".to_vec()));
        for r in replies {
            let mut out = Vec::new();
            r.encode(&mut out);
            assert_eq!(r.encoded_len(), out.len(), "{:?}", String::from_utf8_lossy(&out[..out.len().min(40)]));
        }
    }
}
