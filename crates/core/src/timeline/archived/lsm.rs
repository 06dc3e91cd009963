//! The layout-2 archive (Hudi's LSM timeline): `_version_`, `manifest_<N>` and the parquet files
//! the latest manifest names.

use serde::Deserialize;

use super::{lsm_parquet, ArchivedError, Reading};
use crate::storage::RelPath;

const VERSION_FILE: &str = "_version_";
const MANIFEST_PREFIX: &str = "manifest_";
/// The most bytes of a manifest or `_version_` file read.
const MAX_MANIFEST: u64 = 16 << 20;

/// `HoodieLSMTimelineManifest` as Hudi's Jackson writes it.
#[derive(Debug, Deserialize)]
struct Manifest {
    #[serde(default)]
    files: Vec<ManifestEntry>,
}

#[derive(Debug, Deserialize)]
struct ManifestEntry {
    #[serde(rename = "fileName")]
    file_name: String,
}

/// Whether `name` is an LSM data file name, `^(\d+)_(\d+)_(\d)\.parquet` as Hudi matches it
/// (a prefix match: Hudi accepts anything after `.parquet`; hudi-keeper wants the exact form).
pub(crate) fn is_data_file(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".parquet") else {
        return false;
    };
    let parts: Vec<&str> = stem.split('_').collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    matches!(parts.as_slice(), [min, max, level] if digits(min) && digits(max) && level.len() == 1 && digits(level))
}

/// The version of a `manifest_<N>` name (not a `.tmp` one).
fn manifest_version(name: &str) -> Option<u32> {
    let n = name.strip_prefix(MANIFEST_PREFIX)?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// List the folder, find the latest manifest as Hudi does (`_version_`, else the greatest
/// `manifest_<N>`), and read every file it names.
pub(crate) async fn read_folder(r: &mut Reading<'_>, dir: &RelPath) {
    let listing = match r
        .storage
        .list_dir_filtered(dir, |p| {
            let n = p.file_name();
            n == VERSION_FILE || manifest_version(n).is_some()
        })
        .await
    {
        Ok(l) => l,
        Err(source) => {
            r.unread.push(ArchivedError::List {
                table: r.table.to_string(),
                path: dir.to_string(),
                source,
            });
            return;
        }
    };
    let names: Vec<&str> = listing.files.iter().map(|f| f.file_name()).collect();
    let listed_max = names.iter().filter_map(|n| manifest_version(n)).max();
    let Ok(version_path) = dir.join(VERSION_FILE) else {
        return;
    };
    let version = if names.contains(&VERSION_FILE) {
        let Some(bytes) = read_small(r, &version_path).await else {
            return;
        };
        match std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
        {
            Some(v) => Some(v),
            None => {
                r.corrupt(&version_path, "not a manifest version number");
                return;
            }
        }
    } else {
        listed_max
    };
    let Some(version) = version else {
        // No manifest yet: nothing was archived (Hudi's empty manifest).
        return;
    };
    let Ok(manifest_path) = dir.join(&format!("{MANIFEST_PREFIX}{version}")) else {
        return;
    };
    let Some(bytes) = read_small(r, &manifest_path).await else {
        return;
    };
    let manifest: Manifest = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            r.corrupt(&manifest_path, format!("not a manifest: {e}"));
            return;
        }
    };
    for entry in manifest.files {
        let name = entry.file_name;
        let path = match dir.join(&name) {
            Ok(p) if is_data_file(&name) && p.parent() == *dir => p,
            _ => {
                r.corrupt(
                    &manifest_path,
                    format!("names `{name}`, not an LSM timeline file"),
                );
                continue;
            }
        };
        let Some(bytes) = r.read(&path).await else {
            continue;
        };
        match lsm_parquet::read_lsm_file(bytes) {
            Ok(entries) => r.add(&path, entries),
            Err(reason) => r.corrupt(&path, reason),
        }
    }
}

async fn read_small(r: &mut Reading<'_>, path: &RelPath) -> Option<bytes::Bytes> {
    match r.storage.get_capped(path, MAX_MANIFEST).await {
        Ok(b) => Some(b),
        Err(source) => {
            r.unread.push(ArchivedError::Read {
                table: r.table.to_string(),
                path: path.to_string(),
                source,
            });
            None
        }
    }
}
