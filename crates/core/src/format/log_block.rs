//! Hudi log blocks (hudi-format.md §9): only the rollback command block hudi-keeper writes into
//! v6 merge-on-read log files, and a reader of block headers to check them.

/// The magic at the start of every block.
pub const MAGIC: &[u8; 6] = b"#HUDI#";
const LOG_FORMAT_VERSION: i32 = 1;
const BLOCK_TYPE_COMMAND: i32 = 0;
const HEADER_INSTANT_TIME: i32 = 0;
const HEADER_TARGET_INSTANT_TIME: i32 = 1;
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
    let mut header = Vec::new();
    header.extend_from_slice(&(headers.len() as i32).to_be_bytes());
    for (key, value) in headers {
        header.extend_from_slice(&key.to_be_bytes());
        header.extend_from_slice(&(value.len() as i32).to_be_bytes());
        header.extend_from_slice(value.as_bytes());
    }
    let footer = 0i32.to_be_bytes();
    let content_len = 0i64;
    // Bytes after the size field, up to and including the trailing length.
    let block_size = 4 + 4 + header.len() + 8 + footer.len() + 8;
    let mut out = Vec::with_capacity(6 + 8 + block_size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(block_size as i64).to_be_bytes());
    out.extend_from_slice(&LOG_FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&BLOCK_TYPE_COMMAND.to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&content_len.to_be_bytes());
    out.extend_from_slice(&footer);
    let total = out.len() as i64;
    out.extend_from_slice(&total.to_be_bytes());
    out
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
    let mut out = Vec::new();
    let mut pos = 0usize;
    let int = |b: &[u8], at: usize| -> Option<i32> {
        Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let long = |b: &[u8], at: usize| -> Option<i64> {
        Some(i64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
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
        let block_type = int(bytes, start + 4)?;
        let count = usize::try_from(int(bytes, start + 8)?).ok()?;
        let mut at = start + 12;
        let mut entries = Vec::with_capacity(count.min(16));
        for _ in 0..count {
            let key = int(bytes, at)?;
            let len = usize::try_from(int(bytes, at + 4)?).ok()?;
            let value = bytes.get(at + 8..at + 8 + len)?;
            entries.push((key, String::from_utf8(value.to_vec()).ok()?));
            at += 8 + len;
        }
        out.push(BlockHeader {
            block_type,
            entries,
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
