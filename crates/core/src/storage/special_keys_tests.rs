//! Keys as Hudi writes them (url-encoded partition values, `~`, `#`, brackets, spaces, non-ASCII):
//! every request addresses exactly the key a listing returned, never a re-encoded one.

use super::list::LOCAL_LIST_CHUNK;
use super::*;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;

/// Partition folders as Hudi names them, one per character class object_store would
/// percent-encode (or that URLs treat specially).
const PARTITIONS: [&str; 14] = [
    "3%3A0",
    "dt=2024-01-01 10%3A00",
    "a%25b",
    "1~0",
    "x#1",
    "[p]",
    "with space",
    "é",
    "日本",
    "k=v+w",
    "dt=10:00",
    "{b}^|`\"<>*?",
    "q?x=1&y",
    "%2e",
];

fn rel(s: &str) -> RelPath {
    RelPath::parse(s).unwrap()
}

fn keys() -> Vec<String> {
    PARTITIONS
        .iter()
        .map(|p| format!("{p}/fg-0_0-1-1_20240101000000000.parquet"))
        .collect()
}

/// The raw keys below `root` in `store`, relative to `root`, as the store lists them.
async fn raw_keys(store: &dyn ObjectStore, root: &str) -> Vec<String> {
    let prefix = Path::parse(root).unwrap();
    let mut out: Vec<String> = store
        .list(Some(&prefix))
        .map_ok(|m| {
            m.location.as_ref()[root.len()..]
                .trim_start_matches('/')
                .to_string()
        })
        .try_collect()
        .await
        .unwrap();
    out.sort();
    out
}

async fn round_trip(
    s: &Storage,
    raw: impl Fn() -> futures::future::BoxFuture<'static, Vec<String>>,
) {
    // Written through the seam: the store holds exactly the key asked for.
    for k in keys() {
        s.put(&rel(&k), Bytes::from(k.clone())).await.unwrap();
    }
    let mut want = keys();
    want.sort();
    assert_eq!(raw().await, want, "the store holds the exact keys");
    // Listed keys are the raw keys, and each is read, headed and deleted by it.
    let mut listed: Vec<String> = s
        .list(&RelPath::root())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.path.to_string())
        .collect();
    listed.sort();
    assert_eq!(listed, want);
    let mut dirs = s.list_dir(&RelPath::root()).await.unwrap().dirs;
    dirs.sort();
    let mut parts: Vec<String> = PARTITIONS.iter().map(|p| p.to_string()).collect();
    parts.sort();
    assert_eq!(dirs, parts);
    for d in &dirs {
        let inside = s.list_dir(&rel(d)).await.unwrap();
        assert_eq!(inside.files.len(), 1, "{d}");
        let key = inside.files[0].path.clone();
        assert_eq!(s.get(&key).await.unwrap(), Bytes::from(key.to_string()));
        assert!(s.head(&key).await.unwrap().is_some(), "{key}");
        assert!(s.get_opt(&key).await.unwrap().is_some(), "{key}");
    }
    // One listed key deleted on its own, by the exact key it was listed as.
    let first = s.list_dir(&rel(PARTITIONS[0])).await.unwrap().files[0]
        .path
        .clone();
    s.delete(&first).await.unwrap();
    assert!(s.head(&first).await.unwrap().is_none());
    assert!(!raw().await.contains(&first.to_string()));
    // The rest in bulk: every delete confirmed, and the store really is empty.
    let rest: Vec<RelPath> = s
        .list(&RelPath::root())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.path)
        .collect();
    assert_eq!(rest.len(), PARTITIONS.len() - 1);
    for (p, r) in s.delete_many_with(rest, 4, || {}).await {
        r.unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    assert_eq!(raw().await, Vec::<String>::new());
    // Create-if-absent and conditional writes address the same keys.
    let k = rel(&keys()[1]);
    s.put_if_absent(&k, Bytes::from_static(b"1")).await.unwrap();
    assert!(matches!(
        s.put_if_absent(&k, Bytes::from_static(b"2"))
            .await
            .unwrap_err(),
        StorageError::AlreadyExists { .. }
    ));
    assert_eq!(raw().await, vec![keys()[1].clone()]);
    s.delete(&k).await.unwrap();
}

