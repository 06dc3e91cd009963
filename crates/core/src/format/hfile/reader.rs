//! A reader of HFile v3 files with a single-level root index: enough to check what the writer
//! makes and to parse the HFiles Hudi writes (metadata-table log blocks and base files).

use std::collections::BTreeMap;

use super::codec::{crc32, crc32c, get_hadoop_vlong, get_varint, gunzip, parse_proto, ProtoValue};
use super::*;

/// The fields of the trailer's `TrailerProto` (field numbers 1-12).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trailer {
    /// 1: offset of the file-info block.
    pub file_info_offset: u64,
    /// 2: offset of the load-on-open section (the root data index).
    pub load_on_open_offset: u64,
    /// 3: uncompressed size of the data index blocks, headers excluded.
    pub uncompressed_data_index_size: u64,
    /// 4: uncompressed bytes of all blocks (with headers, root index excluded) plus the trailer.
    pub total_uncompressed_bytes: u64,
    /// 5: entries in the root data index.
    pub data_index_count: u64,
    /// 6: entries in the meta index.
    pub meta_index_count: u64,
    /// 7: cells in the file.
    pub entry_count: u64,
    /// 8: levels of the data index.
    pub num_data_index_levels: u64,
    /// 9: offset of the first data block (`u64::MAX` = -1 when there is none).
    pub first_data_block_offset: u64,
    /// 10: offset of the last data block.
    pub last_data_block_offset: u64,
    /// 11: the comparator class.
    pub comparator_class_name: String,
    /// 12: the compression codec ordinal (1 GZ, 2 NONE).
    pub compression_codec: u64,
    /// The version word (last 4 bytes): major in the low 3 bytes, minor in the high byte.
    pub major_version: u32,
    /// See `major_version`.
    pub minor_version: u32,
}

/// One block as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Where it starts.
    pub offset: u64,
    /// Its 8-byte magic (`DATABLK*`, `IDXROOT2`, `FILEINF2`, ...).
    pub magic: [u8; 8],
    /// Header + compressed data + checksums.
    pub on_disk_size: usize,
    /// The header's `prevBlockOffset` (-1: none).
    pub prev_block_offset: i64,
    /// The header's checksum type (2 = CRC32C).
    pub checksum_type: u8,
    /// The header's bytes per checksum chunk.
    pub bytes_per_checksum: u32,
    /// The size of its data, decompressed.
    pub uncompressed_size: usize,
    /// The data, decompressed; empty for a data block (`DATABLK*`) in [`HFileContents::blocks`]:
    /// [`read`] drops it once its cells are parsed, so that a file costs its cells, not its
    /// cells twice.
    pub data: Vec<u8>,
}

/// One root data index entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the data block.
    pub offset: u64,
    /// Its on-disk size, header included.
    pub on_disk_size: u32,
    /// The full KeyValue key (row length, row, family length, ..., timestamp, type).
    pub key: Vec<u8>,
}

/// One KeyValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The row (Hudi's record key).
    pub row: Vec<u8>,
    /// The column family.
    pub family: Vec<u8>,
    /// The qualifier.
    pub qualifier: Vec<u8>,
    /// The timestamp.
    pub timestamp: i64,
    /// The type (4 = Put).
    pub kv_type: u8,
    /// The value (Hudi: an Avro binary record).
    pub value: Vec<u8>,
    /// The MVCC timestamp (0 when the file has none).
    pub mvcc: i64,
}

/// A parsed HFile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HFileContents {
    /// The trailer.
    pub trailer: Trailer,
    /// File info, in key order.
    pub file_info: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The root data index.
    pub root_index: Vec<IndexEntry>,
    /// Every block from the first data block to the file-info block, in file order (data
    /// blocks without their data: see [`Block::data`]).
    pub blocks: Vec<Block>,
    /// Every cell of the data blocks, in file order.
    pub cells: Vec<Cell>,
}

impl HFileContents {
    /// A file-info value.
    pub fn file_info(&self, key: &str) -> Option<&[u8]> {
        self.file_info.get(key.as_bytes()).map(Vec::as_slice)
    }
}

