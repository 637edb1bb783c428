//! Little-endian encoding helpers and the checksum used on every persisted structure.

use crate::error::{Error, Result};

/// CRC-32 (IEEE) of `data`; guards every block, index, filter, manifest and WAL record.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// Appends fixed-width little-endian fields to a byte vector.
#[derive(Debug, Default)]
pub struct Encoder {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Encoder {
    /// An empty encoder with `cap` bytes reserved.
    pub fn with_capacity(cap: usize) -> Self {
        Encoder { buf: Vec::with_capacity(cap) }
    }
    /// Appends a byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Appends a u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Appends a u32 length followed by the bytes.
    pub fn len_bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.bytes(b);
    }
    /// Appends the CRC-32 of everything written so far.
    pub fn seal(&mut self) {
        let c = crc32(&self.buf);
        self.u32(c);
    }
    /// Consumes the encoder.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads fixed-width fields with bounds checks; running off the end is corruption.
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'a str,
}

impl<'a> Decoder<'a> {
    /// Decodes `buf`; `what` names the structure in error messages.
    pub fn new(buf: &'a [u8], what: &'a str) -> Self {
        Decoder { buf, pos: 0, what }
    }

    /// Verifies and strips a trailing CRC-32 written by [`Encoder::seal`].
    pub fn checked(buf: &'a [u8], what: &'a str) -> Result<Self> {
        if buf.len() < 4 {
            return Err(Error::corruption(format!("{what}: too short ({} bytes)", buf.len())));
        }
        let (body, tail) = buf.split_at(buf.len() - 4);
        let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        if crc32(body) != stored {
            return Err(Error::corruption(format!("{what}: checksum mismatch")));
        }
        Ok(Decoder { buf: body, pos: 0, what })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return Err(Error::corruption(format!("{}: truncated at byte {}", self.what, self.pos)));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    /// Reads a byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    /// Reads a u32.
    pub fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Reads a u64.
    pub fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        self.take(n)
    }
    /// Reads a u32 length and that many bytes.
    pub fn len_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Current offset in the (checksum-stripped) buffer.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Builds a corruption error mentioning this structure.
    pub fn error(&self, msg: &str) -> Error {
        Error::corruption(format!("{}: {msg}", self.what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_checksum() {
        let mut e = Encoder::default();
        e.u32(7);
        e.len_bytes(b"abc");
        e.u64(9);
        e.seal();
        let mut bytes = e.finish();
        let mut d = Decoder::checked(&bytes, "t").expect("valid");
        assert_eq!(d.u32().expect("u32"), 7);
        assert_eq!(d.len_bytes().expect("bytes"), b"abc");
        assert_eq!(d.u64().expect("u64"), 9);
        assert!(d.u8().is_err());
        bytes[2] ^= 1;
        assert!(Decoder::checked(&bytes, "t").is_err());
    }
}
