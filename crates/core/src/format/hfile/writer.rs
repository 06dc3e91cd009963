//! The HFile writer (see the module docs for the layout).

use std::collections::BTreeMap;

use super::codec::{crc32c, gzip, put_bytes_field, put_hadoop_vlong, put_varint, put_varint_field};
use super::*;

/// How to write an HFile. The defaults are what Hudi 0.15 uses for metadata-table log blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterOptions {
    /// A data block is closed once it holds at least this many uncompressed bytes of cells
    /// (checked before each new key, so one large cell makes one large block).
    pub block_size: usize,
    /// `hfile.CREATE_TIME_TS` in milliseconds. Hudi never sets it, so HBase writes 0.
    pub create_time_ms: i64,
    /// The comparator class named in the trailer.
    pub comparator: String,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            block_size: DEFAULT_BLOCK_SIZE,
            create_time_ms: 0,
            comparator: HUDI_COMPARATOR.to_string(),
        }
    }
}

/// The HFile Hudi 0.15 puts in a metadata-table `HFILE_DATA_BLOCK`: one cell per record (row =
/// record key, value = the Avro binary record), file info `schema` = `schema_json`, default
/// [`WriterOptions`]. A `BTreeMap<String, _>` is already in HBase's key order (unsigned bytes).
pub fn write_hudi_hfile(
    records: &BTreeMap<String, Vec<u8>>,
    schema_json: &str,
) -> Result<Vec<u8>, HFileError> {
    write(
        records.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())),
        &[(SCHEMA_KEY.as_bytes(), schema_json.as_bytes())],
        &WriterOptions::default(),
    )
}

/// A KeyValue key: rowLen i16, row, familyLen 0 (no family, no qualifier), timestamp, type.
fn kv_key(row: &[u8], timestamp: i64, kv_type: u8) -> Vec<u8> {
    let mut key = Vec::with_capacity(row.len() + 12);
    key.extend_from_slice(&(row.len() as u16).to_be_bytes());
    key.extend_from_slice(row);
    key.push(0);
    key.extend_from_slice(&timestamp.to_be_bytes());
    key.push(kv_type);
    key
}

/// The shortest row that sorts after `left` and not after `right` (HBase's
/// `getMinimumMidpointArray`, byte arithmetic on Java's signed bytes included).
fn midpoint_row(left: &[u8], right: &[u8]) -> Vec<u8> {
    let min = left.len().min(right.len());
    let diff = left
        .iter()
        .zip(right)
        .position(|(a, b)| a != b)
        .unwrap_or(min);
    if diff >= min {
        // left is a prefix of right
        return right.get(..=diff).unwrap_or(right).to_vec();
    }
    let left_byte = i32::from(left[diff] as i8);
    let right_byte = i32::from(right[diff]);
    if (left_byte & 0xff) < 0xff && left_byte + 1 < right_byte {
        let mut mid = left[..diff].to_vec();
        mid.push((left_byte + 1) as u8);
        mid
    } else {
        right[..=diff].to_vec()
    }
}

/// Builds the file block by block, tracking what the trailer needs.
struct FileBuilder {
    out: Vec<u8>,
    /// Uncompressed sizes (with headers) of every block except the root data index.
    total_uncompressed: u64,
    /// Offset of the previous block of each type (`prevBlockOffset`), by magic.
    prev_by_type: BTreeMap<[u8; 8], i64>,
}

