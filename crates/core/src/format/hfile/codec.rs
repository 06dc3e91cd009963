//! The small encodings an HFile is made of: CRC32C block checksums, the GZ block compression of
//! Hadoop's `GzipCodec` (one gzip member per block), Hadoop `WritableUtils` variable-length
//! integers (root index key lengths, the MVCC timestamp of a cell) and protobuf varints (trailer,
//! file info).

use super::HFileError;

/// A 256-entry table for a reflected CRC-32 with polynomial `poly`.
const fn crc_table(poly: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ poly } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// CRC-32C (Castagnoli): HBase's default block checksum (checksum type 2).
static CRC32C_TABLE: [u32; 256] = crc_table(0x82F6_3B78);
/// CRC-32 (IEEE): the gzip member trailer, and HBase's checksum type 1.
static CRC32_TABLE: [u32; 256] = crc_table(0xEDB8_8320);

fn crc(table: &[u32; 256], bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c = table[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// CRC-32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc(&CRC32C_TABLE, bytes)
}

/// CRC-32 (IEEE, as zlib and gzip) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc(&CRC32_TABLE, bytes)
}

/// The 10-byte gzip member header HBase's GZ codec writes: no name, no time, OS 255 (unknown).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// The deflate level of Java's `Deflater.DEFAULT_COMPRESSION`.
const DEFLATE_LEVEL: u8 = 6;

/// One gzip member holding `data`, laid out as HBase's GZ codec lays it out (the deflate stream
/// itself differs from zlib's: readers only inflate it).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let deflated = miniz_oxide::deflate::compress_to_vec(data, DEFLATE_LEVEL);
    let mut out = Vec::with_capacity(GZIP_HEADER.len() + deflated.len() + 8);
    out.extend_from_slice(&GZIP_HEADER);
    out.extend_from_slice(&deflated);
    out.extend_from_slice(&crc32(data).to_le_bytes());
    // ISIZE is the length modulo 2^32 (RFC 1952).
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// Inflate one gzip member that must hold exactly `expected_len` bytes (the block header's
/// uncompressed size, so the output is never larger than what the caller already capped).
pub fn gunzip(member: &[u8], expected_len: usize, offset: u64) -> Result<Vec<u8>, HFileError> {
    let corrupt = |reason: String| HFileError::Corrupt { offset, reason };
    if member.len() < 18 || member[0] != 0x1f || member[1] != 0x8b || member[2] != 8 {
        return Err(corrupt("block data is not a gzip member".into()));
    }
    let flags = member[3];
    let mut at = 10usize;
    let truncated = || corrupt("gzip header truncated".into());
    if flags & 0x04 != 0 {
        // FEXTRA: a 2-byte little-endian length, then that many bytes.
        let xlen = member.get(at..at + 2).ok_or_else(truncated)?;
        at += 2 + usize::from(u16::from_le_bytes([xlen[0], xlen[1]]));
    }
    for flag in [0x08u8, 0x10] {
        // FNAME, FCOMMENT: zero-terminated.
        if flags & flag != 0 {
            let rest = member.get(at..).ok_or_else(truncated)?;
            let nul = rest.iter().position(|&b| b == 0).ok_or_else(truncated)?;
            at += nul + 1;
        }
    }
    if flags & 0x02 != 0 {
        at += 2; // FHCRC
    }
    let body_end = member.len() - 8;
    let body = member.get(at..body_end).ok_or_else(truncated)?;
    let data =
        miniz_oxide::inflate::decompress_to_vec_with_limit(body, expected_len).map_err(|e| {
            corrupt(format!(
                "gzip data does not inflate to {expected_len} bytes: {e}"
            ))
        })?;
    let tail = &member[body_end..];
    let want_crc = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let want_len = u32::from_le_bytes([tail[4], tail[5], tail[6], tail[7]]);
    if data.len() != expected_len || want_len != expected_len as u32 {
        return Err(corrupt(format!(
            "block inflates to {} bytes, its header says {expected_len}",
            data.len()
        )));
    }
    if crc32(&data) != want_crc {
        return Err(corrupt("gzip CRC-32 mismatch".into()));
    }
    Ok(data)
}

/// Append Hadoop `WritableUtils.writeVLong(v)`: one byte for -112..=127, else a length byte
/// followed by the big-endian magnitude (one's complement for negatives).
pub fn put_hadoop_vlong(out: &mut Vec<u8>, v: i64) {
    if (-112..=127).contains(&v) {
        out.push(v as u8);
        return;
    }
    let (magnitude, base) = if v < 0 { (!v, -120i32) } else { (v, -112i32) };
    let len = (8 - magnitude.leading_zeros() / 8) as i32;
    out.push((base - len) as u8);
    out.extend_from_slice(&magnitude.to_be_bytes()[(8 - len as usize)..]);
}

