//! The AWS Glue Data Catalog as a source: its Hudi tables (those whose parameters or storage
//! descriptor say Hudi), one table per location (a merge-on-read table's `_ro` and `_rt` entries
//! are one). Two JSON calls, `GetDatabases` and `GetTables`, page by page, signed with
//! Signature Version 4.

use std::collections::BTreeMap;
use std::time::Duration;

use hudi_keeper_core::discover::{
    FilterSettings, Filters, FoundTable, ScanLimits, ScanProblem, ScanReport, MAX_PROBLEMS,
};
use hudi_keeper_core::storage::RelPath;
use serde_json::{json, Value};

use super::sigv4::{self, Credentials};

/// The largest answer read from Glue (a page of 100 tables with many columns is well below).
const MAX_ANSWER: usize = 16 << 20;

/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the Glue source cannot be reached or answered wrongly.
#[derive(Debug, thiserror::Error)]
pub enum GlueError {
    /// The source's settings (the message says which).
    #[error("glue: {0}")]
    Config(String),
    /// A call that failed on the way.
    #[error("glue {target} at {url}: {reason}")]
    Request {
        target: &'static str,
        url: String,
        reason: String,
    },
    /// A call Glue refused.
    #[error("glue {target}: HTTP {status}: {body}")]
    Status {
        target: &'static str,
        status: u16,
        body: String,
    },
}

/// A client of one region's catalog.
#[derive(Debug)]
pub struct GlueClient {
    http: reqwest::Client,
    url: reqwest::Url,
    host: String,
    region: String,
    credentials: Credentials,
    catalog_id: Option<String>,
}