fn truncated(what: &'static str, offset: usize) -> HFileError {
    HFileError::Truncated {
        what,
        offset: offset as u64,
    }
}

fn corrupt(offset: usize, reason: impl Into<String>) -> HFileError {
    HFileError::Corrupt {
        offset: offset as u64,
        reason: reason.into(),
    }
}

fn be_i32(b: &[u8], at: usize, what: &'static str) -> Result<i32, HFileError> {
    let s = b.get(at..at + 4).ok_or_else(|| truncated(what, at))?;
    Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be_i64(b: &[u8], at: usize, what: &'static str) -> Result<i64, HFileError> {
    let s = b.get(at..at + 8).ok_or_else(|| truncated(what, at))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(i64::from_be_bytes(a))
}

fn to_usize(v: u64, offset: usize, what: &str) -> Result<usize, HFileError> {
    usize::try_from(v).map_err(|_| corrupt(offset, format!("{what} {v} out of range")))
}

fn read_trailer(bytes: &[u8]) -> Result<Trailer, HFileError> {
    if bytes.len() < TRAILER_SIZE {
        return Err(truncated("trailer", 0));
    }
    let start = bytes.len() - TRAILER_SIZE;
    let t = &bytes[start..];
    let version = u32::from_be_bytes([t[4092], t[4093], t[4094], t[4095]]);
    let (major, minor) = (version & 0x00ff_ffff, version >> 24);
    if major != 3 {
        return Err(HFileError::Unsupported(format!(
            "HFile major version {major} (only 3 is read)"
        )));
    }
    if &t[..8] != TRAILER_MAGIC {
        return Err(corrupt(start, "no trailer magic"));
    }
    let mut at = 8;
    let len = get_varint(t, &mut at).ok_or_else(|| truncated("trailer", start))?;
    let len = to_usize(len, start, "trailer length")?;
    let msg = t
        .get(at..at.saturating_add(len).min(TRAILER_SIZE - 4))
        .filter(|m| m.len() == len)
        .ok_or_else(|| truncated("trailer", start))?;
    let fields = parse_proto(msg).ok_or_else(|| corrupt(start, "malformed TrailerProto"))?;
    let mut tr = Trailer {
        major_version: major,
        minor_version: minor,
        first_data_block_offset: u64::MAX,
        ..Trailer::default()
    };
    for (field, value) in fields {
        match (field, value) {
            (1, ProtoValue::Varint(v)) => tr.file_info_offset = v,
            (2, ProtoValue::Varint(v)) => tr.load_on_open_offset = v,
            (3, ProtoValue::Varint(v)) => tr.uncompressed_data_index_size = v,
            (4, ProtoValue::Varint(v)) => tr.total_uncompressed_bytes = v,
            (5, ProtoValue::Varint(v)) => tr.data_index_count = v,
            (6, ProtoValue::Varint(v)) => tr.meta_index_count = v,
            (7, ProtoValue::Varint(v)) => tr.entry_count = v,
            (8, ProtoValue::Varint(v)) => tr.num_data_index_levels = v,
            (9, ProtoValue::Varint(v)) => tr.first_data_block_offset = v,
            (10, ProtoValue::Varint(v)) => tr.last_data_block_offset = v,
            (11, ProtoValue::Bytes(b)) => {
                tr.comparator_class_name = String::from_utf8_lossy(b).into_owned()
            }
            (12, ProtoValue::Varint(v)) => tr.compression_codec = v,
            (13, ProtoValue::Bytes(_)) => {
                return Err(HFileError::Unsupported("encrypted HFile".into()))
            }
            _ => return Err(corrupt(start, format!("unexpected trailer field {field}"))),
        }
    }
    Ok(tr)
}

/// What the reader may still decompress: one budget can be shared by several reads, so that a
/// caller reading many files caps their total (each block is charged its declared uncompressed
/// size before it is inflated, so nothing past the limit is ever allocated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecompressionBudget {
    limit: u64,
    used: u64,
}

