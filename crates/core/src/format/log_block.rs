//! Hudi log blocks (hudi-format.md §9): the rollback command block hudi-keeper writes into v6
//! merge-on-read log files, the HFile data block it writes into v6 metadata-table log files, and a
//! reader of blocks to check them.

use std::collections::BTreeMap;

use super::hfile::{self, HFileError};

/// The magic at the start of every block.
pub const MAGIC: &[u8; 6] = b"#HUDI#";
const LOG_FORMAT_VERSION: i32 = 1;
const BLOCK_TYPE_COMMAND: i32 = 0;
/// The block type of an HFile data block (metadata-table log files of v6 tables).
pub const BLOCK_TYPE_HFILE_DATA: i32 = 4;
const HEADER_INSTANT_TIME: i32 = 0;
const HEADER_TARGET_INSTANT_TIME: i32 = 1;
const HEADER_SCHEMA: i32 = 2;
const HEADER_COMMAND_BLOCK_TYPE: i32 = 3;
const ROLLBACK_BLOCK: &str = "0";

/// The bytes of a rollback command block: written at `instant_time` (the rollback instant), it
/// voids the blocks of `target_instant_time`.
pub fn rollback_command_block(instant_time: &str, target_instant_time: &str) -> Vec<u8> {
    let headers: [(i32, &str); 3] = [
        (HEADER_INSTANT_TIME, instant_time),
        (HEADER_COMMAND_BLOCK_TYPE, ROLLBACK_BLOCK),
        (HEADER_TARGET_INSTANT_TIME, target_instant_time),
    ];
    encode_block(BLOCK_TYPE_COMMAND, &headers, &[])
}

/// One block: magic, size, version, type, header entries, content, an empty footer, and the
/// trailing total length.
fn encode_block(block_type: i32, headers: &[(i32, &str)], content: &[u8]) -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(&(headers.len() as i32).to_be_bytes());
    for (key, value) in headers {
        header.extend_from_slice(&key.to_be_bytes());
        header.extend_from_slice(&(value.len() as i32).to_be_bytes());
        header.extend_from_slice(value.as_bytes());
    }
    let footer = 0i32.to_be_bytes();
    // Bytes after the size field, up to and including the trailing length.
    let block_size = 4 + 4 + header.len() + 8 + content.len() + footer.len() + 8;
    let mut out = Vec::with_capacity(6 + 8 + block_size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(block_size as i64).to_be_bytes());
    out.extend_from_slice(&LOG_FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&block_type.to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&(content.len() as i64).to_be_bytes());
    out.extend_from_slice(content);
    out.extend_from_slice(&footer);
    let total = out.len() as i64;
    out.extend_from_slice(&total.to_be_bytes());
    out
}

/// The bytes of the HFile data block Hudi 0.14/0.15 appends to a v6 metadata-table log file
/// (`HoodieHFileDataBlock`): block type 4, headers `SCHEMA` = `schema_json` and `INSTANT_TIME` =
/// `instant_time` (in the order Hudi 0.15 wrote them in the log files seen), content = an HFile
/// of `records` ([`hfile::write_hudi_hfile`]: row = record key, value = Avro binary record).
///
/// For metadata-table `files` records use
/// [`metadata_record::LOG_BLOCK_SCHEMA_V6`](super::metadata_record::LOG_BLOCK_SCHEMA_V6) and
/// [`metadata_record::files_record`](super::metadata_record::files_record).
pub fn hfile_data_block(
    instant_time: &str,
    schema_json: &str,
    records: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<u8>, HFileError> {
    let content = hfile::write_hudi_hfile(records, schema_json)?;
    let headers = [
        (HEADER_SCHEMA, schema_json),
        (HEADER_INSTANT_TIME, instant_time),
    ];
    Ok(encode_block(BLOCK_TYPE_HFILE_DATA, &headers, &content))
}

/// One block of a log file, as read by [`read_blocks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBlock<'a> {
    /// Type and header entries.
    pub header: BlockHeader,
    /// The content (an HFile for an HFile data block; empty for a command block).
    pub content: &'a [u8],
}