impl GlueClient {
    /// A client of `region` (at `endpoint` when given, e.g. a test server), with the credentials
    /// of `options` (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`), else of
    /// the environment (`AWS_ACCESS_KEY_ID`, …).
    pub fn new(
        region: &str,
        endpoint: Option<&str>,
        catalog_id: Option<String>,
        options: &BTreeMap<String, String>,
    ) -> Result<Self, GlueError> {
        let region = region.trim();
        if region.is_empty()
            || !region
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(GlueError::Config(format!(
                "`{}` is not a region",
                region.escape_debug()
            )));
        }
        let endpoint = endpoint
            .map(str::to_string)
            .unwrap_or_else(|| format!("https://glue.{region}.amazonaws.com/"));
        let url = reqwest::Url::parse(&endpoint)
            .map_err(|e| GlueError::Config(format!("endpoint `{endpoint}`: {e}")))?;
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => {
                return Err(GlueError::Config(format!(
                    "endpoint `{endpoint}` has no host"
                )))
            }
        };
        let get = |key: &str, env: &str| {
            options
                .get(key)
                .cloned()
                .or_else(|| std::env::var(env).ok())
                .filter(|v| !v.is_empty())
        };
        let credentials = Credentials {
            access_key_id: get("aws_access_key_id", "AWS_ACCESS_KEY_ID").ok_or_else(|| {
                GlueError::Config("no credentials: set aws_access_key_id and aws_secret_access_key in the source's storage_options, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into())
            })?,
            secret_access_key: get("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY")
                .ok_or_else(|| GlueError::Config("no aws_secret_access_key".into()))?,
            session_token: get("aws_session_token", "AWS_SESSION_TOKEN")
                .or_else(|| options.get("aws_token").cloned()),
        };
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| GlueError::Config(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            url,
            host,
            region: region.to_string(),
            credentials,
            catalog_id,
        })
    }

    /// One call (`AWSGlue.<target>`) with `body`; its JSON answer.
    pub async fn call(&self, target: &'static str, mut body: Value) -> Result<Value, GlueError> {
        if let (Some(id), Some(map)) = (&self.catalog_id, body.as_object_mut()) {
            map.insert("CatalogId".into(), Value::String(id.clone()));
        }
        let fail = |reason: String| GlueError::Request {
            target,
            url: self.url.to_string(),
            reason,
        };
        let payload = serde_json::to_vec(&body).map_err(|e| fail(e.to_string()))?;
        let amz_date = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
        let mut headers = vec![
            ("content-type", "application/x-amz-json-1.1".to_string()),
            ("host", self.host.clone()),
            ("x-amz-date", amz_date.clone()),
            ("x-amz-target", format!("AWSGlue.{target}")),
        ];
        if let Some(t) = &self.credentials.session_token {
            headers.push(("x-amz-security-token", t.clone()));
        }
        let path = match self.url.path() {
            "" => "/",
            p => p,
        };
        let request = sigv4::Request {
            method: "POST",
            path,
            query: "",
            headers: &headers,
            body: &payload,
        };
        let auth =
            sigv4::authorization(&request, &self.credentials, &amz_date, &self.region, "glue");
        let mut req = self.http.post(self.url.clone()).body(payload.clone());
        for (k, v) in headers.iter().filter(|(k, _)| *k != "host") {
            req = req.header(*k, v);
        }
        let mut resp = req
            .header("authorization", auth)
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = resp.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| fail(e.to_string()))? {
            if bytes.len() + chunk.len() > MAX_ANSWER {
                return Err(fail(format!(
                    "the answer is larger than {MAX_ANSWER} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(GlueError::Status {
                target,
                status: status.as_u16(),
                body: text.chars().take(500).collect(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| fail(format!("not JSON: {e}")))
    }
}

/// Whether a Glue table is a Hudi table: its parameters or its storage descriptor say so.
pub fn is_hudi(table: &Value) -> bool {
    let params = &table["Parameters"];
    let provider = params["spark.sql.sources.provider"]
        .as_str()
        .is_some_and(|p| p.eq_ignore_ascii_case("hudi"));
    let sd = &table["StorageDescriptor"];
    let format = |key: &str| {
        sd[key]
            .as_str()
            .is_some_and(|f| f.starts_with("org.apache.hudi.") || f.contains(".hudi.hadoop."))
    };
    let serde = sd["SerdeInfo"]["Parameters"]["hoodie.query.as.ro.table"].is_string();
    provider || format("InputFormat") || format("OutputFormat") || serde
}

/// A Hudi table's base path in Glue: its storage descriptor's location, else its serde's
/// `path` parameter.
pub fn location(table: &Value) -> Option<String> {
    let sd = &table["StorageDescriptor"];
    sd["Location"]
        .as_str()
        .or_else(|| sd["SerdeInfo"]["Parameters"]["path"].as_str())
        .map(|l| l.trim().trim_end_matches('/').to_string())
        .filter(|l| !l.is_empty())
}

/// The table's name without the `_ro`/`_rt` suffix Hudi's sync gives a merge-on-read table's
/// two entries.
fn base_of(name: &str) -> &str {
    name.strip_suffix("_ro")
        .or_else(|| name.strip_suffix("_rt"))
        .unwrap_or(name)
}

fn is_realtime(table: &Value) -> bool {
    table["StorageDescriptor"]["InputFormat"]
        .as_str()
        .is_some_and(|f| f.contains("Realtime"))
}

/// The Hudi tables of the catalog (of `databases`, or every database), at most
/// `limits.max_requests` calls; `progress` after each with (calls, tables so far).
pub async fn scan(
    client: &GlueClient,
    databases: &[String],
    limits: ScanLimits,
    filters: &FilterSettings,
    mut progress: impl FnMut(u64, u64),
) -> Result<ScanReport, hudi_keeper_core::discover::DiscoverError> {
    let label = format!("glue://{}", client.region);
    let filters = Filters::compile(&label, filters)?;
    let mut report = empty_report(&label);
    // Every page of one call, each counted against the budget.
    async fn pages(
        client: &GlueClient,
        report: &mut ScanReport,
        limits: ScanLimits,
        target: &'static str,
        base: Value,
        list: &str,
        progress: &mut impl FnMut(u64, u64),
    ) -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            if report.requests >= limits.max_requests {
                report.cut_short = true;
                return Ok(out);
            }
            let mut body = base.clone();
            if let (Some(t), Some(map)) = (&token, body.as_object_mut()) {
                map.insert("NextToken".into(), Value::String(t.clone()));
            }
            report.requests += 1;
            let answer = client.call(target, body).await.map_err(|e| e.to_string())?;
            progress(report.requests, report.tables.len() as u64);
            if let Some(items) = answer[list].as_array() {
                out.extend(items.iter().cloned());
            }
            match answer["NextToken"].as_str().filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t.to_string()),
                None => return Ok(out),
            }
        }
    }
    let databases: Vec<String> = if databases.is_empty() {
        match pages(
            client,
            &mut report,
            limits,
            "GetDatabases",
            json!({}),
            "DatabaseList",
            &mut progress,
        )
        .await
        {
            Ok(list) => list
                .iter()
                .filter_map(|d| d["Name"].as_str().map(str::to_string))
                .collect(),
            Err(e) => {
                problem(&mut report, label.clone(), e);
                Vec::new()
            }
        }
    } else {
        databases.to_vec()
    };
    let mut catalog = Catalog::default();
    for db in &databases {
        if report.cut_short {
            break;
        }
        let tables = match pages(
            client,
            &mut report,
            limits,
            "GetTables",
            json!({ "DatabaseName": db }),
            "TableList",
            &mut progress,
        )
        .await
        {
            Ok(t) => t,
            Err(e) => {
                problem(&mut report, format!("{label}/{db}"), e);
                continue;
            }
        };
        for t in &tables {
            catalog.add(t);
        }
    }
    catalog.finish(&mut report, &filters);
    Ok(report)
}