/// Read a Hadoop `WritableUtils` VLong at `*at`, advancing it. `None` if truncated.
pub fn get_hadoop_vlong(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let first = *bytes.get(*at)? as i8;
    *at += 1;
    if first >= -112 {
        return Some(i64::from(first));
    }
    let negative = first < -120;
    let len = if negative {
        -(i32::from(first) + 120)
    } else {
        -(i32::from(first) + 112)
    } as usize;
    let raw = bytes.get(*at..*at + len)?;
    *at += len;
    let v = raw.iter().fold(0i64, |acc, &b| (acc << 8) | i64::from(b));
    Some(if negative { !v } else { v })
}

/// Append a protobuf base-128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Read a protobuf varint at `*at`, advancing it. `None` if truncated or longer than 10 bytes.
pub fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// A protobuf field value as this module uses them: varints and length-delimited bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtoValue<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// Append a varint field.
pub fn put_varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    put_varint(out, u64::from(field) << 3);
    put_varint(out, v);
}

/// Append a length-delimited field.
pub fn put_bytes_field(out: &mut Vec<u8>, field: u32, v: &[u8]) {
    put_varint(out, (u64::from(field) << 3) | 2);
    put_varint(out, v.len() as u64);
    out.extend_from_slice(v);
}

/// Split a protobuf message into `(field number, value)` pairs; `None` if malformed or using
/// wire types other than varint and length-delimited.
pub fn parse_proto(msg: &[u8]) -> Option<Vec<(u32, ProtoValue<'_>)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < msg.len() {
        let tag = get_varint(msg, &mut at)?;
        let field = u32::try_from(tag >> 3).ok()?;
        match tag & 7 {
            0 => out.push((field, ProtoValue::Varint(get_varint(msg, &mut at)?))),
            2 => {
                let len = usize::try_from(get_varint(msg, &mut at)?).ok()?;
                let end = at.checked_add(len)?;
                out.push((field, ProtoValue::Bytes(msg.get(at..end)?)));
                at = end;
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_the_published_check_values() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn hadoop_vlongs_use_the_writable_utils_layout() {
        let cases: [(i64, &[u8]); 6] = [
            (0, &[0]),
            (127, &[127]),
            (-112, &[0x90]),
            (128, &[0x8f, 0x80]),
            (300, &[0x8e, 0x01, 0x2c]),
            (-129, &[0x87, 0x80]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            put_hadoop_vlong(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            let mut at = 0;
            assert_eq!(get_hadoop_vlong(&out, &mut at), Some(v));
            assert_eq!(at, out.len());
        }
        for v in [i64::MIN, i64::MAX, -1, 1 << 40] {
            let mut out = Vec::new();
            put_hadoop_vlong(&mut out, v);
            assert_eq!(get_hadoop_vlong(&out, &mut 0), Some(v));
        }
        assert_eq!(get_hadoop_vlong(&[0x8e, 0x01], &mut 0), None);
    }

    #[test]
    fn gzip_members_round_trip_and_reject_damage() {
        let data = b"hello hello hello hello".repeat(100);
        let z = gzip(&data);
        assert_eq!(&z[..10], &GZIP_HEADER);
        assert_eq!(gunzip(&z, data.len(), 0).unwrap(), data);
        assert!(gunzip(&z, data.len() - 1, 0).is_err());
        let mut bad = z.clone();
        let n = bad.len();
        bad[n - 5] ^= 1; // the CRC
        assert!(gunzip(&bad, data.len(), 0).is_err());
        assert!(gunzip(&z[..12], data.len(), 0).is_err());
        assert_eq!(gunzip(&gzip(b""), 0, 0).unwrap(), b"");
    }

    #[test]
    fn varints_and_fields_round_trip() {
        let mut m = Vec::new();
        put_varint_field(&mut m, 1, 300);
        put_varint_field(&mut m, 9, u64::MAX);
        put_bytes_field(&mut m, 11, b"abc");
        let parsed = parse_proto(&m).unwrap();
        assert_eq!(
            parsed,
            vec![
                (1, ProtoValue::Varint(300)),
                (9, ProtoValue::Varint(u64::MAX)),
                (11, ProtoValue::Bytes(b"abc"))
            ]
        );
        assert!(parse_proto(&m[..m.len() - 1]).is_none());
    }
}