#[tokio::test]
async fn in_memory_keys_round_trip_exactly_as_listed() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let s = Storage::from_store(Arc::clone(&store), "wh/t", "memory://x/wh/t");
    let raw = move || {
        let store = Arc::clone(&store);
        Box::pin(async move { raw_keys(store.as_ref(), "wh/t").await })
            as futures::future::BoxFuture<'static, Vec<String>>
    };
    round_trip(&s, raw).await;
}

fn local_files(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        // The shared local store removes folders a delete left empty, this one too.
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn local_keys_round_trip_exactly_as_listed_in_a_folder_named_with_a_space_and_percent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("my table %3A~#1");
    std::fs::create_dir_all(&dir).unwrap();
    for opened in [
        Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap(),
        Storage::open_with(
            dir.to_str().unwrap(),
            &StorageOptions::default(),
            Some(&StoreCache::new()),
        )
        .unwrap(),
    ] {
        let d = dir.clone();
        let raw = move || {
            let d = d.clone();
            Box::pin(async move { local_files(&d) })
                as futures::future::BoxFuture<'static, Vec<String>>
        };
        round_trip(&opened, raw).await;
    }
}

#[tokio::test]
async fn files_written_by_another_writer_are_found_read_and_deleted_by_their_listed_key() {
    // Hudi wrote these (not through the seam): the listing returns them raw, and the
    // seam must address that same file.
    let tmp = tempfile::tempdir().unwrap();
    for k in keys() {
        let path = tmp.path().join(&k);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, k.as_bytes()).unwrap();
    }
    let store: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(tmp.path()).unwrap());
    let s = Storage::from_store(store, "", "file:///t");
    let listed = s.list(&RelPath::root()).await.unwrap();
    assert_eq!(listed.len(), PARTITIONS.len());
    for m in &listed {
        assert_eq!(
            s.get(&m.path).await.unwrap(),
            Bytes::from(m.path.to_string())
        );
    }
    let paths: Vec<RelPath> = listed.into_iter().map(|m| m.path).collect();
    for (p, r) in s.delete_many_with(paths, 8, || {}).await {
        r.unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    assert_eq!(local_files(tmp.path()), Vec::<String>::new());
}

