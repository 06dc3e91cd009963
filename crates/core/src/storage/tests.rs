//! Unit tests of the storage seam.

use super::*;
use bytes::Bytes;
use object_store::memory::InMemory;

/// A local table's empty folder goes (a writer that died before its first marker leaves its
/// marker folder so); one that is not empty, or missing, is left; on other stores, nothing.
#[tokio::test]
async fn an_empty_local_folder_is_removed_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("my table %20");
    std::fs::create_dir_all(dir.join(".hoodie/.temp/1/p1/deeper")).unwrap();
    std::fs::create_dir_all(dir.join(".hoodie/.temp/2")).unwrap();
    std::fs::write(dir.join(".hoodie/.temp/2/m.marker.CREATE"), b"").unwrap();
    let s = Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap();
    s.remove_empty_dir(&p(".hoodie/.temp/1")).await.unwrap();
    s.remove_empty_dir(&p(".hoodie/.temp/2")).await.unwrap();
    s.remove_empty_dir(&p(".hoodie/.temp/3")).await.unwrap();
    assert!(!dir.join(".hoodie/.temp/1").exists());
    assert!(dir.join(".hoodie/.temp/2/m.marker.CREATE").exists());
    // Through a child storage (the metadata table's) too.
    std::fs::create_dir_all(dir.join(".hoodie/metadata/.hoodie/.temp/4")).unwrap();
    s.child(&p(".hoodie/metadata"))
        .remove_empty_dir(&p(".hoodie/.temp/4"))
        .await
        .unwrap();
    assert!(!dir.join(".hoodie/metadata/.hoodie/.temp/4").exists());
    mem().remove_empty_dir(&p(".hoodie/.temp/1")).await.unwrap();
}

/// A marker folder that is a symbolic link, or lies below one, is not followed: the empty
/// folders it points at (outside the table) stay, and so does the link. A folder below a
/// link is refused, as every mutation through a link is.
#[cfg(unix)]
#[tokio::test]
async fn a_linked_marker_folder_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(outside.join("empty/deeper")).unwrap();
    let dir = tmp.path().join("t");
    std::fs::create_dir_all(dir.join(".hoodie/.temp")).unwrap();
    std::os::unix::fs::symlink(outside.join("empty"), dir.join(".hoodie/.temp/1")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join(".hoodie/.temp/2")).unwrap();
    let s = Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap();
    s.remove_empty_dir(&p(".hoodie/.temp/1")).await.unwrap();
    let err = s
        .remove_empty_dir(&p(".hoodie/.temp/2/empty"))
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::SymbolicLink { .. }), "{err}");
    assert!(outside.join("empty/deeper").is_dir());
    assert!(std::fs::symlink_metadata(dir.join(".hoodie/.temp/1")).is_ok());
}

