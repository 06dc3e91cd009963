//! HFiles as Hudi 0.14/0.15 (table version 6) writes them into metadata-table log blocks
//! (`HFILE_DATA_BLOCK`): HBase 2.4's HFile format version 3, written the way
//! `HFile.getWriterFactory` writes it for Hudi. Pure functions over bytes, no I/O.
//!
//! Layout of a file written here (every block: a 33-byte header, its data GZ-compressed as one
//! gzip member, then one big-endian CRC32C per 16 KiB of header + compressed data):
//!
//! ```text
//! DATABLK*  data blocks of about 1 MiB of KeyValues: keyLen i32, valueLen i32,
//!           key (rowLen i16, row, familyLen 0, timestamp i64::MAX, type 4 = Put), value,
//!           MVCC timestamp as a Hadoop VLong (always 0)
//! IDXROOT2  root data index: per data block offset i64, on-disk size i32,
//!           Hadoop VInt key length, key (the first key, or HBase's shortened midpoint key)
//! IDXROOT2  meta index (empty: no meta blocks)
//! FILEINF2  "PBUF" + length-delimited InfoProto: HBase's keys + `schema`
//! trailer   4096 bytes: "TRABLK\"$" + length-delimited TrailerProto, zero padding, 03 00 00 03
//! ```
//!
//! [`write_hudi_hfile`] is what a metadata-table log block holds; [`read`] parses such files (and
//! the ones Hudi and HBase write) for tests and checks.

mod codec;
mod reader;
mod writer;

pub use reader::{
    open, read, read_with_budget, Block, Cell, CellRef, DecompressionBudget, HFileContents,
    IndexEntry, OpenHFile, Trailer,
};
pub use writer::{write, write_hudi_hfile, WriterOptions};

/// Hudi's HFile block size (`HoodieHFileDataBlock`): 1 MiB.
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;
/// The comparator class Hudi names in the trailer.
pub const HUDI_COMPARATOR: &str = "org.apache.hudi.io.storage.HoodieHBaseKVComparator";
/// The file-info key under which Hudi stores the Avro schema (JSON) of the values.
pub const SCHEMA_KEY: &str = "schema";
/// The size of an HFile v3 trailer.
pub const TRAILER_SIZE: usize = 4096;
/// The largest block (uncompressed) or cell the reader accepts.
pub const MAX_BLOCK_SIZE: usize = 256 << 20;
/// The most bytes [`read`] decompresses from one file (all its blocks together); a caller
/// reading several files caps their total with [`read_with_budget`].
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 512 << 20;

/// Block magics.
pub(crate) const DATA_MAGIC: &[u8; 8] = b"DATABLK*";
pub(crate) const ROOT_INDEX_MAGIC: &[u8; 8] = b"IDXROOT2";
pub(crate) const FILE_INFO_MAGIC: &[u8; 8] = b"FILEINF2";
pub(crate) const TRAILER_MAGIC: &[u8; 8] = b"TRABLK\"$";
pub(crate) const PBUF_MAGIC: &[u8; 4] = b"PBUF";
/// Block header: magic 8, onDiskSizeWithoutHeader 4, uncompressedSizeWithoutHeader 4,
/// prevBlockOffset 8, checksumType 1, bytesPerChecksum 4, onDiskDataSizeWithHeader 4.
pub(crate) const BLOCK_HEADER_SIZE: usize = 33;
pub(crate) const BYTES_PER_CHECKSUM: usize = 16384;
pub(crate) const CHECKSUM_CRC32C: u8 = 2;
/// `Compression.Algorithm` ordinals in the trailer.
pub(crate) const CODEC_GZ: u64 = 1;
pub(crate) const CODEC_NONE: u64 = 2;
/// HFile major 3, minor 3, as `(minor << 24) | major`.
pub(crate) const VERSION_BYTES: [u8; 4] = [3, 0, 0, 3];
/// KeyValue type of a put, and of the fake "first on row" keys of the block index.
pub(crate) const TYPE_PUT: u8 = 4;
pub(crate) const TYPE_MAXIMUM: u8 = 255;
/// File-info keys HBase writes.
pub(crate) const KEY_VALUE_VERSION: &str = "KEY_VALUE_VERSION";
pub(crate) const MAX_MEMSTORE_TS_KEY: &str = "MAX_MEMSTORE_TS_KEY";
pub(crate) const AVG_KEY_LEN: &str = "hfile.AVG_KEY_LEN";
pub(crate) const AVG_VALUE_LEN: &str = "hfile.AVG_VALUE_LEN";
pub(crate) const CREATE_TIME_TS: &str = "hfile.CREATE_TIME_TS";
pub(crate) const LASTKEY: &str = "hfile.LASTKEY";
pub(crate) const MAX_TAGS_LEN: &str = "hfile.MAX_TAGS_LEN";

/// Why an HFile could not be written or read. Offsets are byte offsets in the HFile; the caller
/// adds the table, instant and path.
#[derive(Debug, thiserror::Error)]
pub enum HFileError {
    /// Keys must be strictly increasing in unsigned byte order (HBase's comparator).
    #[error("HFile keys must be strictly increasing: key {key:?} follows {previous:?}")]
    Unsorted {
        /// The earlier key (lossy UTF-8).
        previous: String,
        /// The key that does not sort after it.
        key: String,
    },
    /// A KeyValue row is at most `i16::MAX` bytes.
    #[error("HFile row key of {len} bytes is longer than the limit of 32767")]
    KeyTooLong {
        /// The key's length.
        len: usize,
    },
    /// A value or a block is larger than the format or this module allows.
    #[error("HFile {what} of {size} bytes is larger than the limit of {limit}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Custom file-info keys may not use HBase's reserved `hfile.` prefix.
    #[error("HFile file-info key {0:?} uses the reserved prefix \"hfile.\"")]
    ReservedFileInfoKey(String),
    /// The bytes end before a structure does.
    #[error("HFile truncated: {what} at offset {offset}")]
    Truncated {
        /// The structure being read.
        what: &'static str,
        /// Where it starts.
        offset: u64,
    },
    /// The bytes are not what the format requires.
    #[error("HFile corrupt at offset {offset}: {reason}")]
    Corrupt {
        /// Where.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A block's stored checksum does not match its bytes.
    #[error("HFile block at offset {offset}: checksum of chunk {chunk} does not match")]
    Checksum {
        /// The block's offset.
        offset: u64,
        /// The 16 KiB chunk (0-based).
        chunk: usize,
    },
    /// A well-formed file using a feature this module does not read.
    #[error("HFile feature not supported: {0}")]
    Unsupported(String),
}

#[cfg(test)]
mod tests;