impl DecompressionBudget {
    /// A budget of `limit` decompressed bytes.
    pub fn new(limit: u64) -> Self {
        DecompressionBudget { limit, used: 0 }
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes charged so far (never more than the limit).
    pub fn used(&self) -> u64 {
        self.used
    }

    fn charge(&mut self, size: usize) -> Result<(), HFileError> {
        let total = self.used.saturating_add(size as u64);
        if total > self.limit {
            return Err(HFileError::TooLarge {
                what: "decompressed data (all blocks read under one budget)",
                size: total,
                limit: self.limit,
            });
        }
        self.used = total;
        Ok(())
    }
}

pub(super) fn read_block(
    bytes: &[u8],
    offset: usize,
    codec: u64,
    budget: &mut DecompressionBudget,
) -> Result<Block, HFileError> {
    let header = bytes
        .get(offset..offset.saturating_add(BLOCK_HEADER_SIZE))
        .ok_or_else(|| truncated("block header", offset))?;
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&header[..8]);
    let on_disk_without_header = be_i32(header, 8, "block header")?;
    let uncompressed = be_i32(header, 12, "block header")?;
    let prev_block_offset = be_i64(header, 16, "block header")?;
    let checksum_type = header[24];
    let bytes_per_checksum = be_i32(header, 25, "block header")?;
    let data_with_header = be_i32(header, 29, "block header")?;
    let (Ok(on_disk_without_header), Ok(uncompressed), Ok(data_with_header), Ok(bpc)) = (
        usize::try_from(on_disk_without_header),
        usize::try_from(uncompressed),
        usize::try_from(data_with_header),
        usize::try_from(bytes_per_checksum),
    ) else {
        return Err(corrupt(offset, "negative size in block header"));
    };
    if uncompressed > MAX_BLOCK_SIZE {
        return Err(HFileError::TooLarge {
            what: "block",
            size: uncompressed as u64,
            limit: MAX_BLOCK_SIZE as u64,
        });
    }
    let on_disk = BLOCK_HEADER_SIZE + on_disk_without_header;
    let block = bytes
        .get(offset..offset.saturating_add(on_disk))
        .ok_or_else(|| truncated("block", offset))?;
    if data_with_header < BLOCK_HEADER_SIZE || data_with_header > on_disk {
        return Err(corrupt(offset, "onDiskDataSizeWithHeader out of range"));
    }
    let (checked, sums) = block.split_at(data_with_header);
    if checksum_type != 0 {
        if bpc == 0 {
            return Err(corrupt(offset, "bytesPerChecksum 0"));
        }
        let chunks = data_with_header.div_ceil(bpc);
        if sums.len() != 4 * chunks {
            return Err(corrupt(offset, "checksum area has the wrong size"));
        }
        for (i, (chunk, sum)) in checked.chunks(bpc).zip(sums.chunks(4)).enumerate() {
            let want = u32::from_be_bytes([sum[0], sum[1], sum[2], sum[3]]);
            let got = match checksum_type {
                1 => crc32(chunk),
                2 => crc32c(chunk),
                t => return Err(HFileError::Unsupported(format!("checksum type {t}"))),
            };
            if got != want {
                return Err(HFileError::Checksum {
                    offset: offset as u64,
                    chunk: i,
                });
            }
        }
    }
    let stored = &checked[BLOCK_HEADER_SIZE..];
    budget.charge(uncompressed)?;
    let data = match codec {
        CODEC_GZ => gunzip(stored, uncompressed, offset as u64)?,
        CODEC_NONE if stored.len() == uncompressed => stored.to_vec(),
        CODEC_NONE => return Err(corrupt(offset, "uncompressed block size mismatch")),
        c => return Err(HFileError::Unsupported(format!("compression codec {c}"))),
    };
    Ok(Block {
        offset: offset as u64,
        magic,
        on_disk_size: on_disk,
        prev_block_offset,
        checksum_type,
        bytes_per_checksum: bytes_per_checksum as u32,
        uncompressed_size: uncompressed,
        data,
    })
}