impl FileBuilder {
    /// Append one block; returns `(offset, on-disk size with header)`.
    fn block(&mut self, magic: &[u8; 8], data: &[u8]) -> Result<(u64, usize), HFileError> {
        let offset = self.out.len() as u64;
        let compressed = gzip(data);
        let data_with_header = BLOCK_HEADER_SIZE + compressed.len();
        let checksum_bytes = 4 * data_with_header.div_ceil(BYTES_PER_CHECKSUM);
        let on_disk_without_header = compressed.len() + checksum_bytes;
        let too_large = |what, size: usize| HFileError::TooLarge {
            what,
            size: size as u64,
            limit: i32::MAX as u64,
        };
        let on_disk_i32 = i32::try_from(on_disk_without_header)
            .map_err(|_| too_large("compressed block", on_disk_without_header))?;
        let uncompressed_i32 =
            i32::try_from(data.len()).map_err(|_| too_large("block", data.len()))?;
        let prev = self
            .prev_by_type
            .insert(*magic, offset as i64)
            .unwrap_or(-1);
        let start = self.out.len();
        self.out.extend_from_slice(magic);
        self.out.extend_from_slice(&on_disk_i32.to_be_bytes());
        self.out.extend_from_slice(&uncompressed_i32.to_be_bytes());
        self.out.extend_from_slice(&prev.to_be_bytes());
        self.out.push(CHECKSUM_CRC32C);
        self.out
            .extend_from_slice(&(BYTES_PER_CHECKSUM as i32).to_be_bytes());
        self.out
            .extend_from_slice(&(data_with_header as i32).to_be_bytes());
        self.out.extend_from_slice(&compressed);
        let sums: Vec<u8> = self.out[start..]
            .chunks(BYTES_PER_CHECKSUM)
            .flat_map(|chunk| crc32c(chunk).to_be_bytes())
            .collect();
        self.out.extend_from_slice(&sums);
        Ok((offset, BLOCK_HEADER_SIZE + on_disk_without_header))
    }
}

/// Write a filled data block and add its root-index entry: the first key for the first block,
/// else HBase's shortened "first on row" key between the previous block's last row and this
/// block's first row. Returns the block's offset.
fn finish_block(
    file: &mut FileBuilder,
    block: OpenBlock,
    previous_last: Option<&[u8]>,
    index: &mut Vec<(Vec<u8>, u64, usize)>,
) -> Result<u64, HFileError> {
    let (offset, on_disk) = file.block(DATA_MAGIC, &block.data)?;
    file.total_uncompressed += (BLOCK_HEADER_SIZE + block.data.len()) as u64;
    let key = match previous_last {
        None => kv_key(&block.first_row, i64::MAX, TYPE_PUT),
        Some(prev) => kv_key(
            &midpoint_row(prev, &block.first_row),
            i64::MAX,
            TYPE_MAXIMUM,
        ),
    };
    index.push((key, offset, on_disk));
    Ok(offset)
}

/// One data block's worth of cells while it is filled.
struct OpenBlock {
    data: Vec<u8>,
    first_row: Vec<u8>,
}

/// Write an HFile of `cells` (row, value), rows strictly increasing in unsigned byte order, with
/// `file_info` added to HBase's own file-info entries. Every cell is a Put with an empty family
/// and qualifier, timestamp `i64::MAX` and MVCC 0, as Hudi's `new KeyValue(row, null, null,
/// value)` makes them.
pub fn write<'a>(
    cells: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    file_info: &[(&[u8], &[u8])],
    options: &WriterOptions,
) -> Result<Vec<u8>, HFileError> {
    let mut info: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (k, v) in file_info {
        if k.starts_with(b"hfile.") {
            return Err(HFileError::ReservedFileInfoKey(
                String::from_utf8_lossy(k).into_owned(),
            ));
        }
        info.insert(k.to_vec(), v.to_vec());
    }
    let mut file = FileBuilder {
        out: Vec::new(),
        total_uncompressed: 0,
        prev_by_type: BTreeMap::new(),
    };
    let data = write_data_blocks(&mut file, cells, options)?;

    // Load-on-open section: root data index, meta index, file info.
    let load_on_open = file.out.len() as u64;
    let mut root = Vec::new();
    for (key, offset, on_disk) in &data.index {
        root.extend_from_slice(&(*offset as i64).to_be_bytes());
        root.extend_from_slice(&(*on_disk as i32).to_be_bytes());
        put_hadoop_vlong(&mut root, key.len() as i64);
        root.extend_from_slice(key);
    }
    file.block(ROOT_INDEX_MAGIC, &root)?;
    file.block(ROOT_INDEX_MAGIC, &[])?;
    file.total_uncompressed += BLOCK_HEADER_SIZE as u64;

    let info_block = file_info_block(info, &data, options);
    let (file_info_offset, _) = file.block(FILE_INFO_MAGIC, &info_block)?;
    file.total_uncompressed += (BLOCK_HEADER_SIZE + info_block.len()) as u64;

    // Trailer: field numbers of HBase's TrailerProto; unset offsets are -1 as uint64.
    let unset = |o: Option<u64>| o.unwrap_or(u64::MAX);
    let mut t = Vec::new();
    put_varint_field(&mut t, 1, file_info_offset);
    put_varint_field(&mut t, 2, load_on_open);
    put_varint_field(&mut t, 3, root.len() as u64);
    put_varint_field(&mut t, 4, file.total_uncompressed + TRAILER_SIZE as u64);
    put_varint_field(&mut t, 5, data.index.len() as u64);
    put_varint_field(&mut t, 6, 0);
    put_varint_field(&mut t, 7, data.entry_count);
    put_varint_field(&mut t, 8, 1);
    put_varint_field(&mut t, 9, unset(data.first_block));
    put_varint_field(&mut t, 10, unset(data.last_block));
    put_bytes_field(&mut t, 11, options.comparator.as_bytes());
    put_varint_field(&mut t, 12, CODEC_GZ);
    let mut trailer = TRAILER_MAGIC.to_vec();
    put_varint(&mut trailer, t.len() as u64);
    trailer.extend_from_slice(&t);
    if trailer.len() > TRAILER_SIZE - VERSION_BYTES.len() {
        return Err(HFileError::TooLarge {
            what: "trailer",
            size: trailer.len() as u64,
            limit: (TRAILER_SIZE - VERSION_BYTES.len()) as u64,
        });
    }
    trailer.resize(TRAILER_SIZE - VERSION_BYTES.len(), 0);
    trailer.extend_from_slice(&VERSION_BYTES);
    file.out.extend_from_slice(&trailer);
    Ok(file.out)
}