/// Every mutation of a local table looks at its way first: a folder on it that is a
/// symbolic link refuses the request (naming the link) before it reaches the store, and so
/// does a table folder swapped for a link after it was opened; the files the link leads to
/// stay. Reads go on; the link itself (the changed path) may be deleted, which removes the
/// link only.
#[cfg(unix)]
#[tokio::test]
async fn no_mutation_of_a_local_table_goes_through_a_symbolic_link() {
    let tmp = tempfile::tempdir().unwrap();
    let w = std::fs::canonicalize(tmp.path()).unwrap();
    let outside = w.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("f_1.parquet"), b"outside").unwrap();
    let dir = w.join("t");
    std::fs::create_dir_all(dir.join("p1")).unwrap();
    std::fs::write(dir.join("p1/g_1.parquet"), b"inside").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("p2")).unwrap();
    std::os::unix::fs::symlink(outside.join("f_1.parquet"), dir.join("p1/leaf")).unwrap();
    for cached in [false, true] {
        let cache = StoreCache::new();
        let s = Storage::open_with(
            dir.to_str().unwrap(),
            &StorageOptions::default(),
            cached.then_some(&cache),
        )
        .unwrap();
        let f = p("p2/f_1.parquet");
        assert_eq!(s.get(&f).await.unwrap(), Bytes::from_static(b"outside"));
        let link = |e: StorageError| match e {
            StorageError::SymbolicLink { link, path, .. } => (link, path),
            other => panic!("not a link refusal: {other}"),
        };
        let want = (dir.join("p2").display().to_string(), f.to_string());
        assert_eq!(link(s.delete(&f).await.unwrap_err()), want);
        let put = s.put(&f, Bytes::from_static(b"x")).await.unwrap_err();
        assert!(put.to_string().contains("symbolic link"), "{put}");
        assert!(put.is_link_refusal());
        let created = s.put_if_absent(&p("p2/new"), Bytes::new()).await;
        assert_eq!(link(created.unwrap_err()).0, want.0);
        let many = s
            .delete_many_with(vec![f.clone(), p("p1/g_1.parquet")], 4, || {})
            .await;
        for (path, r) in many {
            match path.as_str() {
                "p2/f_1.parquet" => assert_eq!(link(r.unwrap_err()), want),
                _ => r.unwrap(),
            }
        }
        assert!(!dir.join("p1/g_1.parquet").exists());
        std::fs::write(dir.join("p1/g_1.parquet"), b"inside").unwrap();
        assert_eq!(
            std::fs::read(outside.join("f_1.parquet")).unwrap(),
            b"outside"
        );
        s.check_tree(OpKind::Delete, &p("p1")).await.unwrap_err();
        s.check_tree(OpKind::Delete, &p("p2")).await.unwrap_err();
        // Below the table's child (the metadata table's) storage too.
        let err = s
            .child(&p("p2"))
            .delete(&p("f_1.parquet"))
            .await
            .unwrap_err();
        assert_eq!(link(err).0, want.0);
    }
    // The leaf itself may be a link: deleting it removes the link, not what it points to.
    let s = Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap();
    s.delete(&p("p1/leaf")).await.unwrap();
    assert!(std::fs::symlink_metadata(dir.join("p1/leaf")).is_err());
    assert_eq!(
        std::fs::read(outside.join("f_1.parquet")).unwrap(),
        b"outside"
    );
    s.check_tree(OpKind::Delete, &p("p1")).await.unwrap();

    // The table folder swapped for a link after it was opened: every mutation refused.
    std::fs::create_dir_all(outside.join("p1")).unwrap();
    std::fs::write(outside.join("p1/g_1.parquet"), b"outside").unwrap();
    std::fs::rename(&dir, w.join("t.orig")).unwrap();
    std::os::unix::fs::symlink(&outside, &dir).unwrap();
    let g = p("p1/g_1.parquet");
    let moved = |e: StorageError| match e {
        StorageError::TableFolderMoved { folder, now, .. } => (folder, now),
        other => panic!("not a moved table folder: {other}"),
    };
    let (folder, now) = moved(s.delete(&g).await.unwrap_err());
    assert_eq!(folder, dir.display().to_string());
    assert!(now.contains("symbolic link"), "{now}");
    moved(s.put(&g, Bytes::new()).await.unwrap_err());
    moved(s.remove_empty_dir(&p("p1")).await.unwrap_err());
    for (_, r) in s.delete_many_with(vec![g.clone()], 4, || {}).await {
        moved(r.unwrap_err());
    }
    assert_eq!(
        std::fs::read(outside.join("p1/g_1.parquet")).unwrap(),
        b"outside"
    );
    // Object stores have no links: nothing to look at.
    let m = mem();
    assert!(!m.is_local());
    m.check_way(OpKind::Delete, &[g]).await.unwrap();
}

fn mem() -> Storage {
    Storage::from_store(
        Arc::new(InMemory::new()),
        "warehouse/t1",
        "memory://test/t1",
    )
}

fn p(s: &str) -> RelPath {
    RelPath::parse(s).unwrap()
}