fn read_root_index(block: &Block, count: u64) -> Result<Vec<IndexEntry>, HFileError> {
    let d = &block.data;
    let offset = block.offset as usize;
    let mut out = Vec::with_capacity((count as usize).min(d.len() / 13 + 1));
    let mut at = 0usize;
    for _ in 0..count {
        let block_offset = be_i64(d, at, "root index entry")?;
        let on_disk_size = be_i32(d, at + 8, "root index entry")?;
        at += 12;
        let key_len =
            get_hadoop_vlong(d, &mut at).ok_or_else(|| truncated("root index key", offset))?;
        let key_len = usize::try_from(key_len)
            .map_err(|_| corrupt(offset, "negative root index key length"))?;
        let key = d
            .get(at..at.saturating_add(key_len))
            .ok_or_else(|| truncated("root index key", offset))?;
        at += key_len;
        out.push(IndexEntry {
            offset: u64::try_from(block_offset)
                .map_err(|_| corrupt(offset, "negative block offset in index"))?,
            on_disk_size: u32::try_from(on_disk_size)
                .map_err(|_| corrupt(offset, "negative block size in index"))?,
            key: key.to_vec(),
        });
    }
    Ok(out)
}

fn read_file_info(block: &Block) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, HFileError> {
    let offset = block.offset as usize;
    let d = &block.data;
    if d.get(..4) != Some(PBUF_MAGIC.as_slice()) {
        return Err(corrupt(offset, "file info does not start with PBUF"));
    }
    let mut at = 4;
    let len = get_varint(d, &mut at).ok_or_else(|| truncated("file info", offset))?;
    let len = to_usize(len, offset, "file info length")?;
    let msg = d
        .get(at..at.saturating_add(len))
        .ok_or_else(|| truncated("file info", offset))?;
    let bad = || corrupt(offset, "malformed InfoProto");
    let mut out = BTreeMap::new();
    for (field, value) in parse_proto(msg).ok_or_else(bad)? {
        let (1, ProtoValue::Bytes(pair)) = (field, value) else {
            return Err(bad());
        };
        let (mut k, mut v) = (None, None);
        for (f, val) in parse_proto(pair).ok_or_else(bad)? {
            match (f, val) {
                (1, ProtoValue::Bytes(b)) => k = Some(b),
                (2, ProtoValue::Bytes(b)) => v = Some(b),
                _ => return Err(bad()),
            }
        }
        out.insert(k.ok_or_else(bad)?.to_vec(), v.unwrap_or_default().to_vec());
    }
    Ok(out)
}

/// One KeyValue as a walk over the file sees it, borrowed from its inflated block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellRef<'a> {
    /// The row (Hudi's record key).
    pub row: &'a [u8],
    /// The column family.
    pub family: &'a [u8],
    /// The qualifier.
    pub qualifier: &'a [u8],
    /// The timestamp.
    pub timestamp: i64,
    /// The type (4 = Put).
    pub kv_type: u8,
    /// The value (Hudi: an Avro binary record).
    pub value: &'a [u8],
    /// The MVCC timestamp (0 when the file has none).
    pub mvcc: i64,
}

impl CellRef<'_> {
    /// The cell, owned.
    pub fn to_cell(&self) -> Cell {
        Cell {
            row: self.row.to_vec(),
            family: self.family.to_vec(),
            qualifier: self.qualifier.to_vec(),
            timestamp: self.timestamp,
            kv_type: self.kv_type,
            value: self.value.to_vec(),
            mvcc: self.mvcc,
        }
    }
}

#[cfg(test)]
pub(super) fn read_cells(
    block: &Block,
    mvcc: bool,
    tags: bool,
    out: &mut Vec<Cell>,
) -> Result<(), HFileError> {
    visit_cells(block, mvcc, tags, &mut |c: CellRef<'_>| {
        out.push(c.to_cell());
        Ok::<(), HFileError>(())
    })
}

