//! The writer against HFiles Hudi 0.15 wrote (fixtures in `testdata/`, copied from a table made
//! by `tests/interop/run.sh generate 0.15 mor-mdt-direct`), the reader against damage, and a
//! round-trip property.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::format::log_block::{self, BLOCK_TYPE_HFILE_DATA};
use crate::format::metadata_record::{files_record, LOG_BLOCK_SCHEMA_V6};

/// A metadata-table `files` log file with one HFile data block (deltacommit 20261201113736442).
const HUDI_LOG: &[u8] = include_bytes!("testdata/mdt-files.log.2_0-0-0");
const HUDI_LOG_INSTANT: &str = "20261201113736442";
/// The metadata table's `files` base file (written by `HoodieAvroHFileWriter`: a bloom filter
/// meta block, min/max keys).
const HUDI_BASE: &[u8] = include_bytes!("testdata/mdt-files-base.hfile");

fn hudi_log_hfile() -> &'static [u8] {
    let blocks = log_block::read_blocks(HUDI_LOG).expect("well-formed log file");
    assert_eq!(blocks.len(), 1);
    blocks[0].content
}

fn records_of(file: &HFileContents) -> BTreeMap<String, Vec<u8>> {
    file.cells
        .iter()
        .map(|c| (String::from_utf8(c.row.clone()).unwrap(), c.value.clone()))
        .collect()
}

#[test]
fn reads_the_hfile_of_a_hudi_metadata_table_log_block() {
    let blocks = log_block::read_blocks(HUDI_LOG).unwrap();
    assert_eq!(blocks[0].header.block_type, BLOCK_TYPE_HFILE_DATA);
    assert_eq!(
        blocks[0].header.entries,
        vec![
            (2, LOG_BLOCK_SCHEMA_V6.to_string()),
            (0, HUDI_LOG_INSTANT.to_string())
        ]
    );
    let f = read(blocks[0].content).unwrap();
    let rows: Vec<&[u8]> = f.cells.iter().map(|c| c.row.as_slice()).collect();
    assert_eq!(
        rows,
        [b"__all_partitions__".as_slice(), b"p0", b"p1", b"p2"]
    );
    for c in &f.cells {
        assert_eq!((c.timestamp, c.kv_type, c.mvcc), (i64::MAX, TYPE_PUT, 0));
        assert!(c.family.is_empty() && c.qualifier.is_empty());
    }
    let t = &f.trailer;
    assert_eq!((t.major_version, t.minor_version), (3, 3));
    assert_eq!(t.comparator_class_name, HUDI_COMPARATOR);
    assert_eq!(t.compression_codec, CODEC_GZ);
    assert_eq!(
        (t.entry_count, t.data_index_count, t.num_data_index_levels),
        (4, 1, 1)
    );
    assert_eq!(
        f.file_info(SCHEMA_KEY),
        Some(LOG_BLOCK_SCHEMA_V6.as_bytes())
    );
    let magics: Vec<&[u8; 8]> = f.blocks.iter().map(|b| &b.magic).collect();
    assert_eq!(
        magics,
        [
            DATA_MAGIC,
            ROOT_INDEX_MAGIC,
            ROOT_INDEX_MAGIC,
            FILE_INFO_MAGIC
        ]
    );
}

#[test]
fn reads_a_hudi_metadata_table_base_hfile() {
    let f = read(HUDI_BASE).unwrap();
    assert_eq!(f.cells.len(), 1);
    assert_eq!(f.cells[0].row, b"__all_partitions__");
    assert_eq!(f.trailer.meta_index_count, 1);
    assert_eq!(
        f.file_info("minRecordKey"),
        Some(b"__all_partitions__".as_slice())
    );
    assert!(f.blocks.iter().any(|b| &b.magic == b"METABLKc"));
}