/// The Hudi tables of a catalog's entries (Glue's JSON, or a metastore's tables in that shape),
/// by location: one table however many entries name it.
#[derive(Debug, Default)]
pub struct Catalog {
    by_location: BTreeMap<String, (String, bool)>,
}

impl Catalog {
    /// Take `entry` if it is a Hudi table's.
    pub fn add(&mut self, entry: &Value) {
        if !is_hudi(entry) {
            return;
        }
        let (Some(name), Some(at)) = (entry["Name"].as_str(), location(entry)) else {
            return;
        };
        let realtime = is_realtime(entry);
        let e = self
            .by_location
            .entry(at)
            .or_insert_with(|| (base_of(name).to_string(), false));
        e.1 |= realtime;
        if !name.ends_with("_ro") && !name.ends_with("_rt") {
            e.0 = name.to_string();
        }
    }

    /// Put the tables `filters` keep into `report`, and judge it complete.
    pub fn finish(self, report: &mut ScanReport, filters: &Filters) {
        for (location, (name, realtime)) in self.by_location {
            if !filters.keeps(&name, &location) {
                report.filtered_out += 1;
                continue;
            }
            report.tables.push(FoundTable {
                location,
                path: RelPath::root(),
                name,
                table_type: realtime.then(|| "MERGE_ON_READ".to_string()),
            });
        }
        report.complete = !report.cut_short && report.problem_count == 0;
    }
}

/// An empty report of a scan of `label`.
pub fn empty_report(label: &str) -> ScanReport {
    ScanReport {
        prefix: label.to_string(),
        tables: Vec::new(),
        complete: false,
        cut_short: false,
        requests: 0,
        folders_listed: 0,
        filtered_out: 0,
        folders_excluded: 0,
        beyond_depth: 0,
        without_properties: 0,
        links_skipped: 0,
        problems: Vec::new(),
        problem_count: 0,
    }
}

/// Count a problem of a catalog scan.
pub fn problem(report: &mut ScanReport, location: String, error: String) {
    report.problem_count += 1;
    if report.problems.len() < MAX_PROBLEMS {
        report.problems.push(ScanProblem { location, error });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hudi_tables_are_told_by_their_parameters_or_formats() {
        let by_provider = json!({"Parameters": {"spark.sql.sources.provider": "hudi"}});
        let by_format = json!({"StorageDescriptor": {"InputFormat": "org.apache.hudi.hadoop.HoodieParquetInputFormat"}});
        let rt = json!({"StorageDescriptor": {"InputFormat": "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"}});
        let parquet = json!({"Parameters": {"spark.sql.sources.provider": "parquet"}, "StorageDescriptor": {"InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"}});
        assert!(is_hudi(&by_provider) && is_hudi(&by_format) && is_hudi(&rt));
        assert!(!is_hudi(&parquet));
        assert!(is_realtime(&rt) && !is_realtime(&by_format));
        let at = json!({"StorageDescriptor": {"Location": "s3://b/t/", "SerdeInfo": {"Parameters": {"path": "s3://b/other"}}}});
        assert_eq!(location(&at).as_deref(), Some("s3://b/t"));
        assert_eq!(base_of("orders_rt"), "orders");
    }
}