#[tokio::test]
async fn a_filtered_one_level_listing_keeps_what_it_accepts_and_names_each_folder_once() {
    let s = mem();
    for k in [
        "a.parquet",
        "b.log",
        "p1/x.parquet",
        "p1/y/z",
        "p2/w",
        ".hoodie/t",
    ] {
        s.put(&p(k), Bytes::from_static(b"1")).await.unwrap();
    }
    let root = s
        .list_dir_filtered(&RelPath::root(), |f| f.file_name().ends_with(".parquet"))
        .await
        .unwrap();
    let files: Vec<String> = root.files.iter().map(|f| f.path.to_string()).collect();
    assert_eq!(files, vec!["a.parquet"]);
    assert_eq!(root.dirs, vec![".hoodie", "p1", "p2"]);
    let p1 = s.list_dir_filtered(&p("p1"), |_| true).await.unwrap();
    let files: Vec<String> = p1.files.iter().map(|f| f.path.to_string()).collect();
    assert_eq!(files, vec!["p1/x.parquet"]);
    assert_eq!(p1.dirs, vec!["y"]);
    let none = s.list_dir_filtered(&p("nothing"), |_| true).await.unwrap();
    assert!(none.files.is_empty() && none.dirs.is_empty());
}

#[tokio::test]
async fn put_if_absent_refuses_to_overwrite() {
    let s = mem();
    s.put_if_absent(&p("a/b"), Bytes::from_static(b"1"))
        .await
        .unwrap();
    let err = s
        .put_if_absent(&p("a/b"), Bytes::from_static(b"2"))
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::AlreadyExists { .. }), "{err}");
    assert_eq!(s.get(&p("a/b")).await.unwrap(), Bytes::from_static(b"1"));
}

#[tokio::test]
async fn missing_objects_read_as_none_and_delete_as_done() {
    let s = mem();
    assert!(s.get_opt(&p("nope")).await.unwrap().is_none());
    assert!(s.head(&p("nope")).await.unwrap().is_none());
    assert!(matches!(
        s.get(&p("nope")).await.unwrap_err(),
        StorageError::NotFound { .. }
    ));
    s.delete(&p("nope")).await.unwrap();
}

#[tokio::test]
async fn listings_are_relative_to_the_root_and_stay_inside_it() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let s = Storage::from_store(Arc::clone(&store), "wh/t1", "memory://x/t1");
    let other = Storage::from_store(store, "wh/t10", "memory://x/t10");
    other
        .put(&p(".hoodie/x"), Bytes::from_static(b"o"))
        .await
        .unwrap();
    s.put(&p(".hoodie/1.commit"), Bytes::from_static(b"c"))
        .await
        .unwrap();
    s.put(&p(".hoodie/.temp/1/p/f.marker.CREATE"), Bytes::new())
        .await
        .unwrap();
    let all = s.list(&RelPath::root()).await.unwrap();
    let mut names: Vec<_> = all.iter().map(|m| m.path.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        vec![".hoodie/.temp/1/p/f.marker.CREATE", ".hoodie/1.commit"]
    );
    let dir = s.list_dir(&p(".hoodie")).await.unwrap();
    assert_eq!(dir.files.len(), 1);
    assert_eq!(dir.files[0].file_name(), "1.commit");
    assert_eq!(dir.dirs, vec![".temp".to_string()]);
}

#[tokio::test]
async fn a_filtered_listing_keeps_only_the_accepted_entries_and_is_one_list_request() {
    let counter = Arc::new(testing::CountingInterceptor::new());
    let s = mem().with_interceptor(counter.clone());
    for k in [
        "p/a_1.parquet",
        "p/b_2.parquet",
        "p/q/c_1.parquet",
        "other/d_1.parquet",
    ] {
        s.put(&p(k), Bytes::new()).await.unwrap();
    }
    let mut judged = 0;
    let kept = s
        .list_filtered(&p("p"), |m| {
            judged += 1;
            m.file_name().ends_with("_1.parquet")
        })
        .await
        .unwrap();
    let names: Vec<&str> = kept.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(names, vec!["p/a_1.parquet", "p/q/c_1.parquet"]);
    assert_eq!(judged, 3, "every entry below the prefix is judged once");
    assert_eq!(counter.count(OpKind::List), 1);

    let fail = Arc::new(testing::FailNth::new(&[OpKind::List], 1));
    let s = s.with_interceptor(fail);
    let err = s.list_filtered(&p("p"), |_| true).await.unwrap_err();
    assert!(matches!(err, StorageError::Injected { .. }), "{err}");
}

