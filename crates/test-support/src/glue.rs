//! The Glue Data Catalog of the S3-compatible test server (moto serves Glue on the same port),
//! written as Hudi's Glue sync writes it. Calls go through `curl --aws-sigv4`, apart from the
//! daemon's own client.

use serde_json::{json, Value};

/// One `AWSGlue.<target>` call with `body`; its JSON answer (panics on an error).
pub fn call(target: &str, body: &Value) -> Value {
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--fail-with-body",
            "--aws-sigv4",
            "aws:amz:us-east-1:glue",
            "--user",
            "test:test",
            "-H",
            &format!("X-Amz-Target: AWSGlue.{target}"),
            "-H",
            "Content-Type: application/x-amz-json-1.1",
            "-d",
            &body.to_string(),
            &format!("{}/", super::s3::endpoint()),
        ])
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "glue {target}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// A database of its own for a test.
pub fn database(prefix: &str) -> String {
    let name = super::s3::unique(prefix).replace('-', "_");
    call("CreateDatabase", &json!({"DatabaseInput": {"Name": name}}));
    name
}

fn entry(name: &str, location: &str, realtime: bool, ro: Option<bool>) -> Value {
    let input = if realtime {
        "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
    } else {
        "org.apache.hudi.hadoop.HoodieParquetInputFormat"
    };
    let mut serde_params = json!({"path": location});
    if let Some(ro) = ro {
        serde_params["hoodie.query.as.ro.table"] = json!(ro.to_string());
    }
    json!({
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"EXTERNAL": "TRUE", "spark.sql.sources.provider": "hudi", "last_commit_time_sync": "20240101000000000"},
        "StorageDescriptor": {
            "Location": location,
            "InputFormat": input,
            "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
            "SerdeInfo": {
                "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                "Parameters": serde_params
            }
        }
    })
}

/// A copy-on-write table as Hudi's sync registers it: one entry.
pub fn cow_table(db: &str, name: &str, location: &str) {
    call(
        "CreateTable",
        &json!({"DatabaseName": db, "TableInput": entry(name, location, false, None)}),
    );
}

/// A merge-on-read table as Hudi's sync registers it: `<name>_ro` and `<name>_rt`, one location.
pub fn mor_table(db: &str, name: &str, location: &str) {
    for (suffix, realtime) in [("_ro", false), ("_rt", true)] {
        let e = entry(
            &format!("{name}{suffix}"),
            location,
            realtime,
            Some(!realtime),
        );
        call("CreateTable", &json!({"DatabaseName": db, "TableInput": e}));
    }
}

/// A table that is not Hudi's (plain Parquet).
pub fn parquet_table(db: &str, name: &str, location: &str) {
    let e = json!({
        "Name": name,
        "Parameters": {"spark.sql.sources.provider": "parquet"},
        "StorageDescriptor": {"Location": location, "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"}
    });
    call("CreateTable", &json!({"DatabaseName": db, "TableInput": e}));
}
