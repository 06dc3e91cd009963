//! Thrift's binary protocol, as much of it as the Hive Metastore source needs: a call's message
//! written, a reply read into a tree of values (every size capped), over a plain socket (the
//! metastore's default transport: unframed, no SASL). Written from the protocol's description.

use std::io::{Read, Write};

/// The most bytes one string or binary may hold.
const MAX_STRING: usize = 16 << 20;
/// The most elements one list, set or map may hold.
const MAX_ELEMENTS: usize = 1 << 20;
/// The deepest nesting of structs and containers.
const MAX_DEPTH: usize = 32;

const VERSION_1: u32 = 0x8001_0000;
const CALL: u8 = 1;
const REPLY: u8 = 2;
const EXCEPTION: u8 = 3;

/// Type ids on the wire.
mod ty {
    pub const STOP: u8 = 0;
    pub const BOOL: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const DOUBLE: u8 = 4;
    pub const I16: u8 = 6;
    pub const I32: u8 = 8;
    pub const I64: u8 = 10;
    pub const STRING: u8 = 11;
    pub const STRUCT: u8 = 12;
    pub const MAP: u8 = 13;
    pub const SET: u8 = 14;
    pub const LIST: u8 = 15;
}

/// A value read or to write.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Byte(i8),
    Double(f64),
    I16(i16),
    I32(i32),
    I64(i64),
    Str(Vec<u8>),
    /// Fields by id.
    Struct(Vec<(i16, Value)>),
    /// Key and value types, entries.
    Map(u8, u8, Vec<(Value, Value)>),
    /// Element type, elements (a set too).
    List(u8, Vec<Value>),
}

impl Value {
    /// A string value.
    pub fn string(s: &str) -> Value {
        Value::Str(s.as_bytes().to_vec())
    }

    fn type_id(&self) -> u8 {
        match self {
            Value::Bool(_) => ty::BOOL,
            Value::Byte(_) => ty::BYTE,
            Value::Double(_) => ty::DOUBLE,
            Value::I16(_) => ty::I16,
            Value::I32(_) => ty::I32,
            Value::I64(_) => ty::I64,
            Value::Str(_) => ty::STRING,
            Value::Struct(_) => ty::STRUCT,
            Value::Map(..) => ty::MAP,
            Value::List(..) => ty::LIST,
        }
    }