/// What the data blocks of a file hold, for its index, file info and trailer.
#[derive(Default)]
struct DataBlocks {
    /// (key, offset, on-disk size with header) per data block.
    index: Vec<(Vec<u8>, u64, usize)>,
    first_block: Option<u64>,
    last_block: Option<u64>,
    /// The last cell's row.
    last_row: Option<Vec<u8>>,
    entry_count: u64,
    total_key_len: u64,
    total_value_len: u64,
}

impl DataBlocks {
    /// Write the filled `block` and add it to the index (`previous_last`: the last row of the
    /// block before it).
    fn close(
        &mut self,
        file: &mut FileBuilder,
        block: OpenBlock,
        previous_last: Option<&[u8]>,
    ) -> Result<(), HFileError> {
        let offset = finish_block(file, block, previous_last, &mut self.index)?;
        self.first_block.get_or_insert(offset);
        self.last_block = Some(offset);
        Ok(())
    }
}

/// Write `cells` into data blocks of about `options.block_size` bytes each.
fn write_data_blocks<'a>(
    file: &mut FileBuilder,
    cells: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    options: &WriterOptions,
) -> Result<DataBlocks, HFileError> {
    let mut data = DataBlocks::default();
    let mut last_row_of_previous_block: Option<Vec<u8>> = None;
    let mut open: Option<OpenBlock> = None;
    for (row, value) in cells {
        if row.len() > i16::MAX as usize {
            return Err(HFileError::KeyTooLong { len: row.len() });
        }
        if let Some(prev) = &data.last_row {
            if prev.as_slice() >= row {
                return Err(HFileError::Unsorted {
                    previous: String::from_utf8_lossy(prev).into_owned(),
                    key: String::from_utf8_lossy(row).into_owned(),
                });
            }
        }
        let key = kv_key(row, i64::MAX, TYPE_PUT);
        let value_len = i32::try_from(value.len()).map_err(|_| HFileError::TooLarge {
            what: "value",
            size: value.len() as u64,
            limit: i32::MAX as u64,
        })?;
        // Close the open block once full, before a new key (HBase's checkBlockBoundary).
        if open
            .as_ref()
            .is_some_and(|b| b.data.len() >= options.block_size)
        {
            if let Some(block) = open.take() {
                data.close(file, block, last_row_of_previous_block.as_deref())?;
            }
        }
        let block = open.get_or_insert_with(|| {
            last_row_of_previous_block.clone_from(&data.last_row);
            OpenBlock {
                data: Vec::new(),
                first_row: row.to_vec(),
            }
        });
        block
            .data
            .extend_from_slice(&(key.len() as i32).to_be_bytes());
        block.data.extend_from_slice(&value_len.to_be_bytes());
        block.data.extend_from_slice(&key);
        block.data.extend_from_slice(value);
        put_hadoop_vlong(&mut block.data, 0);
        data.entry_count += 1;
        data.total_key_len += key.len() as u64;
        data.total_value_len += value.len() as u64;
        data.last_row = Some(row.to_vec());
    }
    if let Some(block) = open.take() {
        data.close(file, block, last_row_of_previous_block.as_deref())?;
    }
    Ok(data)
}