/// Every cell of a data block, in order, to `visit`.
fn visit_cells<E: From<HFileError>>(
    block: &Block,
    mvcc: bool,
    tags: bool,
    visit: &mut impl FnMut(CellRef<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let d = &block.data;
    let offset = block.offset as usize;
    let t = |_| truncated("cell", offset);
    let mut at = 0usize;
    while at < d.len() {
        let key_len = be_i32(d, at, "cell")?;
        let value_len = be_i32(d, at + 4, "cell")?;
        let (Ok(key_len), Ok(value_len)) = (usize::try_from(key_len), usize::try_from(value_len))
        else {
            return Err(corrupt(offset, "negative cell length").into());
        };
        at += 8;
        let key = d.get(at..at.saturating_add(key_len)).ok_or_else(|| t(()))?;
        at += key_len;
        let value = d
            .get(at..at.saturating_add(value_len))
            .ok_or_else(|| t(()))?;
        at += value_len;
        if tags {
            let n = d.get(at..at + 2).ok_or_else(|| t(()))?;
            at += 2 + usize::from(u16::from_be_bytes([n[0], n[1]]));
        }
        let mvcc_ts = if mvcc {
            get_hadoop_vlong(d, &mut at).ok_or_else(|| t(()))?
        } else {
            0
        };
        // key: rowLen i16, row, famLen u8, family, qualifier, timestamp i64, type u8
        let row_len = key
            .get(..2)
            .map(|s| usize::from(u16::from_be_bytes([s[0], s[1]])))
            .ok_or_else(|| corrupt(offset, "cell key too short"))?;
        let row = key.get(2..2 + row_len);
        let fam_len = key.get(2 + row_len).map(|&b| usize::from(b));
        let (Some(row), Some(fam_len)) = (row, fam_len) else {
            return Err(corrupt(offset, "cell key too short").into());
        };
        let fam_start = 3 + row_len;
        let fixed_tail = 9;
        if key.len() < fam_start + fam_len + fixed_tail {
            return Err(corrupt(offset, "cell key too short").into());
        }
        let qual_end = key.len() - fixed_tail;
        visit(CellRef {
            row,
            family: &key[fam_start..fam_start + fam_len],
            qualifier: &key[fam_start + fam_len..qual_end],
            timestamp: be_i64(key, qual_end, "cell key")?,
            kv_type: key[key.len() - 1],
            value,
            mvcc: mvcc_ts,
        })?;
    }
    if at != d.len() {
        return Err(corrupt(offset, "cell runs past the end of its block").into());
    }
    Ok(())
}

/// Parse an HFile v3: trailer, load-on-open section (root index, meta index, file info), and
/// every cell, checking block checksums, the gzip CRCs and the trailer's cell count. Multi-level data indexes are walked
/// block by block (their index is not parsed). Decompresses at most
/// [`DEFAULT_MAX_DECOMPRESSED`] bytes: see [`read_with_budget`].
pub fn read(bytes: &[u8]) -> Result<HFileContents, HFileError> {
    read_with_budget(
        bytes,
        &mut DecompressionBudget::new(DEFAULT_MAX_DECOMPRESSED),
    )
}

/// [`read`], decompressing at most what is left of `budget` (else [`HFileError::TooLarge`],
/// raised before the block that would cross it is inflated). Every allocation is bounded by the
/// input's size, [`MAX_BLOCK_SIZE`] and the budget; the contents hold the cells and the non-data
/// blocks, not the data blocks' bytes.
pub fn read_with_budget(
    bytes: &[u8],
    budget: &mut DecompressionBudget,
) -> Result<HFileContents, HFileError> {
    let mut file = open(bytes, budget)?;
    let mut cells = Vec::new();
    let blocks = file.walk(budget, |c| {
        cells.push(c.to_cell());
        Ok::<(), HFileError>(())
    })?;
    Ok(HFileContents {
        trailer: file.trailer,
        file_info: file.file_info,
        root_index: file.root_index,
        blocks,
        cells,
    })
}

/// An HFile whose trailer, root index and file info are read, ready for a walk over its cells
/// ([`OpenHFile::walk`]): what a caller that must not hold every cell at once reads.
#[derive(Debug)]
pub struct OpenHFile<'a> {
    bytes: &'a [u8],
    /// The trailer.
    pub trailer: Trailer,
    /// File info, in key order.
    pub file_info: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The root data index.
    pub root_index: Vec<IndexEntry>,
    root: Option<Block>,
    info_block: Option<Block>,
    load_on_open: usize,
    info_offset: usize,
    end: usize,
    mvcc: bool,
    tags: bool,
}

