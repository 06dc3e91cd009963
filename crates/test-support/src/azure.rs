//! The Azure Blob Storage emulator the tests run against (Azurite on loopback, started by
//! `scripts/test` through `scripts/azurite-server`), reached with the storage options an
//! operator would give hudi-keeper for a real account: the account name, its key and, for the
//! emulator only, the blob endpoint and plain HTTP.

use std::sync::Arc;

use hudi_keeper_core::storage::StorageOptions;

/// Azurite's development account and its published key (not a secret).
pub const ACCOUNT: &str = "devstoreaccount1";
pub const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The container `scripts/azurite-server` creates.
pub const CONTAINER: &str = "hudi-keeper";

pub fn endpoint() -> String {
    std::env::var("HUDI_KEEPER_AZURE_ENDPOINT").expect(
        "HUDI_KEEPER_AZURE_ENDPOINT is not set: run the tests through scripts/test, which starts Azurite",
    )
}

pub fn options() -> StorageOptions {
    StorageOptions::from_pairs([
        ("azure_storage_account_name", ACCOUNT.to_string()),
        ("azure_storage_account_key", KEY.to_string()),
        ("azure_storage_endpoint", endpoint()),
        ("azure_allow_http", "true".to_string()),
    ])
}

/// The same options as `--storage-option` arguments for the binary.
pub fn cli_options() -> Vec<String> {
    super::storage_option_args(&options())
}

/// The same options as a daemon configuration's `[defaults.storage_options]`.
pub fn options_toml() -> String {
    let mut s = String::from("[defaults.storage_options]\n");
    for (k, v) in &options().0 {
        s.push_str(&format!("{k} = \"{v}\"\n"));
    }
    s
}

/// The table at `root` in the test container as an `az://` URI (object_store's form).
pub fn az_uri(root: &str) -> String {
    format!("az://{CONTAINER}/{root}")
}

/// The table at `root` as the `abfss://` URI Hudi's writers use
/// (`abfss://<container>@<account>.dfs.core.windows.net/<path>`).
pub fn abfss_uri(root: &str) -> String {
    format!("abfss://{CONTAINER}@{ACCOUNT}.dfs.core.windows.net/{root}")
}

/// A raw client of the container.
pub fn azure_store() -> Arc<dyn object_store::ObjectStore> {
    let mut b = object_store::azure::MicrosoftAzureBuilder::new().with_container_name(CONTAINER);
    for (k, v) in &options().0 {
        b = b.with_config(k.parse().expect("known key"), v);
    }
    Arc::new(b.build().expect("Azure client"))
}