/// The header of one block: type and `(key, value)` entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    /// The block type ordinal (0 = command).
    pub block_type: i32,
    /// Header entries in file order.
    pub entries: Vec<(i32, String)>,
}

/// Read the headers of every block in a log file. `None` if the bytes are not well-formed blocks.
pub fn read_block_headers(bytes: &[u8]) -> Option<Vec<BlockHeader>> {
    Some(read_blocks(bytes)?.into_iter().map(|b| b.header).collect())
}

/// Read every block of a log file: headers and content. `None` if the bytes are not well-formed
/// blocks.
pub fn read_blocks(bytes: &[u8]) -> Option<Vec<LogBlock<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let int = |b: &[u8], at: usize| -> Option<i32> {
        Some(i32::from_be_bytes(
            b.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let long = |b: &[u8], at: usize| -> Option<i64> {
        Some(i64::from_be_bytes(
            b.get(at..at.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    while pos < bytes.len() {
        if bytes.get(pos..pos + 6)? != MAGIC {
            return None;
        }
        let size = usize::try_from(long(bytes, pos + 6)?).ok()?;
        let start = pos + 14;
        let end = start.checked_add(size)?;
        if end > bytes.len() {
            return None;
        }
        let block = &bytes[..end];
        let block_type = int(block, start + 4)?;
        let count = usize::try_from(int(block, start + 8)?).ok()?;
        let mut at = start + 12;
        let mut entries = Vec::with_capacity(count.min(16));
        for _ in 0..count {
            let key = int(block, at)?;
            let len = usize::try_from(int(block, at + 4)?).ok()?;
            let value = block.get(at + 8..(at + 8).checked_add(len)?)?;
            entries.push((key, String::from_utf8(value.to_vec()).ok()?));
            at += 8 + len;
        }
        let content_len = usize::try_from(long(block, at)?).ok()?;
        let content = block.get(at + 8..(at + 8).checked_add(content_len)?)?;
        out.push(LogBlock {
            header: BlockHeader {
                block_type,
                entries,
            },
            content,
        });
        pos = end;
    }
    Some(out)
}

/// Whether `bytes` hold exactly one rollback command block voiding `target` written at `instant`.
pub fn is_rollback_block_for(bytes: &[u8], instant: &str, target: &str) -> bool {
    match read_block_headers(bytes).as_deref() {
        Some([h]) => {
            let get = |k: i32| {
                h.entries
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| v.as_str())
            };
            h.block_type == BLOCK_TYPE_COMMAND
                && get(HEADER_COMMAND_BLOCK_TYPE) == Some(ROLLBACK_BLOCK)
                && get(HEADER_INSTANT_TIME) == Some(instant)
                && get(HEADER_TARGET_INSTANT_TIME) == Some(target)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_layout_of_a_real_rollback_block() {
        // The real block in hudi-format.md §9.2: 105 bytes, blockSize 91, totalBlockLength 97.
        let b = rollback_command_block("20250126040936578", "20250126040826878");
        assert_eq!(b.len(), 105);
        assert_eq!(&b[..6], MAGIC);
        assert_eq!(i64::from_be_bytes(b[6..14].try_into().unwrap()), 91);
        assert_eq!(i64::from_be_bytes(b[97..105].try_into().unwrap()), 97);
        let headers = read_block_headers(&b).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(
            headers[0].entries,
            vec![
                (0, "20250126040936578".to_string()),
                (3, "0".to_string()),
                (1, "20250126040826878".to_string())
            ]
        );
        assert!(is_rollback_block_for(
            &b,
            "20250126040936578",
            "20250126040826878"
        ));
        assert!(!is_rollback_block_for(&b, "20250126040936578", "1"));
    }

    #[test]
    fn truncated_blocks_are_not_read() {
        let b = rollback_command_block("2", "1");
        assert!(read_block_headers(&b[..b.len() - 1]).is_none());
        assert!(read_block_headers(b"#HUDI").is_none());
    }
}

#[cfg(test)]
mod fuzz_tests {
    //! Log files as read from storage: arbitrary bytes, and damaged files (Hudi's metadata-table
    //! log file, our command blocks and HFile data blocks) with huge sizes written into them.

    use proptest::prelude::*;

    use super::*;
    use crate::format::metadata_record::{
        decode_v6_files_record, files_record, LOG_BLOCK_SCHEMA_V6,
    };
    use crate::fuzz::{self, largest_allocation};

    /// A metadata-table `files` log file Hudi 0.15 wrote (one HFile data block).
    const HUDI_LOG: &[u8] = include_bytes!("hfile/testdata/mdt-files.log.2_0-0-0");

    fn our_log() -> Vec<u8> {
        let mut log = rollback_command_block("20250126040936578", "20250126040826878");
        let records = BTreeMap::from([files_record(
            "p0",
            &BTreeMap::from([("f-0_0-1-0_20250126040826878.parquet".to_string(), 42)]),
        )]);
        log.extend(hfile_data_block("20250126040936578", LOG_BLOCK_SCHEMA_V6, &records).unwrap());
        log
    }

    /// Read every block, and the HFile and records of the HFile data blocks, as the metadata
    /// table's readers do; nothing may panic or allocate past a small multiple of the input.
    fn read_log(bytes: &[u8]) {
        let ((), largest) = largest_allocation(|| {
            let _ = is_rollback_block_for(bytes, "20250126040936578", "20250126040826878");
            for block in read_blocks(bytes).unwrap_or_default() {
                if block.header.block_type != BLOCK_TYPE_HFILE_DATA {
                    continue;
                }
                if let Ok(file) = hfile::read(block.content) {
                    for cell in &file.cells {
                        let _ = decode_v6_files_record(&cell.value);
                    }
                }
            }
        });
        assert!(
            largest <= 64 * bytes.len() + (1 << 20),
            "{} bytes of log file allocated {largest} bytes at once",
            bytes.len()
        );
    }

    #[test]
    fn fuzz_valid_log_files_read() {
        assert_eq!(read_blocks(HUDI_LOG).unwrap().len(), 1);
        let log = our_log();
        let ours = read_blocks(&log).unwrap();
        assert_eq!(ours.len(), 2);
        assert_eq!(ours[1].header.block_type, BLOCK_TYPE_HFILE_DATA);
        read_log(HUDI_LOG);
        read_log(&our_log());
    }

    #[test]
    fn fuzz_huge_sizes_in_a_block_are_not_read() {
        let good = rollback_command_block("2", "1");
        // blockSize (6..14), header count (22..26), first header value length (30..34), and the
        // content length after the headers.
        let content_len_at = good.len() - 8 - 4 - 8;
        for (at, width) in [(6, 8), (22, 4), (30, 4), (content_len_at, 8)] {
            for value in [u64::MAX, i64::MAX as u64, u32::MAX as u64, i32::MAX as u64] {
                let mut bad = good.clone();
                bad[at..at + width].copy_from_slice(&value.to_be_bytes()[8 - width..]);
                let (blocks, largest) = largest_allocation(|| read_blocks(&bad));
                assert!(blocks.is_none(), "size at {at} = {value:#x} accepted");
                assert!(largest < 4096, "size at {at} = {value:#x}: {largest} bytes");
            }
        }
    }

    proptest! {
        #![proptest_config(fuzz::config(512))]

        #[test]
        fn fuzz_log_files_of_arbitrary_bytes(bytes in fuzz::bytes(256)) {
            read_log(&bytes);
        }

        #[test]
        fn fuzz_arbitrary_bytes_after_a_block_magic(bytes in fuzz::bytes(256)) {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&bytes);
            read_log(&b);
        }

        #[test]
        fn fuzz_damaged_log_files(bytes in fuzz::mutated_one_of(vec![
            HUDI_LOG.to_vec(),
            our_log(),
            rollback_command_block("20250126040936578", "20250126040826878"),
        ])) {
            read_log(&bytes);
        }
    }
}
