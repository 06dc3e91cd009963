//! A Hive Metastore as a source (`thrift://HOST:PORT`): its Hudi tables, told and grouped as the
//! Glue source tells them (the metastore's tables are put in Glue's shape). Three calls over
//! Thrift's binary protocol on a plain socket (`thrift`): `get_all_databases` (unless the
//! databases are named), `get_all_tables` per database, `get_table_objects_by_name_req` per 100
//! tables (Hive 3 and 4; Hive 2's `get_table_objects_by_name` where the metastore has no other);
//! each a request of the budget.

use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use hudi_keeper_core::discover::{DiscoverError, FilterSettings, Filters, ScanLimits, ScanReport};
use serde_json::{json, Map, Value as Json};

use super::glue::{empty_report, problem, Catalog};
use super::thrift::{self, Value};

/// Tables asked for per `get_table_objects_by_name`.
const BATCH: usize = 100;
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a metastore scan could not start.
#[derive(Debug, thiserror::Error)]
pub enum HmsError {
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    #[error("hive metastore `{uri}`: {reason}")]
    Connect { uri: String, reason: String },
}

/// `host:port` of a `thrift://HOST:PORT` URI.
pub fn address(uri: &str) -> Result<String, String> {
    let rest = uri
        .trim()
        .strip_prefix("thrift://")
        .ok_or_else(|| format!("`{uri}` is not thrift://HOST:PORT"))?
        .trim_end_matches('/');
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(rest.to_string())
        }
        _ => Err(format!("`{uri}` is not thrift://HOST:PORT")),
    }
}

/// A metastore table in Glue's shape (name, parameters, storage descriptor).
fn as_entry(t: &Value) -> Json {
    let map = |v: Option<&Value>| -> Json {
        Json::Object(
            v.map(Value::string_map)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, Json::String(v)))
                .collect::<Map<_, _>>(),
        )
    };
    let text = |v: Option<&Value>| {
        v.and_then(Value::text)
            .map(Json::String)
            .unwrap_or(Json::Null)
    };
    let sd = t.field(7);
    let field = |id| sd.and_then(|s| s.field(id));
    json!({
        "Name": text(t.field(1)),
        "Parameters": map(t.field(9)),
        "StorageDescriptor": {
            "Location": text(field(2)),
            "InputFormat": text(field(3)),
            "OutputFormat": text(field(4)),
            "SerdeInfo": {"Parameters": map(field(7).and_then(|s| s.field(3)))},
        },
    })
}

struct Conn {
    out: TcpStream,
    input: BufReader<TcpStream>,
    seq: i32,
}

impl Conn {
    fn open(addr: &str, uri: &str) -> Result<Conn, HmsError> {
        let fail = |reason: String| HmsError::Connect {
            uri: uri.to_string(),
            reason,
        };
        let at = addr
            .to_socket_addrs()
            .map_err(|e| fail(e.to_string()))?
            .next()
            .ok_or_else(|| fail("no address".into()))?;
        let out =
            TcpStream::connect_timeout(&at, CONNECT_TIMEOUT).map_err(|e| fail(e.to_string()))?;
        out.set_read_timeout(Some(CALL_TIMEOUT))
            .map_err(|e| fail(e.to_string()))?;
        out.set_write_timeout(Some(CALL_TIMEOUT))
            .map_err(|e| fail(e.to_string()))?;
        let input = BufReader::new(out.try_clone().map_err(|e| fail(e.to_string()))?);
        Ok(Conn { out, input, seq: 0 })
    }

    fn call(
        &mut self,
        method: &str,
        args: Vec<(i16, Value)>,
    ) -> Result<Value, thrift::ThriftError> {
        self.seq = self.seq.wrapping_add(1);
        thrift::call(
            &mut self.out,
            &mut self.input,
            method,
            self.seq,
            &Value::Struct(args),
        )
    }
}

/// The Hudi tables of the metastore at `uri` (of `databases`, or every database); `progress`
/// after each call with (calls, tables so far). Runs on the blocking pool.
pub async fn scan(
    uri: &str,
    databases: &[String],
    limits: ScanLimits,
    filters: &FilterSettings,
    progress: impl FnMut(u64, u64) + Send + 'static,
) -> Result<ScanReport, HmsError> {
    let (uri, databases, filters) = (uri.to_string(), databases.to_vec(), filters.clone());
    let work = move || scan_blocking(&uri, &databases, limits, &filters, progress);
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(HmsError::Connect {
            uri: String::new(),
            reason: format!("the scan ended abnormally: {e}"),
        })
    })
}

