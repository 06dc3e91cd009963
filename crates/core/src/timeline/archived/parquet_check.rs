//! A bounds check of a parquet file before the `parquet` crate reads its rows.
//!
//! The crate sizes buffers from numbers in the file before it knows they are true: a page is
//! decompressed into a buffer of the page header's `uncompressed_page_size` (zero-filled for
//! snappy), a dictionary page's `num_values` entries are allocated up front, and a page header's
//! binary fields (statistics) are read into buffers of the length the header claims. A damaged
//! file of a few bytes could so take gigabytes. This walk reads the footer with the crate (its
//! footer parser checks list sizes against the bytes left), then every page header of every
//! column chunk itself, without allocating anything sized by the input, and refuses
//!
//! * a column chunk outside the file, or whose pages do not fill it exactly;
//! * a page header that runs past its chunk, or has a negative size;
//! * an uncompressed size more than the codec can expand its compressed bytes to (1:1
//!   uncompressed, 24:1 snappy, 1032:1 deflate), plus 64 KiB;
//! * a dictionary page of more values than its uncompressed bytes;
//! * more than [`MAX_UNCOMPRESSED`] bytes uncompressed in all;
//! * a codec other than these three (Hudi's LSM writer uses `hoodie.parquet.compression.codec`,
//!   gzip by default).

use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaDataReader;

/// The most bytes the pages of one file may decompress to.
pub(crate) const MAX_UNCOMPRESSED: u64 = 1 << 30;
const SLACK: u64 = 64 << 10;
/// The deepest thrift nesting accepted.
const MAX_DEPTH: usize = 16;

/// Check `bytes` (a whole parquet file) as described in the module documentation.
pub(crate) fn check(bytes: &bytes::Bytes) -> Result<(), String> {
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(bytes)
        .map_err(|e| format!("parquet footer: {e}"))?;
    let mut total = 0u64;
    for (g, rg) in meta.row_groups().iter().enumerate() {
        for (c, col) in rg.columns().iter().enumerate() {
            let ratio = match col.compression() {
                Compression::UNCOMPRESSED => 1,
                Compression::SNAPPY => 24,
                Compression::GZIP(_) => 1032,
                other => return Err(format!("codec {other} is not supported")),
            };
            let (start, len) = col.byte_range();
            let end = start
                .checked_add(len)
                .filter(|e| *e <= bytes.len() as u64)
                .ok_or_else(|| format!("row group {g} column {c}: chunk outside the file"))?;
            let chunk = &bytes[start as usize..end as usize];
            let mut at = 0usize;
            while at < chunk.len() {
                let page = read_page_header(&chunk[at..])
                    .map_err(|e| format!("row group {g} column {c}: page header: {e}"))?;
                let body = page.compressed as u64;
                let next = (at + page.header_len) as u64 + body;
                if next > chunk.len() as u64 {
                    return Err(format!(
                        "row group {g} column {c}: page runs past its chunk"
                    ));
                }
                if page.uncompressed as u64 > body * ratio + SLACK {
                    return Err(format!(
                        "row group {g} column {c}: page claims {} bytes from {body}",
                        page.uncompressed
                    ));
                }
                if page.dict_values > page.uncompressed as i64 {
                    return Err(format!(
                        "row group {g} column {c}: dictionary of {} values in {} bytes",
                        page.dict_values, page.uncompressed
                    ));
                }
                total += page.uncompressed as u64;
                if total > MAX_UNCOMPRESSED {
                    return Err(format!("more than {MAX_UNCOMPRESSED} bytes uncompressed"));
                }
                at = next as usize;
            }
        }
    }
    Ok(())
}

/// What the walk needs of a `PageHeader`.
#[derive(Debug, Default)]
pub(super) struct PageHeader {
    pub(super) header_len: usize,
    pub(super) uncompressed: i32,
    pub(super) compressed: i32,
    pub(super) dict_values: i64,
}

