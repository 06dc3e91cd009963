//! The Hive Metastore the discovery suites run against (`scripts/hms-server start`, which
//! `scripts/test` runs): its URI, and tables registered in it as Hudi's Hive sync registers them.

/// `HUDI_KEEPER_HMS` (`thrift://127.0.0.1:PORT`).
pub fn uri() -> String {
    std::env::var("HUDI_KEEPER_HMS").expect(
        "HUDI_KEEPER_HMS is not set: run the tests through scripts/test, which starts a Hive Metastore (scripts/hms-server start)",
    )
}

/// A database name no other run uses.
pub fn database(prefix: &str) -> String {
    super::s3::unique(prefix).replace('-', "_")
}

/// Register `name` in `db` at `path`: `cow` (one entry), `mor` (`name_ro` and `name_rt`), or
/// `parquet` (not a Hudi table).
pub fn register(db: &str, name: &str, path: &str, kind: &str) {
    let out = std::process::Command::new(super::interop::workspace().join("scripts/hms-server"))
        .args(["register", &uri(), db, name, path, kind])
        .output()
        .expect("run scripts/hms-server register");
    assert!(
        out.status.success(),
        "registering {db}.{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