    /// Field `id` of a struct.
    pub fn field(&self, id: i16) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(i, _)| *i == id).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text of a string.
    pub fn text(&self) -> Option<String> {
        match self {
            Value::Str(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// A map of strings.
    pub fn string_map(&self) -> Vec<(String, String)> {
        match self {
            Value::Map(_, _, entries) => entries
                .iter()
                .filter_map(|(k, v)| Some((k.text()?, v.text()?)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The elements of a list.
    pub fn items(&self) -> &[Value] {
        match self {
            Value::List(_, items) => items,
            _ => &[],
        }
    }
}

/// Why a reply could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ThriftError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("malformed reply: {0}")]
    Malformed(String),
    #[error("the server answered with an exception: {0}")]
    Application(String),
}

fn bad(why: impl Into<String>) -> ThriftError {
    ThriftError::Malformed(why.into())
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(b) => out.push(u8::from(*b)),
        Value::Byte(b) => out.extend_from_slice(&b.to_be_bytes()),
        Value::Double(d) => out.extend_from_slice(&d.to_bits().to_be_bytes()),
        Value::I16(i) => out.extend_from_slice(&i.to_be_bytes()),
        Value::I32(i) => out.extend_from_slice(&i.to_be_bytes()),
        Value::I64(i) => out.extend_from_slice(&i.to_be_bytes()),
        Value::Str(s) => {
            out.extend_from_slice(&(s.len() as i32).to_be_bytes());
            out.extend_from_slice(s);
        }
        Value::Struct(fields) => {
            for (id, f) in fields {
                out.push(f.type_id());
                out.extend_from_slice(&id.to_be_bytes());
                put_value(out, f);
            }
            out.push(ty::STOP);
        }
        Value::Map(kt, vt, entries) => {
            out.push(*kt);
            out.push(*vt);
            out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
            for (k, v) in entries {
                put_value(out, k);
                put_value(out, v);
            }
        }
        Value::List(et, items) => {
            out.push(*et);
            out.extend_from_slice(&(items.len() as i32).to_be_bytes());
            for i in items {
                put_value(out, i);
            }
        }
    }
}

/// The bytes of a call of `method` with `args` (a struct), sequence number `seq`.
pub fn call_message(method: &str, seq: i32, args: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(VERSION_1 | u32::from(CALL)).to_be_bytes());
    put_value(&mut out, &Value::string(method));
    out.extend_from_slice(&seq.to_be_bytes());
    put_value(&mut out, args);
    out
}

struct Reader<R> {
    inner: R,
}

impl<R: Read> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], ThriftError> {
        let mut b = [0u8; N];
        self.inner.read_exact(&mut b)?;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, ThriftError> {
        Ok(self.bytes::<1>()?[0])
    }
    fn i16(&mut self) -> Result<i16, ThriftError> {
        Ok(i16::from_be_bytes(self.bytes()?))
    }
    fn i32(&mut self) -> Result<i32, ThriftError> {
        Ok(i32::from_be_bytes(self.bytes()?))
    }
    fn size(&mut self, max: usize) -> Result<usize, ThriftError> {
        let n = self.i32()?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| bad(format!("a size of {n} (at most {max})")))
    }
    fn string(&mut self) -> Result<Vec<u8>, ThriftError> {
        let n = self.size(MAX_STRING)?;
        let mut b = Vec::new();
        (&mut self.inner).take(n as u64).read_to_end(&mut b)?;
        if b.len() != n {
            return Err(bad("the reply ends inside a string"));
        }
        Ok(b)
    }
    fn value(&mut self, t: u8, depth: usize) -> Result<Value, ThriftError> {
        if depth > MAX_DEPTH {
            return Err(bad("nested too deep"));
        }
        Ok(match t {
            ty::BOOL => Value::Bool(self.u8()? != 0),
            ty::BYTE => Value::Byte(i8::from_be_bytes(self.bytes()?)),
            ty::DOUBLE => Value::Double(f64::from_bits(u64::from_be_bytes(self.bytes()?))),
            ty::I16 => Value::I16(self.i16()?),
            ty::I32 => Value::I32(self.i32()?),
            ty::I64 => Value::I64(i64::from_be_bytes(self.bytes()?)),
            ty::STRING => Value::Str(self.string()?),
            ty::STRUCT => {
                let mut fields = Vec::new();
                loop {
                    let ft = self.u8()?;
                    if ft == ty::STOP {
                        break;
                    }
                    let id = self.i16()?;
                    fields.push((id, self.value(ft, depth + 1)?));
                }
                Value::Struct(fields)
            }
            ty::MAP => {
                let (kt, vt) = (self.u8()?, self.u8()?);
                let n = self.size(MAX_ELEMENTS)?;
                let mut entries = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let k = self.value(kt, depth + 1)?;
                    entries.push((k, self.value(vt, depth + 1)?));
                }
                Value::Map(kt, vt, entries)
            }
            ty::SET | ty::LIST => {
                let et = self.u8()?;
                let n = self.size(MAX_ELEMENTS)?;
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(self.value(et, depth + 1)?);
                }
                Value::List(et, items)
            }
            other => return Err(bad(format!("unknown type {other}"))),
        })
    }
}

/// Read the reply to `method` from `stream`: its result struct (field 0: the value returned;
/// other fields: exceptions the method declares, reported as errors).
pub fn read_reply(stream: impl Read, method: &str) -> Result<Value, ThriftError> {
    let mut r = Reader { inner: stream };
    let head = r.i32()? as u32;
    if head & 0xffff_0000 != VERSION_1 {
        return Err(bad(format!(
            "not a binary-protocol message (header {head:#x})"
        )));
    }
    let kind = (head & 0xff) as u8;
    let name = String::from_utf8_lossy(&r.string()?).into_owned();
    let _seq = r.i32()?;
    let body = r.value(ty::STRUCT, 0)?;
    if kind == EXCEPTION {
        let message = body.field(1).and_then(Value::text).unwrap_or_default();
        return Err(ThriftError::Application(message));
    }
    if kind != REPLY || name != method {
        return Err(bad(format!(
            "a reply of kind {kind} to `{name}`, not to `{method}`"
        )));
    }
    if let Some(v) = body.field(0) {
        return Ok(v.clone());
    }
    // A declared exception: its struct's first string (their `message`).
    let why = match &body {
        Value::Struct(f) => f
            .iter()
            .find_map(|(_, v)| v.field(1).and_then(Value::text))
            .unwrap_or_else(|| "an exception without message".into()),
        _ => "no result".into(),
    };
    Err(ThriftError::Application(why))
}