/// Parse the thrift compact `PageHeader` at the start of `b`.
pub(super) fn read_page_header(b: &[u8]) -> Result<PageHeader, String> {
    let mut t = Thrift { b, at: 0 };
    let mut h = PageHeader::default();
    let (mut have_u, mut have_c) = (false, false);
    let mut last = 0i16;
    while let Some((id, ty)) = t.field_header(&mut last)? {
        match (id, ty) {
            (2, T_I32) => {
                h.uncompressed = t.i32()?;
                have_u = true;
            }
            (3, T_I32) => {
                h.compressed = t.i32()?;
                have_c = true;
            }
            (7, T_STRUCT) => {
                // DictionaryPageHeader: 1 num_values (i32), 2 encoding, 3 is_sorted
                let mut last = 0i16;
                while let Some((id, ty)) = t.field_header(&mut last)? {
                    if (id, ty) == (1, T_I32) {
                        h.dict_values = i64::from(t.i32()?);
                    } else {
                        t.skip(ty, 1)?;
                    }
                }
            }
            _ => t.skip(ty, 0)?,
        }
    }
    if !have_u || !have_c || h.uncompressed < 0 || h.compressed < 0 || h.dict_values < 0 {
        return Err("sizes missing or negative".into());
    }
    h.header_len = t.at;
    Ok(h)
}

const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;

/// A thrift compact-protocol cursor that allocates nothing.
struct Thrift<'a> {
    b: &'a [u8],
    at: usize,
}

impl Thrift<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let v = *self.b.get(self.at).ok_or("truncated")?;
        self.at += 1;
        Ok(v)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn zigzag(&mut self) -> Result<i64, String> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn i32(&mut self) -> Result<i32, String> {
        i32::try_from(self.zigzag()?).map_err(|_| "i32 out of range".to_string())
    }

    /// `n` bytes, which must be there.
    fn advance(&mut self, n: u64) -> Result<(), String> {
        let left = (self.b.len() - self.at) as u64;
        if n > left {
            return Err(format!("length {n} runs past the end"));
        }
        self.at += n as usize;
        Ok(())
    }

    /// The next field's id and type, or `None` at the struct's end.
    fn field_header(&mut self, last: &mut i16) -> Result<Option<(i16, u8)>, String> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let ty = b & 0x0f;
        let delta = (b >> 4) as i16;
        let id = if delta != 0 {
            last.checked_add(delta).ok_or("field id overflow")?
        } else {
            i16::try_from(self.zigzag()?).map_err(|_| "field id out of range")?
        };
        *last = id;
        Ok(Some((id, ty)))
    }

    /// A count of items, each taking at least one byte: no more than the bytes left.
    fn count(&mut self, n: u64) -> Result<u64, String> {
        if n > (self.b.len() - self.at) as u64 {
            return Err(format!("{n} items in fewer bytes"));
        }
        Ok(n)
    }

    /// Skip a value of type `ty` (as a field: booleans carry their value in the type).
    fn skip(&mut self, ty: u8, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("nested too deep".into());
        }
        match ty {
            T_TRUE | T_FALSE => Ok(()),
            T_BYTE => self.advance(1),
            T_I16 | T_I32 | T_I64 => self.varint().map(|_| ()),
            T_DOUBLE => self.advance(8),
            T_BINARY => {
                let n = self.varint()?;
                self.advance(n)
            }
            T_LIST | T_SET => {
                let h = self.byte()?;
                let elem = h & 0x0f;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                for _ in 0..self.count(n)? {
                    self.skip_elem(elem, depth + 1)?;
                }
                Ok(())
            }
            T_MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                for _ in 0..self.count(n)? {
                    self.skip_elem(kv >> 4, depth + 1)?;
                    self.skip_elem(kv & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            T_STRUCT => {
                let mut last = 0i16;
                while let Some((_, ty)) = self.field_header(&mut last)? {
                    self.skip(ty, depth + 1)?;
                }
                Ok(())
            }
            other => Err(format!("unknown thrift type {other}")),
        }
    }

    /// Skip a list, set or map element (booleans take a byte there).
    fn skip_elem(&mut self, ty: u8, depth: usize) -> Result<(), String> {
        match ty {
            T_TRUE | T_FALSE => self.advance(1),
            ty => self.skip(ty, depth),
        }
    }
}