fn too_large(err: &StorageError) -> Option<(u64, u64)> {
    match err {
        StorageError::TooLarge { size, max, .. } => Some((*size, *max)),
        _ => None,
    }
}

#[tokio::test]
async fn an_object_larger_than_the_cap_is_refused_before_its_body_is_read() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let plain = Storage::from_store(Arc::clone(&inner), "t", "memory://t");
    let path = p(".hoodie/1.rollback.requested");
    plain.put(&path, Bytes::from_static(b"plan")).await.unwrap();
    // The store reports the object as 10 GiB: refused on the size the store reported,
    // with the one GET (no extra request) and none of the body pulled.
    let huge = Arc::new(testing::SizeClaimingStore::new(inner, 10 << 30));
    let counter = Arc::new(testing::CountingInterceptor::new());
    let s = Storage::from_store(huge.clone(), "t", "memory://t").with_interceptor(counter.clone());
    let err = refused(s.get(&path).await);
    assert_eq!(too_large(&err), Some((10 << 30, DEFAULT_MAX_READ)), "{err}");
    assert!(
        err.to_string().contains(".hoodie/1.rollback.requested"),
        "{err}"
    );
    let err = refused(s.get_opt(&path).await.map(Option::unwrap_or_default));
    assert!(too_large(&err).is_some(), "{err}");
    let err = refused(
        s.get_versioned(&path, SMALL_FILE_MAX_READ)
            .await
            .map(|v| v.map(|(b, _)| b).unwrap_or_default()),
    );
    assert_eq!(
        too_large(&err),
        Some((10 << 30, SMALL_FILE_MAX_READ)),
        "{err}"
    );
    assert_eq!(huge.body_bytes_read(), 0, "no body byte was read");
    assert_eq!(counter.count(OpKind::Get), 3);
    assert_eq!(counter.total(), 3, "the size came with the GET");
}

#[tokio::test]
async fn a_body_longer_than_the_store_said_stops_at_the_cap() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let path = p(".hoodie/hoodie.properties");
    Storage::from_store(Arc::clone(&inner), "t", "memory://t")
        .put(&path, Bytes::from(vec![b'x'; 3000]))
        .await
        .unwrap();
    // Claims 10 bytes, sends 3,000.
    let lying = Arc::new(testing::SizeClaimingStore::new(inner, 10));
    let s = Storage::from_store(lying, "t", "memory://t");
    let err = refused(s.get_capped(&path, 1000).await);
    let (size, max) = too_large(&err).unwrap_or_else(|| panic!("{err}"));
    assert_eq!(max, 1000);
    assert!(size > 1000, "{err}");
    let err = refused(
        s.get_versioned(&path, 1000)
            .await
            .map(|v| v.map(|(b, _)| b).unwrap_or_default()),
    );
    assert!(too_large(&err).is_some(), "{err}");
}

/// The error of a read expected to fail, without printing bytes a wrong success returned.
fn refused(r: Result<impl AsRef<[u8]>, StorageError>) -> StorageError {
    match r {
        Ok(b) => panic!("read {} bytes instead of refusing", b.as_ref().len()),
        Err(e) => e,
    }
}

#[tokio::test]
async fn local_files_over_the_cap_are_refused_and_files_at_the_cap_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".hoodie");
    std::fs::create_dir_all(&dir).unwrap();
    // Sparse files: their size costs no disk.
    let sized = |name: &str, len: u64| {
        let f = std::fs::File::create(dir.join(name)).unwrap();
        f.set_len(len).unwrap();
    };
    sized("over", SMALL_FILE_MAX_READ + 1);
    sized("at", SMALL_FILE_MAX_READ);
    let counter = Arc::new(testing::CountingInterceptor::new());
    let s = Storage::open(tmp.path().to_str().unwrap(), &StorageOptions::default())
        .unwrap()
        .with_interceptor(counter.clone());
    let err = refused(s.get_capped(&p(".hoodie/over"), SMALL_FILE_MAX_READ).await);
    assert_eq!(
        too_large(&err),
        Some((SMALL_FILE_MAX_READ + 1, SMALL_FILE_MAX_READ)),
        "{err}"
    );
    let err = refused(
        s.get_opt_capped(&p(".hoodie/over"), SMALL_FILE_MAX_READ)
            .await
            .map(Option::unwrap_or_default),
    );
    assert!(too_large(&err).is_some(), "{err}");
    let err = refused(
        s.get_versioned(&p(".hoodie/over"), SMALL_FILE_MAX_READ)
            .await
            .map(|v| v.map(|(b, _)| b).unwrap_or_default()),
    );
    assert!(too_large(&err).is_some(), "{err}");
    let at = s
        .get_capped(&p(".hoodie/at"), SMALL_FILE_MAX_READ)
        .await
        .unwrap();
    assert_eq!(at.len() as u64, SMALL_FILE_MAX_READ);
    assert!(s
        .get_opt_capped(&p(".hoodie/missing"), 1)
        .await
        .unwrap()
        .is_none());
    assert_eq!(counter.total(), 5, "one GET each, nothing else");
}