/// The file-info block's payload: `info` (the caller's entries) with HBase's own added.
fn file_info_block(
    mut info: BTreeMap<Vec<u8>, Vec<u8>>,
    data: &DataBlocks,
    options: &WriterOptions,
) -> Vec<u8> {
    // HBase: (int) (total / entryCount), 0 for an empty file
    let avg = |total: u64| total.checked_div(data.entry_count).unwrap_or(0) as i32;
    info.insert(KEY_VALUE_VERSION.into(), 1i32.to_be_bytes().to_vec());
    info.insert(MAX_MEMSTORE_TS_KEY.into(), 0i64.to_be_bytes().to_vec());
    info.insert(
        AVG_KEY_LEN.into(),
        avg(data.total_key_len).to_be_bytes().to_vec(),
    );
    info.insert(
        AVG_VALUE_LEN.into(),
        avg(data.total_value_len).to_be_bytes().to_vec(),
    );
    info.insert(
        CREATE_TIME_TS.into(),
        options.create_time_ms.to_be_bytes().to_vec(),
    );
    if let Some(row) = &data.last_row {
        info.insert(LASTKEY.into(), kv_key(row, i64::MAX, TYPE_PUT));
    }
    let mut info_proto = Vec::new();
    for (k, v) in &info {
        let mut pair = Vec::with_capacity(k.len() + v.len() + 8);
        put_bytes_field(&mut pair, 1, k);
        put_bytes_field(&mut pair, 2, v);
        put_bytes_field(&mut info_proto, 1, &pair);
    }
    let mut info_block = PBUF_MAGIC.to_vec();
    put_varint(&mut info_block, info_proto.len() as u64);
    info_block.extend_from_slice(&info_proto);
    info_block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midpoints_follow_hbase() {
        // a byte in between exists: left's prefix plus left's byte + 1
        assert_eq!(midpoint_row(b"abc", b"axz"), b"ac");
        // adjacent bytes: right's prefix
        assert_eq!(midpoint_row(b"abc", b"acz"), b"ac");
        // left a prefix of right
        assert_eq!(midpoint_row(b"ab", b"abcd"), b"abc");
        // Java's signed bytes: left 0x80 (-128) + 1 < 0x81 holds, so 0x81 after the prefix
        assert_eq!(midpoint_row(&[1, 0x80, 5], &[1, 0x81]), vec![1, 0x81]);
        assert_eq!(midpoint_row(&[0x80], &[0x90]), vec![0x81]);
    }

    #[test]
    fn unsorted_and_duplicate_keys_are_refused() {
        let o = WriterOptions::default();
        let dup: [(&[u8], &[u8]); 2] = [(b"a", b"1"), (b"a", b"2")];
        assert!(matches!(
            write(dup, &[], &o),
            Err(HFileError::Unsorted { .. })
        ));
        let down: [(&[u8], &[u8]); 2] = [(b"b", b"1"), (b"a", b"2")];
        assert!(matches!(
            write(down, &[], &o),
            Err(HFileError::Unsorted { .. })
        ));
        let long = vec![b'k'; 40_000];
        assert!(matches!(
            write([(long.as_slice(), b"v".as_slice())], &[], &o),
            Err(HFileError::KeyTooLong { len: 40_000 })
        ));
        assert!(matches!(
            write(
                std::iter::empty(),
                &[(b"hfile.LASTKEY".as_slice(), b"x".as_slice())],
                &o
            ),
            Err(HFileError::ReservedFileInfoKey(_))
        ));
    }
}