#[test]
fn writes_the_hfile_hudi_writes_for_the_same_records() {
    let hudi = read(hudi_log_hfile()).unwrap();
    let schema = std::str::from_utf8(hudi.file_info(SCHEMA_KEY).unwrap()).unwrap();
    let ours_bytes = write_hudi_hfile(&records_of(&hudi), schema).unwrap();
    let ours = read(&ours_bytes).unwrap();

    // Every block decompresses to the same bytes (the root index differs only in the on-disk
    // size of the data block, which depends on the deflate implementation).
    assert_eq!(ours.blocks.len(), hudi.blocks.len());
    for (o, h) in ours.blocks.iter().zip(&hudi.blocks) {
        assert_eq!(o.magic, h.magic);
        assert_eq!(o.checksum_type, h.checksum_type);
        assert_eq!(o.bytes_per_checksum, h.bytes_per_checksum);
        assert_eq!(o.prev_block_offset == -1, h.prev_block_offset == -1);
        let (od, hd) = (block_data(&ours_bytes, o), block_data(hudi_log_hfile(), h));
        assert_eq!(od.len(), o.uncompressed_size);
        if &o.magic != ROOT_INDEX_MAGIC || od.is_empty() {
            assert_eq!(od, hd, "{}", String::from_utf8_lossy(&o.magic));
        }
    }
    assert_eq!(ours.root_index.len(), hudi.root_index.len());
    for (o, h) in ours.root_index.iter().zip(&hudi.root_index) {
        assert_eq!((o.offset, &o.key), (h.offset, &h.key));
        assert_eq!(o.on_disk_size as usize, ours.blocks[0].on_disk_size);
    }
    let (o, h) = (&ours.blocks[1].data, &hudi.blocks[1].data);
    assert_eq!((o.len(), &o[..8], &o[12..]), (h.len(), &h[..8], &h[12..]));
    // The meta index's prevBlockOffset points at the root index, as in Hudi's file.
    assert_eq!(
        ours.blocks[2].prev_block_offset as u64,
        ours.blocks[1].offset
    );
    assert_eq!(
        hudi.blocks[2].prev_block_offset as u64,
        hudi.blocks[1].offset
    );
    // File info, CREATE_TIME_TS included (Hudi leaves it 0).
    assert_eq!(ours.file_info, hudi.file_info);

    // Trailer: everything but the offsets that follow from compressed sizes.
    let (mut ot, mut ht) = (ours.trailer.clone(), hudi.trailer.clone());
    assert_eq!(ot.load_on_open_offset, ours.blocks[0].on_disk_size as u64);
    assert_eq!(ot.file_info_offset, ours.blocks[3].offset);
    for t in [&mut ot, &mut ht] {
        t.load_on_open_offset = 0;
        t.file_info_offset = 0;
    }
    assert_eq!(ot, ht);
    // Padding and version word of the trailer.
    let tail = &ours_bytes[ours_bytes.len() - TRAILER_SIZE..];
    let hudi_bytes = hudi_log_hfile();
    let hudi_tail = &hudi_bytes[hudi_bytes.len() - TRAILER_SIZE..];
    assert_eq!(tail[tail.len() - 4..], VERSION_BYTES);
    assert_eq!(tail[100..], hudi_tail[100..]);
}

#[test]
fn writes_the_log_block_hudi_writes_around_the_hfile() {
    let hudi_blocks = log_block::read_blocks(HUDI_LOG).unwrap();
    let hudi = read(hudi_blocks[0].content).unwrap();
    let ours =
        log_block::hfile_data_block(HUDI_LOG_INSTANT, LOG_BLOCK_SCHEMA_V6, &records_of(&hudi))
            .unwrap();
    let blocks = log_block::read_blocks(&ours).unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].header, hudi_blocks[0].header);
    assert_eq!(read(blocks[0].content).unwrap().cells, hudi.cells);
    // Everything before the content (magic, size aside, version, type, headers) is Hudi's.
    let head = 14 + 4 + 4 + 4 + (8 + LOG_BLOCK_SCHEMA_V6.len()) + (8 + 17);
    assert_eq!(ours[14..head], HUDI_LOG[14..head]);
    // The size fields are consistent with the content.
    let size = i64::from_be_bytes(ours[6..14].try_into().unwrap()) as usize;
    assert_eq!(size + 14, ours.len());
    let total = i64::from_be_bytes(ours[ours.len() - 8..].try_into().unwrap()) as usize;
    assert_eq!(total, ours.len() - 8);
}

