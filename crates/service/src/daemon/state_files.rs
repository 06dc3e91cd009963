//! The daemon's small per-table state files in `state_dir` (writer evidence, suspected EAGER
//! writes, its own changes; [`TableDocs`]): one JSON document per table, `<table>.json`, written atomically and read back with a
//! size cap. An unreadable file is skipped with a warning (each caller says what that means for
//! the table); only a folder that cannot be listed is an error.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex as StdMutex;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// One folder of per-table documents (`<dir>/<table>.json`), in memory and on disk: read back
/// at start with [`load_dir`], replaced whole with [`write_atomically`]. What a document means,
/// and whether it belongs to the table now registered under that name, is its owner's business.
#[derive(Debug)]
pub struct TableDocs<T> {
    dir: PathBuf,
    docs: StdMutex<BTreeMap<String, T>>,
    /// Serializes the writes of the files.
    write: tokio::sync::Mutex<()>,
}

impl<T: Serialize + DeserializeOwned + Clone> TableDocs<T> {
    /// Every document in `dir` (see [`load_dir`] for what is skipped).
    pub fn load(dir: &Path, max_bytes: u64, what: &str, consequence: &str) -> anyhow::Result<Self> {
        Ok(Self {
            dir: dir.to_path_buf(),
            docs: StdMutex::new(load_dir(dir, max_bytes, what, consequence)?),
            write: tokio::sync::Mutex::new(()),
        })
    }

    /// The document of table `name`, if any.
    pub fn get(&self, name: &str) -> Option<T> {
        self.docs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Replace the document of table `name`: on disk first, in memory once it is durable.
    pub async fn put(&self, name: &str, doc: T) -> anyhow::Result<()> {
        let _serial = self.write.lock().await;
        let dir = self.dir.clone();
        let file = format!("{name}.json");
        let bytes = serde_json::to_vec_pretty(&doc)?;
        tokio::task::spawn_blocking(move || write_atomically(&dir, &file, &bytes))
            .await
            .context("the state writer task failed")??;
        self.docs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), doc);
        Ok(())
    }
}

/// Every `<table>.json` document in `dir` (none when `dir` does not exist), by table name.
/// Files over `max_bytes` or that do not parse as `T` are skipped with a warning that names the
/// file and says `consequence`; temporary files of an interrupted write are ignored.
pub fn load_dir<T: DeserializeOwned>(
    dir: &Path,
    max_bytes: u64,
    what: &str,
    consequence: &str,
) -> anyhow::Result<BTreeMap<String, T>> {
    let mut out = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
        else {
            continue; // temporary files of an interrupted write, and strangers
        };
        match read_capped(&path, max_bytes, what) {
            Ok(doc) => {
                out.insert(name.to_string(), doc);
            }
            Err(e) => tracing::warn!(
                file = %path.display(),
                error = %format!("{e:#}"),
                "skipping an unreadable {what} file: {consequence}"
            ),
        }
    }
    Ok(out)
}

/// One document, read with a size cap.
fn read_capped<T: DeserializeOwned>(path: &Path, max_bytes: u64, what: &str) -> anyhow::Result<T> {
    let file = std::fs::File::open(path).context("cannot open it")?;
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .context("cannot read it")?;
    if bytes.len() as u64 > max_bytes {
        anyhow::bail!("it is over {max_bytes} bytes, not a {what} file");
    }
    serde_json::from_slice(&bytes).with_context(|| format!("it is not a {what} file"))
}

/// Write `dir/file` so that a crash leaves the old file or the new one, never a mix: a temporary
/// file is written and fsynced, renamed over the target, and the folder fsynced.
pub fn write_atomically(dir: &Path, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let target = dir.join(file);
    let tmp = dir.join(format!(".{file}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, &target)
        .with_context(|| format!("cannot replace {}", target.display()))?;
    // The rename is durable once the folder is.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))?;
    Ok(())
}