/// Send one call on `out` and read its reply from `input`.
pub fn call(
    out: &mut impl Write,
    input: &mut impl Read,
    method: &str,
    seq: i32,
    args: &Value,
) -> Result<Value, ThriftError> {
    out.write_all(&call_message(method, seq, args))?;
    out.flush()?;
    read_reply(input, method)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(method: &str, body: &Value, kind: u8) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(VERSION_1 | u32::from(kind)).to_be_bytes());
        put_value(&mut out, &Value::string(method));
        out.extend_from_slice(&7i32.to_be_bytes());
        put_value(&mut out, body);
        out
    }

    #[test]
    fn a_reply_reads_back_what_was_written() {
        let table = Value::Struct(vec![
            (1, Value::string("orders")),
            (4, Value::I32(5)),
            (
                7,
                Value::Struct(vec![
                    (1, Value::List(ty::STRUCT, vec![Value::Struct(vec![])])),
                    (2, Value::string("s3://b/orders")),
                    (5, Value::Bool(true)),
                ]),
            ),
            (
                9,
                Value::Map(
                    ty::STRING,
                    ty::STRING,
                    vec![(
                        Value::string("spark.sql.sources.provider"),
                        Value::string("hudi"),
                    )],
                ),
            ),
            (20, Value::I64(-1)),
            (21, Value::Double(1.5)),
        ]);
        let body = Value::Struct(vec![(0, Value::List(ty::STRUCT, vec![table.clone()]))]);
        let bytes = reply("get_table_objects_by_name", &body, REPLY);
        let got = read_reply(&bytes[..], "get_table_objects_by_name").unwrap();
        assert_eq!(got.items(), std::slice::from_ref(&table));
        assert_eq!(
            table.field(9).unwrap().string_map(),
            vec![("spark.sql.sources.provider".to_string(), "hudi".to_string())]
        );
        assert_eq!(
            table
                .field(7)
                .and_then(|sd| sd.field(2))
                .and_then(Value::text)
                .as_deref(),
            Some("s3://b/orders")
        );
    }

    #[test]
    fn exceptions_cut_replies_and_huge_sizes_are_errors() {
        let meta = Value::Struct(vec![(
            1,
            Value::Struct(vec![(1, Value::string("no such db"))]),
        )]);
        let e =
            read_reply(&reply("get_all_tables", &meta, REPLY)[..], "get_all_tables").unwrap_err();
        assert!(e.to_string().contains("no such db"), "{e}");
        let app = Value::Struct(vec![
            (1, Value::string("Invalid method name")),
            (2, Value::I32(1)),
        ]);
        let e = read_reply(&reply("x", &app, EXCEPTION)[..], "x").unwrap_err();
        assert!(e.to_string().contains("Invalid method name"), "{e}");
        let ok = reply(
            "get_all_databases",
            &Value::Struct(vec![(
                0,
                Value::List(ty::STRING, vec![Value::string("default")]),
            )]),
            REPLY,
        );
        assert!(
            read_reply(&ok[..ok.len() - 3], "get_all_databases").is_err(),
            "cut short"
        );
        let mut huge = reply("m", &Value::Struct(vec![]), REPLY);
        huge.truncate(huge.len() - 1);
        huge.extend_from_slice(&[ty::STRING, 0, 0]);
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        let e = read_reply(&huge[..], "m").unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
        assert!(read_reply(&reply("other", &Value::Struct(vec![]), REPLY)[..], "m").is_err());
    }

    #[test]
    fn a_call_is_a_strict_binary_message() {
        let m = call_message(
            "get_all_tables",
            3,
            &Value::Struct(vec![(1, Value::string("db"))]),
        );
        assert_eq!(&m[..4], &[0x80, 0x01, 0x00, 0x01]);
        assert_eq!(&m[4..8], &14i32.to_be_bytes());
        assert_eq!(&m[8..22], b"get_all_tables");
        assert_eq!(&m[22..26], &3i32.to_be_bytes());
        assert_eq!(
            &m[26..],
            &[ty::STRING, 0, 1, 0, 0, 0, 2, b'd', b'b', ty::STOP]
        );
    }
}