#[test]
fn a_files_record_is_byte_identical_to_hudis() {
    let hudi = read(hudi_log_hfile()).unwrap();
    let schema = apache_avro::Schema::parse_str(LOG_BLOCK_SCHEMA_V6).unwrap();
    let mut checked = 0;
    for cell in hudi.cells.iter().filter(|c| c.row != b"__all_partitions__") {
        let value =
            apache_avro::from_avro_datum(&schema, &mut cell.value.as_slice(), None).unwrap();
        let apache_avro::types::Value::Record(fields) = value else {
            panic!("not a record")
        };
        let apache_avro::types::Value::Union(1, map) = &fields[7].1 else {
            panic!("no file map")
        };
        let apache_avro::types::Value::Map(map) = map.as_ref() else {
            panic!("no file map")
        };
        let files: BTreeMap<String, i64> = map
            .iter()
            .map(|(name, info)| {
                let apache_avro::types::Value::Record(info) = info else {
                    panic!("no file info")
                };
                let apache_avro::types::Value::Long(size) = info[0].1 else {
                    panic!("no size")
                };
                (name.clone(), size)
            })
            .collect();
        assert_eq!(files.len(), 1, "one file per partition in this commit");
        let partition = String::from_utf8(cell.row.clone()).unwrap();
        assert_eq!(
            files_record(&partition, &files),
            (partition, cell.value.clone())
        );
        checked += 1;
    }
    assert_eq!(checked, 3);
}

#[test]
fn damage_is_reported_not_panicked_on() {
    let good = write_hudi_hfile(
        &BTreeMap::from([
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]),
        "{}",
    )
    .unwrap();
    let mut flipped = good.clone();
    flipped[40] ^= 0x10; // inside the first data block's compressed bytes
    assert!(matches!(
        read(&flipped),
        Err(HFileError::Checksum {
            offset: 0,
            chunk: 0
        })
    ));
    assert!(matches!(
        read(&good[..good.len() - 1]),
        Err(HFileError::Unsupported(_) | HFileError::Corrupt { .. })
    ));
    assert!(matches!(
        read(&good[..100]),
        Err(HFileError::Truncated { .. })
    ));
    let mut cut = good[good.len() - TRAILER_SIZE..].to_vec();
    cut.splice(0..0, good[..50].iter().copied());
    assert!(read(&cut).is_err());
}

#[test]
fn an_empty_file_round_trips() {
    let bytes = write_hudi_hfile(&BTreeMap::new(), "{}").unwrap();
    let f = read(&bytes).unwrap();
    assert!(f.cells.is_empty() && f.root_index.is_empty());
    assert_eq!(f.trailer.first_data_block_offset, u64::MAX);
    assert_eq!(f.file_info(LASTKEY), None);
}

fn sorted_records(
    max_len: usize,
    max_value: usize,
) -> impl Strategy<Value = BTreeMap<Vec<u8>, Vec<u8>>> {
    prop::collection::btree_map(
        prop::collection::vec(any::<u8>(), 0..24),
        // values: runs of a few byte values, so that gzip has work to do but it stays quick
        (0..max_value, any::<u8>(), any::<u64>()).prop_map(|(n, b, seed)| {
            (0..n)
                .map(|i| b.wrapping_add(((seed >> (i % 61)) & 3) as u8))
                .collect()
        }),
        0..max_len,
    )
}