#[tokio::test]
async fn child_storage_is_rooted_below_the_parent() {
    let s = mem();
    let md = s.child(&p(".hoodie/metadata"));
    md.put(&p(".hoodie/hoodie.properties"), Bytes::from_static(b"x"))
        .await
        .unwrap();
    assert!(s
        .head(&p(".hoodie/metadata/.hoodie/hoodie.properties"))
        .await
        .unwrap()
        .is_some());
    assert_eq!(md.uri(), "memory://test/t1/.hoodie/metadata");
}

/// A listing past `.hoodie` starts after the folder's last key: it lists what sorts after
/// it (partitions, `.hoodie_partition_metadata` of a non-partitioned table), never what is in
/// it or sorts before it; the offset it starts at is the folder and U+10FFFF, verbatim.
#[tokio::test]
async fn a_listing_past_a_folder_leaves_the_folder_and_what_sorts_before_it_out() {
    let store = std::sync::Arc::new(InMemory::new());
    let s = Storage::from_store(store.clone(), "t", "memory://t");
    for k in [
        "-early/1.parquet",
        ".hoodie/timeline/1.commit",
        ".hoodie/metadata/files/x.hfile",
        ".hoodie_partition_metadata",
        ".hoodie0/odd.parquet",
        "p1/a.parquet",
        "p2/deep/b.parquet",
    ] {
        s.put(&p(k), Bytes::from_static(b"x")).await.unwrap();
    }
    let listed = s
        .list_filtered_past(&RelPath::root(), ".hoodie", |_| true)
        .await
        .unwrap();
    let names: Vec<&str> = listed.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(
        names,
        [
            ".hoodie0/odd.parquet",
            ".hoodie_partition_metadata",
            "p1/a.parquet",
            "p2/deep/b.parquet"
        ]
    );
    let mut offset = object_store::path::Path::from("t");
    offset.extend([key_part(".hoodie"), key_part("\u{10FFFF}")]);
    assert_eq!(offset.as_ref(), "t/.hoodie/\u{10FFFF}", "not re-encoded");
    assert!(
        !s.lists_past_a_folder(),
        "an in-memory store reads and drops"
    );
}

/// A local table's storage keeps one copy of its folder's name: its URI, which its link checks
/// share (a daemon watching 100,000 local tables kept three); its folder and its metadata table's
/// are read from it.
#[test]
fn a_local_storage_keeps_its_folder_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap().join("t");
    std::fs::create_dir_all(&dir).unwrap();
    let s = Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap();
    let local = s.local_root.as_ref().expect("a local table's link checks");
    assert!(Arc::ptr_eq(&s.uri, &local.table_uri));
    assert_eq!(local.table(), dir.as_path());
    assert_eq!(s.local_dir(), Some(dir.as_path()));
    let child = s.child(&p(".hoodie/metadata"));
    assert_eq!(
        child.local_dir(),
        Some(dir.join(".hoodie/metadata").as_path())
    );
    let child_local = child.local_root.as_ref().expect("the child's link checks");
    assert!(Arc::ptr_eq(&s.uri, &child_local.table_uri));
    assert_eq!(child_local.table(), dir.as_path());
    assert_eq!(mem().local_dir(), None);
}