fn scan_blocking(
    uri: &str,
    databases: &[String],
    limits: ScanLimits,
    filters: &FilterSettings,
    mut progress: impl FnMut(u64, u64),
) -> Result<ScanReport, HmsError> {
    let label = uri.trim_end_matches('/').to_string();
    let filters = Filters::compile(&label, filters)?;
    let addr = address(uri).map_err(|reason| HmsError::Connect {
        uri: uri.to_string(),
        reason,
    })?;
    let mut conn = Conn::open(&addr, uri)?;
    let mut report = empty_report(&label);
    let mut catalog = Catalog::default();
    // One call within the budget; `None` once it is spent.
    let mut call = |conn: &mut Conn, report: &mut ScanReport, method: &str, args| {
        if report.requests >= limits.max_requests {
            report.cut_short = true;
            return None;
        }
        report.requests += 1;
        let r = conn.call(method, args);
        progress(report.requests, 0);
        Some(r)
    };
    let mut old_api = false;
    let databases: Vec<String> = if databases.is_empty() {
        match call(&mut conn, &mut report, "get_all_databases", vec![]) {
            Some(Ok(list)) => list.items().iter().filter_map(Value::text).collect(),
            Some(Err(e)) => {
                problem(
                    &mut report,
                    label.clone(),
                    format!("get_all_databases: {e}"),
                );
                Vec::new()
            }
            None => Vec::new(),
        }
    } else {
        databases.to_vec()
    };
    'dbs: for db in &databases {
        let at = format!("{label}/{db}");
        let names: Vec<Value> = match call(
            &mut conn,
            &mut report,
            "get_all_tables",
            vec![(1, Value::string(db))],
        ) {
            Some(Ok(list)) => list.items().to_vec(),
            Some(Err(e)) => {
                let broken = matches!(
                    e,
                    thrift::ThriftError::Io(_) | thrift::ThriftError::Malformed(_)
                );
                problem(&mut report, at, format!("get_all_tables: {e}"));
                if broken {
                    break 'dbs; // the connection is in an unknown state
                }
                continue;
            }
            None => break,
        };
        for chunk in names.chunks(BATCH) {
            // Hive 3 and 4: get_table_objects_by_name_req (4 has no other); Hive 2:
            // get_table_objects_by_name.
            let (method, args) = if old_api {
                let args = vec![(1, Value::string(db)), (2, Value::List(11, chunk.to_vec()))];
                ("get_table_objects_by_name", args)
            } else {
                let request = Value::Struct(vec![
                    (1, Value::string(db)),
                    (2, Value::List(11, chunk.to_vec())),
                ]);
                ("get_table_objects_by_name_req", vec![(1, request)])
            };
            let mut answer = call(&mut conn, &mut report, method, args);
            if !old_api
                && matches!(&answer, Some(Err(thrift::ThriftError::Application(m))) if m.contains("Invalid method name"))
            {
                old_api = true;
                let args = vec![(1, Value::string(db)), (2, Value::List(11, chunk.to_vec()))];
                answer = call(&mut conn, &mut report, "get_table_objects_by_name", args);
            }
            match answer {
                Some(Ok(result)) => {
                    // The _req call's result is a struct holding the list (field 1).
                    let tables = match result.field(1) {
                        Some(list) if !old_api => list.items(),
                        _ => result.items(),
                    };
                    for t in tables {
                        catalog.add(&as_entry(t));
                    }
                }
                Some(Err(e)) => {
                    let broken = matches!(
                        e,
                        thrift::ThriftError::Io(_) | thrift::ThriftError::Malformed(_)
                    );
                    problem(&mut report, at.clone(), format!("{method}: {e}"));
                    if broken {
                        break 'dbs;
                    }
                }
                None => break 'dbs,
            }
        }
    }
    catalog.finish(&mut report, &filters);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metastore_uri_is_thrift_host_port() {
        assert_eq!(address("thrift://hms:9083").unwrap(), "hms:9083");
        assert_eq!(address("thrift://10.0.0.1:9083/").unwrap(), "10.0.0.1:9083");
        assert!(address("hms:9083").is_err());
        assert!(address("thrift://hms").is_err());
        assert!(address("thrift://:9083").is_err());
    }

    #[test]
    fn a_metastore_table_is_judged_as_a_glue_entry() {
        let t = Value::Struct(vec![
            (1, Value::string("events_rt")),
            (
                7,
                Value::Struct(vec![
                    (2, Value::string("s3://lake/events")),
                    (
                        3,
                        Value::string(
                            "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat",
                        ),
                    ),
                ]),
            ),
        ]);
        let e = as_entry(&t);
        assert!(super::super::glue::is_hudi(&e));
        assert_eq!(
            super::super::glue::location(&e).as_deref(),
            Some("s3://lake/events")
        );
    }
}