fn check_round_trip(records: &BTreeMap<Vec<u8>, Vec<u8>>, block_size: usize) {
    let options = WriterOptions {
        block_size,
        ..WriterOptions::default()
    };
    let bytes = write(
        records.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
        &[(b"schema".as_slice(), b"{}".as_slice())],
        &options,
    )
    .unwrap();
    let f = read(&bytes).unwrap();
    let got: Vec<(&[u8], &[u8])> = f
        .cells
        .iter()
        .map(|c| (c.row.as_slice(), c.value.as_slice()))
        .collect();
    let want: Vec<(&[u8], &[u8])> = records
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    assert_eq!(got, want);
    let data: Vec<&Block> = f.blocks.iter().filter(|b| &b.magic == DATA_MAGIC).collect();
    assert_eq!(f.root_index.len(), data.len());
    assert_eq!(f.trailer.data_index_count as usize, data.len());
    assert_eq!(f.trailer.entry_count as usize, records.len());
    // Each index entry points at its block, and its key sorts after every row of the previous
    // block and not after the block's first row.
    let mut cells = f.cells.iter();
    let mut prev_last: Option<Vec<u8>> = None;
    for (entry, block) in f.root_index.iter().zip(&data) {
        assert_eq!(entry.offset, block.offset);
        assert_eq!(entry.on_disk_size as usize, block.on_disk_size);
        assert!(
            block.data.is_empty(),
            "the contents do not keep data blocks' bytes"
        );
        let mut rows = Vec::new();
        read_cells(&bytes, block, &mut rows);
        let first = rows.first().unwrap().clone();
        let index_row =
            &entry.key[2..2 + usize::from(u16::from_be_bytes([entry.key[0], entry.key[1]]))];
        assert!(index_row <= first.as_slice());
        if let Some(p) = &prev_last {
            assert!(p.as_slice() < index_row);
        } else {
            assert_eq!(index_row, first.as_slice());
        }
        if data.len() > 1 && Some(block) != data.last() {
            assert!(
                block.uncompressed_size >= block_size,
                "a block closes only when full"
            );
        }
        for r in &rows {
            assert_eq!(Some(r), cells.next().map(|c| &c.row));
        }
        prev_last = rows.last().cloned();
    }
    assert!(data
        .iter()
        .all(|b| b.prev_block_offset == -1 || b.offset > 0));
    for w in data.windows(2) {
        assert_eq!(w[1].prev_block_offset as u64, w[0].offset);
    }
}

/// The decompressed bytes of `block` of the HFile `bytes` (read again: the contents do not keep
/// a data block's).
fn block_data(bytes: &[u8], block: &Block) -> Vec<u8> {
    let mut budget = DecompressionBudget::new(u64::MAX);
    let again =
        super::reader::read_block(bytes, block.offset as usize, CODEC_GZ, &mut budget).unwrap();
    assert_eq!(
        (again.magic, again.on_disk_size),
        (block.magic, block.on_disk_size)
    );
    again.data
}

/// The rows of one data block of the HFile `bytes` (cells carry MVCC 0 and no tags).
fn read_cells(bytes: &[u8], block: &Block, rows: &mut Vec<Vec<u8>>) {
    let mut cells = Vec::new();
    let block = Block {
        data: block_data(bytes, block),
        ..block.clone()
    };
    super::reader::read_cells(&block, true, false, &mut cells).unwrap();
    rows.extend(cells.into_iter().map(|c| c.row));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn small_blocks_round_trip(records in sorted_records(60, 300), block_size in 1usize..2000) {
        check_round_trip(&records, block_size);
    }

    #[test]
    fn damaged_files_are_errors_not_panics(
        records in sorted_records(20, 100),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let bytes = write(
            records.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
            &[],
            &WriterOptions { block_size: 64, ..WriterOptions::default() },
        ).unwrap();
        let mut damaged = bytes.clone();
        let i = at.index(damaged.len());
        damaged[i] ^= 1 << bit;
        let _ = read(&damaged);
        let _ = read(&bytes[..i]);
    }
}

/// 40-80 records of 30-60 KB: 1.2-4.8 MB, so several 1 MiB blocks.
fn large_records() -> impl Strategy<Value = BTreeMap<Vec<u8>, Vec<u8>>> {
    prop::collection::btree_map(
        prop::collection::vec(any::<u8>(), 1..40),
        (30_000usize..60_000, any::<u8>())
            .prop_map(|(n, b)| (0..n).map(|i| b.wrapping_add((i % 7) as u8)).collect()),
        40..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3))]
    #[test]
    fn files_over_a_mebibyte_have_several_1_mib_blocks(records in large_records()) {
        prop_assume!(records.values().map(Vec::len).sum::<usize>() > DEFAULT_BLOCK_SIZE + (64 << 10));
        check_round_trip(&records, DEFAULT_BLOCK_SIZE);
        let bytes = write(
            records.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
            &[],
            &WriterOptions::default(),
        ).unwrap();
        let f = read(&bytes).unwrap();
        prop_assert!(f.root_index.len() >= 2, "{} index entries", f.root_index.len());
    }
}

