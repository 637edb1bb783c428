//! The WAL record format: `[len u32][crc32 u32][payload]`, payload `kind u8, key, value`
//! (lengths little-endian, `key` and `value` each as a u32 length and the bytes).

use cosine_core::{crc32, Decoder, Encoder, Value};

const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
/// Bytes of a record header (length and checksum).
pub const HEADER: usize = 8;

/// Bytes of the encoded record of `key` and `value`.
pub fn encoded_len(key: &[u8], value: Option<&[u8]>) -> usize {
    HEADER + 1 + 4 + key.len() + value.map_or(0, |v| 4 + v.len())
}

/// Appends one encoded record (header + payload) to `out`.
pub fn encode_into(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    let mut p = Encoder::with_capacity(encoded_len(key, value) - HEADER);
    p.u8(if value.is_some() { KIND_PUT } else { KIND_DELETE });
    p.len_bytes(key);
    if let Some(v) = value {
        p.len_bytes(v);
    }
    let payload = p.finish();
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// Encodes one record (header + payload).
pub fn encode_record(key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, key, value);
    out
}

/// A record decoded from a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Normalized key.
    pub key: Vec<u8>,
    /// `Some` for a put, `None` for a delete.
    pub value: Value,
}

/// Decodes a payload; `None` unless it is exactly one well-formed record.
pub fn decode_payload(payload: &[u8]) -> Option<Record> {
    let mut d = Decoder::new(payload, "WAL record");
    let kind = d.u8().ok()?;
    let key = d.len_bytes().ok()?.to_vec();
    let value = match kind {
        KIND_PUT => Some(d.len_bytes().ok()?.to_vec()),
        KIND_DELETE => None,
        _ => return None,
    };
    (d.remaining() == 0).then_some(Record { key, value })
}

/// Reads the header at `pos`: (payload length, stored checksum).
pub fn header_at(data: &[u8], pos: usize) -> Option<(usize, u32)> {
    let h = data.get(pos..pos + HEADER)?;
    Some((u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize, u32::from_le_bytes([h[4], h[5], h[6], h[7]])))
}

/// The intact record starting at `pos` and the offset just after it, if there is one:
/// its length fits the data, its checksum matches and its payload decodes.
pub fn intact_at(data: &[u8], pos: usize) -> Option<(Record, usize)> {
    let (len, crc) = header_at(data, pos)?;
    let end = (pos + HEADER).checked_add(len)?;
    let payload = data.get(pos + HEADER..end)?;
    if len == 0 || crc32(payload) != crc {
        return None;
    }
    decode_payload(payload).map(|r| (r, end))
}
