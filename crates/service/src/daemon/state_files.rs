//! The daemon's small per-table state files in `state_dir` (writer evidence, its own changes;
//! [`TableDocs`]): one JSON document per table, `<table>.json`, written atomically and read back with a
//! size cap. An unreadable file is skipped with a warning (each caller says what that means for
//! the table); only a folder that cannot be listed is an error.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex as StdMutex;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A table's state file that could not be read at start: skipped, with what that means (never
/// more than leaving more alone). Shown in the table's status, counted in
/// `hudi_keeper_state_files_unreadable`, and logged with its full path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreadableStateFile {
    /// The file below `state_dir`, e.g. `writer-evidence/t.json`.
    pub file: String,
    /// Why it could not be read.
    pub error: String,
    /// What that means for the table.
    pub consequence: String,
}

/// One folder of per-table documents (`<dir>/<table>.json`), in memory and on disk: read back
/// at start with [`load_dir`], replaced whole with [`write_atomically`]. What a document means,
/// and whether it belongs to the table now registered under that name, is its owner's business.
#[derive(Debug)]
pub struct TableDocs<T> {
    dir: PathBuf,
    docs: StdMutex<BTreeMap<String, T>>,
    /// The documents that could not be read at start, by table name.
    unreadable: BTreeMap<String, UnreadableStateFile>,
    /// Serializes the writes of the files.
    write: tokio::sync::Mutex<()>,
}

impl<T: Serialize + DeserializeOwned + Clone> TableDocs<T> {
    /// Every document in `dir` (see [`load_dir`] for what is skipped).
    pub fn load(dir: &Path, max_bytes: u64, what: &str, consequence: &str) -> anyhow::Result<Self> {
        let (docs, unreadable) = load_dir(dir, max_bytes, what, consequence)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            docs: StdMutex::new(docs),
            unreadable,
            write: tokio::sync::Mutex::new(()),
        })
    }

    /// Why the document of table `name` could not be read at start, if it could not.
    pub fn unreadable(&self, name: &str) -> Option<&UnreadableStateFile> {
        self.unreadable.get(name)
    }

    /// How many documents could not be read at start.
    pub fn unreadable_count(&self) -> usize {
        self.unreadable.len()
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

/// The documents read, and those that could not be, by table name.
type Loaded<T> = (BTreeMap<String, T>, BTreeMap<String, UnreadableStateFile>);

/// Every `<table>.json` document in `dir` (none when `dir` does not exist), by table name.
/// Files over `max_bytes`, that cannot be read (a folder in their place, no permission) or that
/// do not parse as `T` are skipped with a warning that names the file and says `consequence`,
/// and returned apart; temporary files of an interrupted write are ignored.
pub fn load_dir<T: DeserializeOwned>(
    dir: &Path,
    max_bytes: u64,
    what: &str,
    consequence: &str,
) -> anyhow::Result<Loaded<T>> {
    let mut out = BTreeMap::new();
    let mut unreadable = BTreeMap::new();
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((out, unreadable)),
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
            Err(e) => {
                let error = format!("{e:#}");
                tracing::warn!(
                    file = %path.display(),
                    error = %error,
                    "skipping an unreadable {what} file: {consequence}"
                );
                unreadable.insert(
                    name.to_string(),
                    UnreadableStateFile {
                        file: format!("{folder}/{name}.json"),
                        error,
                        consequence: consequence.to_string(),
                    },
                );
            }
        }
    }
    Ok((out, unreadable))
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

/// Create `dir` and the folders above it that are missing, each readable by the daemon's user
/// only (0700): they hold which tables exist, where, and with which storage options. Folders
/// that exist keep their mode (the operator's).
pub fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut create = std::fs::DirBuilder::new();
    create.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut create, 0o700);
    create
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// Write `dir/file` so that a crash leaves the old file or the new one, never a mix: a temporary
/// file is written and fsynced, renamed over the target, and the folder fsynced. The file is
/// readable by the daemon's user only (0600), whatever the umask or an older file's mode, and
/// `dir` is made private if it is made ([`create_private_dir`]).
pub fn write_atomically(dir: &Path, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
    create_private_dir(dir)?;
    let target = dir.join(file);
    let tmp = dir.join(format!(".{file}.tmp"));
    let written = (|| {
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
        let mut f = open.open(&tmp)?;
        // A temporary file left by an interrupted write keeps its mode when opened again.
        #[cfg(unix)]
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_all()
    })()
    .with_context(|| format!("cannot write {}", tmp.display()))
    .and_then(|()| {
        std::fs::rename(&tmp, &target)
            .with_context(|| format!("cannot replace {}", target.display()))
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    sync_dir(dir)
}

/// Remove `path` (gone already is fine) so that a crash does not bring it back: the folder is
/// fsynced after.
pub fn remove_durably(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => sync_dir(dir),
        None => sync_dir(Path::new(".")),
    }
}

/// A rename or removal in `dir` is durable once the folder is.
fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn state_files_are_private_and_so_are_the_folders_made_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("state/writer-evidence");
        write_atomically(&folder, "t.json", b"{}").unwrap();
        assert_eq!(mode(&folder.join("t.json")), 0o600);
        assert_eq!(mode(&folder), 0o700);
        assert_eq!(mode(&dir.path().join("state")), 0o700);
        // A file an older version left readable by all, and a temporary file of a write it
        // did not finish: replaced by private ones.
        let old = folder.join("u.json");
        std::fs::write(&old, b"{}").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let tmp = folder.join(".u.json.tmp");
        std::fs::write(&tmp, b"half").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomically(&folder, "u.json", b"{\"a\": 1}").unwrap();
        assert_eq!(mode(&old), 0o600);
        assert_eq!(std::fs::read(&old).unwrap(), b"{\"a\": 1}");
        assert!(!tmp.exists());
        // A folder that was there already keeps its mode: it is the operator's.
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o750)).unwrap();
        write_atomically(&theirs, "t.json", b"{}").unwrap();
        assert_eq!(mode(&theirs), 0o750);
    }
}