/// Open an HFile v3 (see [`read`]): its trailer, load-on-open section and file info, charged to
/// `budget`.
pub fn open<'a>(
    bytes: &'a [u8],
    budget: &mut DecompressionBudget,
) -> Result<OpenHFile<'a>, HFileError> {
    let trailer = read_trailer(bytes)?;
    let end = bytes.len() - TRAILER_SIZE;
    let codec = trailer.compression_codec;
    let load_on_open = to_usize(trailer.load_on_open_offset, end, "load-on-open offset")?;
    if load_on_open > end {
        return Err(corrupt(end, "load-on-open offset past the trailer"));
    }
    let root = read_block(bytes, load_on_open, codec, budget)?;
    if &root.magic != ROOT_INDEX_MAGIC {
        return Err(corrupt(
            load_on_open,
            "load-on-open section is not a root index",
        ));
    }
    let root_index = if trailer.num_data_index_levels == 1 {
        read_root_index(&root, trailer.data_index_count)?
    } else {
        Vec::new()
    };
    let info_offset = to_usize(trailer.file_info_offset, end, "file info offset")?;
    let info_block = read_block(bytes, info_offset, codec, budget)?;
    if &info_block.magic != FILE_INFO_MAGIC {
        return Err(corrupt(
            info_offset,
            "no file-info block at the trailer's offset",
        ));
    }
    let file_info = read_file_info(&info_block)?;
    let mvcc = file_info
        .get(KEY_VALUE_VERSION.as_bytes())
        .is_some_and(|v| v.as_slice() == 1i32.to_be_bytes());
    let tags = file_info.contains_key(MAX_TAGS_LEN.as_bytes());
    Ok(OpenHFile {
        bytes,
        trailer,
        file_info,
        root_index,
        root: Some(root),
        info_block: Some(info_block),
        load_on_open,
        info_offset,
        end,
        mvcc,
        tags,
    })
}

impl OpenHFile<'_> {
    /// A file-info value.
    pub fn file_info(&self, key: &str) -> Option<&[u8]> {
        self.file_info.get(key.as_bytes()).map(Vec::as_slice)
    }

    /// Every cell, in file order, to `visit`, one data block inflated at a time (charged to
    /// `budget`); the blocks from the first data block to the file-info block, data blocks
    /// without their data. Checks the trailer's cell count. Once per file: a second walk finds
    /// no blocks.
    pub fn walk<E: From<HFileError>>(
        &mut self,
        budget: &mut DecompressionBudget,
        mut visit: impl FnMut(CellRef<'_>) -> Result<(), E>,
    ) -> Result<Vec<Block>, E> {
        let (bytes, codec) = (self.bytes, self.trailer.compression_codec);
        let Some(info_block) = self.info_block.take() else {
            return Err(corrupt(self.info_offset, "the file was walked already").into());
        };
        let mut blocks = Vec::new();
        let mut cells = 0u64;
        let mut counting = |c: CellRef<'_>| {
            cells += 1;
            visit(c)
        };
        let mut at = match self.trailer.first_data_block_offset {
            u64::MAX => self.load_on_open,
            o => to_usize(o, self.end, "first data block offset")?,
        };
        while at < self.info_offset {
            let mut block = match self.root.take_if(|_| at == self.load_on_open) {
                Some(root) => root,
                None => read_block(bytes, at, codec, budget)?,
            };
            if &block.magic == DATA_MAGIC {
                visit_cells(&block, self.mvcc, self.tags, &mut counting)?;
                block.data = Vec::new();
            }
            at += block.on_disk_size;
            blocks.push(block);
        }
        if at != self.info_offset {
            return Err(corrupt(at, "blocks do not end at the file-info block").into());
        }
        let after_info = self.info_offset + info_block.on_disk_size;
        blocks.push(info_block);
        if after_info > self.end {
            return Err(corrupt(after_info, "file-info block runs into the trailer").into());
        }
        // The walk starts where the trailer says; a damaged offset must not pass for a file
        // with fewer cells (or none).
        if cells != self.trailer.entry_count {
            return Err(corrupt(
                self.end,
                format!(
                    "the trailer counts {} cells, the data blocks hold {cells}",
                    self.trailer.entry_count
                ),
            )
            .into());
        }
        Ok(blocks)
    }
}