/// The local one-level listing (directory entries, `stat` for kept files only) names what
/// object_store's own walk of the same folder names, special names, links and object_store's
/// staged uploads included, and keeps only what the filter accepts.
#[tokio::test]
async fn the_local_one_level_listing_names_what_object_stores_walk_names() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let mut names: Vec<String> = PARTITIONS.iter().map(|p| p.to_string()).collect();
    names.push("g#x".into());
    for (i, folder) in PARTITIONS.iter().enumerate() {
        let dir = base.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        for n in &names {
            std::fs::write(dir.join(format!("{n}_{i}.parquet")), n.as_bytes()).unwrap();
        }
        std::fs::create_dir_all(dir.join("sub").join("deeper")).unwrap();
        std::fs::write(dir.join("sub").join("deeper").join("x"), b"x").unwrap();
    }
    let first = base.join(PARTITIONS[0]);
    std::os::unix::fs::symlink(first.join("1~0_0.parquet"), first.join("link-to-file")).unwrap();
    std::os::unix::fs::symlink(base.join(PARTITIONS[1]), first.join("link-to-dir")).unwrap();
    std::os::unix::fs::symlink(first.join("gone"), first.join("dangling")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(first.join("socket")).unwrap();
    // object_store's staged upload of `h_0.parquet`: never listed
    std::fs::write(first.join("h_0.parquet#12"), b"h").unwrap();
    std::fs::write(base.join("top.parquet"), b"t").unwrap();

    let fast = Storage::open(base.to_str().unwrap(), &StorageOptions::default()).unwrap();
    assert!(fast.local_dir().is_some());
    let walk = Storage::from_store(
        Arc::new(LocalFileSystem::new_with_prefix(base).unwrap()),
        "",
        "file:///walk",
    );
    let mut folders: Vec<RelPath> = PARTITIONS.iter().map(|p| rel(p)).collect();
    folders.push(RelPath::root());
    folders.push(rel("no such folder"));
    for folder in &folders {
        for only_parquet in [false, true] {
            let keep = |p: &RelPath| !only_parquet || p.file_name().ends_with(".parquet");
            let a = fast.list_dir_filtered(folder, keep).await.unwrap();
            let b = walk.list_dir_filtered(folder, keep).await.unwrap();
            let names = |l: &DirListing| {
                let mut v: Vec<(String, u64)> = l
                    .files
                    .iter()
                    .map(|f| (f.path.to_string(), f.size))
                    .collect();
                v.sort();
                v
            };
            assert_eq!(names(&a), names(&b), "{folder}");
            assert_eq!(a.dirs, b.dirs, "{folder}");
            if folder.as_str() == PARTITIONS[0] {
                let listed: Vec<&str> = a.files.iter().map(|f| f.file_name()).collect();
                assert!(!listed.contains(&"h_0.parquet#12"), "{listed:?}");
                assert!(listed.contains(&"g#x_0.parquet"), "{listed:?}");
                assert_eq!(
                    listed.contains(&"link-to-file"),
                    !only_parquet,
                    "{listed:?}"
                );
                assert!(!listed.contains(&"dangling") && !listed.contains(&"socket"));
                assert!(a.dirs.contains(&"link-to-dir".to_string()), "{:?}", a.dirs);
            }
        }
    }
    let kept = fast
        .list_dir_filtered(&rel(PARTITIONS[2]), |p| p.file_name().starts_with("[p]"))
        .await
        .unwrap();
    assert_eq!(kept.files.len(), 1);
    assert_eq!(
        kept.files[0].path.as_str(),
        format!("{}/[p]_2.parquet", PARTITIONS[2])
    );
    assert_eq!(kept.files[0].size, 3);
    // Every key it lists is the key the seam reads and deletes.
    let key = kept.files[0].path.clone();
    assert_eq!(fast.get(&key).await.unwrap(), Bytes::from_static(b"[p]"));
    fast.delete(&key).await.unwrap();
    assert!(!base.join(PARTITIONS[2]).join("[p]_2.parquet").exists());
}

#[tokio::test]
async fn a_local_folder_listing_more_entries_than_one_chunk_lists_them_all() {
    let tmp = tempfile::tempdir().unwrap();
    let n = LOCAL_LIST_CHUNK * 2 + 7;
    for i in 0..n {
        std::fs::write(tmp.path().join(format!("f{i:05}")), b"").unwrap();
    }
    let s = Storage::open(tmp.path().to_str().unwrap(), &StorageOptions::default()).unwrap();
    let all = s
        .list_dir_filtered(&RelPath::root(), |_| true)
        .await
        .unwrap();
    assert_eq!(all.files.len(), n);
    let some = s
        .list_dir_filtered(&RelPath::root(), |p| p.file_name().ends_with('3'))
        .await
        .unwrap();
    assert_eq!(some.files.len(), (0..n).filter(|i| i % 10 == 3).count());
}

#[tokio::test]
async fn a_child_storage_below_a_special_folder_addresses_its_keys_exactly() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let s = Storage::from_store(Arc::clone(&store), "wh/a%3Ab", "memory://x/wh/a%3Ab");
    let child = s.child(&rel("x#1/[p]"));
    child
        .put(&rel("1~0/f"), Bytes::from_static(b"c"))
        .await
        .unwrap();
    assert_eq!(
        raw_keys(store.as_ref(), "wh").await,
        vec!["a%3Ab/x#1/[p]/1~0/f"]
    );
    assert_eq!(
        s.list(&RelPath::root()).await.unwrap()[0].path.as_str(),
        "x#1/[p]/1~0/f"
    );
}
