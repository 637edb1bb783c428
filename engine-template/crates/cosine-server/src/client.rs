//! A small blocking RESP client: what the tests, the crash harness and the
//! `cosine-load` driver use to talk to a server.

use crate::resp::Reply;
use bytes::BytesMut;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The wire form of one request (an array of bulk strings).
pub fn encode_request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One connection to a server.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    buf: BytesMut,
}

impl Client {
    /// Connects, with `timeout` on every read and write.
    pub fn connect(addr: impl ToSocketAddrs, timeout: Duration) -> io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Client { stream, buf: BytesMut::with_capacity(16 << 10) })
    }

    /// Sends raw bytes (well-formed or not).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends one request without waiting for its reply (pipelining).
    pub fn send(&mut self, args: &[&[u8]]) -> io::Result<()> {
        self.send_raw(&encode_request(args))
    }

    /// Receives the next reply. `UnexpectedEof` if the server closed the connection.
    pub fn recv(&mut self) -> io::Result<Reply> {
        loop {
            match Reply::decode(&mut self.buf) {
                Ok(Some(r)) => return Ok(r),
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
            let mut chunk = [0u8; 16 << 10];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends one request and waits for its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        self.send(args)?;
        self.recv()
    }
}
