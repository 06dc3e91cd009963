//! Gives the table `scripts/bench-huge-table --metadata-table` made a version-8 metadata table
//! whose `files` partition lists every data file the table holds now: one base HFile, as Hudi
//! 1.x's metadata-table initialization writes it (instant `00000000000000010`, a completed
//! deltacommit), and `hoodie.table.metadata.partitions=files` in the table's properties. The
//! audit then checks a million names against the store (issue #33's memory figure).
//!
//!     cargo run --release -p hudi-keeper-core --example bench_metadata_table -- <table dir> [instant]
//!
//! Files of `instant` (the bench's failed write) are left out.
//!
//! A benchmark tool, not part of hudi-keeper: it writes local files directly.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use hudi_keeper_core::format::commit::empty_commit_metadata;
use hudi_keeper_core::format::hfile::{write, WriterOptions};
use hudi_keeper_core::format::metadata_record::{
    file_list_record, ALL_PARTITIONS_KEY, FILES_RECORD_TYPE, LOG_BLOCK_SCHEMA_V6,
};

const INIT: &str = "00000000000000010";
const PARTITION_LIST_TYPE: i32 = 1;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::args()
        .nth(1)
        .ok_or("usage: bench_metadata_table <table dir>")?;
    let base = Path::new(&base);
    let skip = std::env::args().nth(2).map(|i| format!("_{i}."));
    // Every partition (a folder holding `.hoodie_partition_metadata`) and its data files.
    let mut partitions: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for entry in fs::read_dir(base)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().join(".hoodie_partition_metadata").exists() {
            continue;
        }
        let mut files = Vec::new();
        for f in fs::read_dir(entry.path())? {
            let f = f?;
            let n = f.file_name().to_string_lossy().into_owned();
            let failed = skip.as_ref().is_some_and(|s| n.contains(s.as_str()));
            if !n.starts_with(".hoodie_partition_metadata") && !failed {
                files.push((n, i64::try_from(f.metadata()?.len())?));
            }
        }
        files.sort();
        partitions.insert(name, files);
    }
    let mut records: Vec<(String, Vec<u8>)> = Vec::with_capacity(partitions.len() + 1);
    let names: Vec<(&str, i64, bool)> = partitions.keys().map(|p| (p.as_str(), 0, false)).collect();
    records.push(file_list_record(
        ALL_PARTITIONS_KEY,
        PARTITION_LIST_TYPE,
        names.into_iter(),
    ));
    let mut listed = 0usize;
    for (p, files) in &partitions {
        listed += files.len();
        let entries: Vec<(&str, i64, bool)> =
            files.iter().map(|(n, s)| (n.as_str(), *s, false)).collect();
        records.push(file_list_record(p, FILES_RECORD_TYPE, entries.into_iter()));
    }
    records.sort_by(|a, b| a.0.cmp(&b.0));
    let hfile = write(
        records.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())),
        &[(b"schema".as_slice(), LOG_BLOCK_SCHEMA_V6.as_bytes())],
        &WriterOptions::default(),
    )?;
    let mdt = base.join(".hoodie/metadata");
    let _ = fs::remove_dir_all(&mdt);
    let tl = mdt.join(".hoodie/timeline");
    fs::create_dir_all(&tl)?;
    fs::write(
        mdt.join(".hoodie/hoodie.properties"),
        "hoodie.table.name=huge_metadata\nhoodie.table.type=MERGE_ON_READ\n\
         hoodie.table.version=8\nhoodie.timeline.layout.version=2\n\
         hoodie.table.timeline.timezone=UTC\n",
    )?;
    let commit = empty_commit_metadata(LOG_BLOCK_SCHEMA_V6, "BULK_INSERT")?;
    fs::write(tl.join(format!("{INIT}.deltacommit.requested")), b"")?;
    fs::write(tl.join(format!("{INIT}.deltacommit.inflight")), b"")?;
    fs::write(
        tl.join(format!("{INIT}_00000000000000011.deltacommit")),
        commit,
    )?;
    let files = mdt.join("files");
    fs::create_dir_all(&files)?;
    fs::write(files.join(".hoodie_partition_metadata"), b"")?;
    fs::write(
        files.join(format!("files-0000-0_0-0-0_{INIT}.hfile")),
        &hfile,
    )?;
    let props = base.join(".hoodie/hoodie.properties");
    let text = fs::read_to_string(&props)?;
    let mut out: String = text
        .lines()
        .filter(|l| !l.starts_with("hoodie.table.metadata.partitions"))
        .map(|l| format!("{l}\n"))
        .collect();
    out.push_str("hoodie.table.metadata.partitions=files\n");
    fs::write(&props, out)?;
    eprintln!(
        "metadata table: {} partitions, {listed} files, base HFile of {} bytes",
        partitions.len(),
        hfile.len()
    );
    Ok(())
}