/// An HFile of `blocks` data blocks, each one cell whose value is `value_len` zero bytes: a few
/// KiB on disk (gzip), `blocks * value_len` bytes decompressed.
fn zero_blocks_hfile(blocks: usize, value_len: usize) -> Vec<u8> {
    let zeros = vec![0u8; value_len];
    let keys: Vec<[u8; 2]> = (0..blocks as u16).map(u16::to_be_bytes).collect();
    write(
        keys.iter().map(|k| (k.as_slice(), zeros.as_slice())),
        &[],
        &WriterOptions {
            block_size: 1,
            ..WriterOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn a_file_decompressing_past_the_budget_is_refused_before_the_block_that_crosses_it() {
    const MIB: usize = 1 << 20;
    let bytes = zero_blocks_hfile(64, MIB);
    assert!(bytes.len() < 2 * MIB, "{} bytes on disk", bytes.len());
    let limit = 4 * MIB as u64;
    let mut budget = DecompressionBudget::new(limit);
    match read_with_budget(&bytes, &mut budget) {
        Err(HFileError::TooLarge {
            what,
            size,
            limit: l,
        }) => {
            assert_eq!(l, limit, "{what}");
            assert!(size > limit && size <= limit + MIB as u64 + 64, "{size}");
        }
        other => panic!("expected TooLarge, got {:?}", other.map(|f| f.cells.len())),
    }
    // Nothing past the limit was charged (so nothing past it was inflated).
    assert!(budget.used() <= limit, "{} used", budget.used());
    // With room for all of it, the same file reads, and every byte is counted.
    let mut roomy = DecompressionBudget::new(80 * MIB as u64);
    let f = read_with_budget(&bytes, &mut roomy).unwrap();
    assert_eq!(f.cells.len(), 64);
    assert!(roomy.used() >= 64 * MIB as u64, "{} used", roomy.used());
}

#[test]
fn one_budget_caps_the_total_of_several_files() {
    let one = hudi_log_hfile();
    let mut probe = DecompressionBudget::new(u64::MAX);
    read_with_budget(one, &mut probe).unwrap();
    let per_file = probe.used();
    assert!(per_file > 0);
    // Room for two reads of the file, not three.
    let mut budget = DecompressionBudget::new(2 * per_file + per_file / 2);
    read_with_budget(one, &mut budget).unwrap();
    read_with_budget(one, &mut budget).unwrap();
    assert_eq!(budget.used(), 2 * per_file);
    assert!(matches!(
        read_with_budget(one, &mut budget),
        Err(HFileError::TooLarge { .. })
    ));
}

// ---- Fuzzing: arbitrary bytes, and damaged files (Hudi's and ours) ---------------------------

/// What reading `len` bytes of HFile may allocate at once: a block inflates to what its header
/// says (checked against the gzip member), so a small multiple of the input, or
/// [`MAX_BLOCK_SIZE`] for a block that really inflates that far.
fn hfile_allowance(len: usize) -> usize {
    64 * len + (1 << 20)
}

fn read_bounded(bytes: &[u8]) {
    let (result, largest) = crate::fuzz::largest_allocation(|| read(bytes));
    assert!(
        largest <= hfile_allowance(bytes.len()),
        "{} bytes of HFile allocated {largest} bytes at once ({:?})",
        bytes.len(),
        result.map(|f| f.cells.len())
    );
}

fn small_hfile() -> Vec<u8> {
    write(
        [
            (b"a".as_slice(), b"1".as_slice()),
            (b"b", b"22"),
            (b"c", b"333"),
        ],
        &[(b"schema".as_slice(), b"{}".as_slice())],
        &WriterOptions {
            block_size: 8,
            ..WriterOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn fuzz_huge_sizes_in_a_block_header_are_errors_without_allocating_them() {
    let good = small_hfile();
    // The first data block's header at offset 0: onDiskSizeWithoutHeader (8),
    // uncompressedSizeWithoutHeader (12), onDiskDataSizeWithHeader (29), bytesPerChecksum (25).
    for (at, value) in [
        (8, i32::MAX),
        (8, -1),
        (12, i32::MAX),
        (12, (MAX_BLOCK_SIZE as i32) - 1),
        (12, -1),
        (25, 0),
        (25, i32::MAX),
        (29, i32::MAX),
        (29, 1),
    ] {
        let mut bad = good.clone();
        bad[at..at + 4].copy_from_slice(&value.to_be_bytes());
        let (result, largest) = crate::fuzz::largest_allocation(|| read(&bad));
        assert!(result.is_err(), "header field at {at} = {value} accepted");
        assert!(
            largest <= hfile_allowance(bad.len()),
            "header field at {at} = {value}: allocated {largest} bytes"
        );
    }
}

/// A 4096-byte trailer holding `t`, as the writer lays it out.
fn trailer_bytes(t: &Trailer) -> Vec<u8> {
    use super::codec::{put_bytes_field, put_varint, put_varint_field};
    let mut m = Vec::new();
    for (field, v) in [
        (1, t.file_info_offset),
        (2, t.load_on_open_offset),
        (3, t.uncompressed_data_index_size),
        (4, t.total_uncompressed_bytes),
        (5, t.data_index_count),
        (6, t.meta_index_count),
        (7, t.entry_count),
        (8, t.num_data_index_levels),
        (9, t.first_data_block_offset),
        (10, t.last_data_block_offset),
    ] {
        put_varint_field(&mut m, field, v);
    }
    put_bytes_field(&mut m, 11, t.comparator_class_name.as_bytes());
    put_varint_field(&mut m, 12, t.compression_codec);
    let mut out = TRAILER_MAGIC.to_vec();
    put_varint(&mut out, m.len() as u64);
    out.extend_from_slice(&m);
    out.resize(TRAILER_SIZE - 4, 0);
    out.extend_from_slice(&VERSION_BYTES);
    out
}

#[test]
fn fuzz_huge_offsets_and_counts_in_the_trailer_are_errors() {
    let good = small_hfile();
    let trailer = good.len() - TRAILER_SIZE;
    let mut t = read(&good).unwrap().trailer;
    for field in 1..=10u32 {
        for value in [
            u64::MAX,
            i64::MAX as u64,
            u32::MAX as u64,
            good.len() as u64 + 1,
        ] {
            let mut tr = t.clone();
            match field {
                1 => tr.file_info_offset = value,
                2 => tr.load_on_open_offset = value,
                5 => tr.data_index_count = value,
                9 => tr.first_data_block_offset = value,
                _ => continue,
            }
            let mut bad = good.clone();
            bad.truncate(trailer);
            bad.extend_from_slice(&trailer_bytes(&tr));
            let (result, largest) = crate::fuzz::largest_allocation(|| read(&bad));
            assert!(result.is_err(), "trailer field {field} = {value} accepted");
            assert!(
                largest <= hfile_allowance(bad.len()),
                "trailer field {field}: {largest}"
            );
        }
    }
    // The same trailer, re-encoded, still reads.
    t.comparator_class_name = HUDI_COMPARATOR.into();
    let mut again = good[..trailer].to_vec();
    again.extend_from_slice(&trailer_bytes(&t));
    assert_eq!(read(&again).unwrap().cells.len(), 3);
}

proptest! {
    #![proptest_config(crate::fuzz::config(256))]

    #[test]
    fn fuzz_hfiles_of_arbitrary_bytes(bytes in crate::fuzz::bytes(TRAILER_SIZE + 256)) {
        read_bounded(&bytes);
    }

    #[test]
    fn fuzz_arbitrary_bytes_before_a_valid_trailer(bytes in crate::fuzz::bytes(512)) {
        let good = small_hfile();
        let mut b = bytes;
        b.extend_from_slice(&good[good.len() - TRAILER_SIZE..]);
        read_bounded(&b);
    }

    #[test]
    fn fuzz_damaged_hfiles(
        bytes in crate::fuzz::mutated_one_of(vec![
            hudi_log_hfile().to_vec(),
            HUDI_BASE.to_vec(),
            small_hfile(),
        ])
    ) {
        read_bounded(&bytes);
    }
}
