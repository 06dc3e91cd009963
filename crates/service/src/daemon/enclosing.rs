//! Whether a folder the API is asked to register lies inside a table's base path, registered or
//! not: a table's partition folder registered as a table of its own would be polled as one, and
//! would keep the real table from being registered (it contains a registered table). Each folder
//! from the allowed prefix down to the URI's parent ([`Config::enclosing_folders`]) is looked at
//! for `.hoodie/hoodie.properties`: one stat or HEAD each, so the cost is bounded by the URI's
//! depth below the prefix, and nothing outside the prefixes is ever read.
//!
//! When the store does not answer, the registration is refused (it can be sent again): the
//! storage options a caller may give (a region, a timeout) must not be a way past the check.
//!
//! [`Config::enclosing_folders`]: super::config::Config::enclosing_folders

use std::path::Path;
use std::time::Duration;

use hudi_keeper_core::storage::{RelPath, Storage, StorageOptions, StoreCache};

use super::config::EnclosingFolders;

/// The longest the look for an enclosing table may take; then the registration is refused.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The file a table's base path holds.
const PROPERTIES: &str = ".hoodie/hoodie.properties";

/// Why a registration cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enclosed {
    /// The base path of the table the folder lies in.
    Inside(String),
    /// It could not be told (the store did not answer, or not within [`PROBE_TIMEOUT`]).
    Unknown(String),
}

/// Whether a folder of `folders` is a table's base path ([`Enclosed::Inside`] names the
/// outermost), the store opened with `options` (through `stores`, when given).
pub async fn find(
    folders: EnclosingFolders,
    options: &StorageOptions,
    stores: Option<&StoreCache>,
) -> Result<(), Enclosed> {
    let look = async {
        match folders {
            EnclosingFolders::Local(folders) => {
                tokio::task::spawn_blocking(move || find_local(&folders))
                    .await
                    .unwrap_or_else(|e| {
                        Err(Enclosed::Unknown(format!("the look ended abnormally: {e}")))
                    })
            }
            EnclosingFolders::Store { store, folders } => {
                find_in_store(&store, &folders, options, stores).await
            }
        }
    };
    match tokio::time::timeout(PROBE_TIMEOUT, look).await {
        Ok(found) => found,
        Err(_) => Err(Enclosed::Unknown(format!(
            "the store did not answer within {} s",
            PROBE_TIMEOUT.as_secs()
        ))),
    }
}

fn find_local(folders: &[std::path::PathBuf]) -> Result<(), Enclosed> {
    for folder in folders {
        let file = folder.join(PROPERTIES);
        match std::fs::metadata(&file) {
            Ok(_) => return Err(Enclosed::Inside(folder.display().to_string())),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::NotADirectory
                        | std::io::ErrorKind::InvalidFilename
                ) => {} // no such folder, or a file in its place, or a name too long for one
            Err(e) => {
                return Err(Enclosed::Unknown(format!(
                    "cannot read {}: {e}",
                    shown(folder, &file)
                )))
            }
        }
    }
    Ok(())
}

/// `file` for a message: below `folder`'s name, as the caller knows it (the folder is the
/// caller's URI, or a folder above it).
fn shown(folder: &Path, file: &Path) -> String {
    file.strip_prefix(folder)
        .map(|rel| format!("{}/{}", folder.display(), rel.display()))
        .unwrap_or_else(|_| file.display().to_string())
}

async fn find_in_store(
    store: &str,
    folders: &[String],
    options: &StorageOptions,
    stores: Option<&StoreCache>,
) -> Result<(), Enclosed> {
    if folders.is_empty() {
        return Ok(());
    }
    let storage =
        Storage::open_with(store, options, stores).map_err(|e| Enclosed::Unknown(e.to_string()))?;
    for folder in folders {
        let rel = if folder.is_empty() {
            PROPERTIES.to_string()
        } else {
            format!("{folder}/{PROPERTIES}")
        };
        let rel = RelPath::parse(&rel).map_err(|e| Enclosed::Unknown(e.to_string()))?;
        match storage.head(&rel).await {
            Ok(Some(_)) => {
                return Err(Enclosed::Inside(
                    format!("{store}/{folder}")
                        .trim_end_matches('/')
                        .to_string(),
                ))
            }
            Ok(None) => {}
            Err(e) => return Err(Enclosed::Unknown(e.to_string())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[tokio::test]
    async fn a_table_in_a_folder_above_is_found_in_a_store() {
        let options = StorageOptions::default();
        let stores = StoreCache::new();
        let table = Storage::open("memory://enclosing-probe/tables/t", &options).unwrap();
        table
            .put(
                &RelPath::parse(PROPERTIES).unwrap(),
                Bytes::from_static(b"x"),
            )
            .await
            .unwrap();
        let folders = |f: &[&str]| EnclosingFolders::Store {
            store: "memory://enclosing-probe".into(),
            folders: f.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(
            find(
                folders(&["", "tables", "tables/t", "tables/t/p"]),
                &options,
                None
            )
            .await,
            Err(Enclosed::Inside("memory://enclosing-probe/tables/t".into()))
        );
        // Beside it, and the table itself (its own folder is not looked at).
        assert_eq!(
            find(
                folders(&["", "tables", "tables/u"]),
                &options,
                Some(&stores)
            )
            .await,
            Ok(())
        );
        assert_eq!(
            find(folders(&["", "tables"]), &options, Some(&stores)).await,
            Ok(())
        );
    }

    #[tokio::test]
    async fn a_local_folder_that_cannot_be_read_is_not_taken_for_no_table() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        std::fs::create_dir_all(t.join(".hoodie")).unwrap();
        std::fs::write(t.join(PROPERTIES), b"x").unwrap();
        let local =
            |f: &[&Path]| EnclosingFolders::Local(f.iter().map(|p| p.to_path_buf()).collect());
        let stores = StoreCache::new();
        let options = StorageOptions::default();
        assert_eq!(
            find(local(&[dir.path(), &t]), &options, Some(&stores)).await,
            Err(Enclosed::Inside(t.display().to_string()))
        );
        // A file where a folder would be is no table.
        std::fs::write(dir.path().join("f"), b"").unwrap();
        assert_eq!(
            find(local(&[&dir.path().join("f")]), &options, Some(&stores)).await,
            Ok(())
        );
        // A folder that cannot be read (root reads any: nothing to tell then).
        if running_as_root() {
            return;
        }
        let locked = dir.path().join("locked");
        std::fs::create_dir_all(locked.join("x")).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let got = find(local(&[&locked.join("x")]), &options, Some(&stores)).await;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(got, Err(Enclosed::Unknown(_))), "{got:?}");
    }

    /// Whether the tests run as root (who reads folders of mode 0).
    fn running_as_root() -> bool {
        std::process::Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout.starts_with(b"0"))
            .unwrap_or(false)
    }
}
