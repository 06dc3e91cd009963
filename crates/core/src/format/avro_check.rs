//! A bounds check of Avro bytes before `apache_avro` decodes them.
//!
//! `apache_avro` sizes buffers from the lengths it reads, before it knows whether the input
//! holds that much: a block of `n` bytes is zero-filled to `n` (up to 512 MiB), a string of
//! length `n` gets `vec![0; n]`, an array or map of `n` items reserves `n` values (`n` up to
//! 512 Mi, tens of GiB), a `fixed` of a schema's size is allocated whatever the size. A damaged
//! or hostile timeline file of a few bytes could so take gigabytes or abort the process.
//!
//! [`check_container`] and [`check_datum`] walk the bytes with the writer schema first, without
//! allocating anything sized by the input, and refuse every length or item count that exceeds
//! the bytes left (each item of an array or map takes at least one byte in the schemas Hudi
//! writes; a count larger than the bytes left is refused even for zero-byte items, which Hudi
//! never writes), nesting deeper than [`MAX_DEPTH`], and compressed containers (Hudi writes its
//! timeline files uncompressed; a compressed block could inflate without bound). What passes is
//! decoded by `apache_avro` with every allocation bounded by a small multiple of the input's
//! size.

use apache_avro::schema::{Name, Namespace, ResolvedSchema};
use apache_avro::Schema;

use super::avro_error::AvroError;

/// The deepest nesting of records, arrays, maps and unions accepted (Hudi's timeline and
/// metadata schemas nest a few levels; a recursive schema could otherwise nest as deep as the
/// input is long and overflow the decoder's stack).
pub const MAX_DEPTH: usize = 32;

/// The container magic.
const MAGIC: &[u8; 4] = b"Obj\x01";
const SYNC_SIZE: usize = 16;

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

fn short(what: &str) -> AvroError {
    AvroError::Container(format!("truncated: {what} runs past the end of the bytes"))
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, at: 0 }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], AvroError> {
        if n > self.remaining() {
            return Err(short(what));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    /// A zig-zag varint `long` (at most 10 bytes).
    fn long(&mut self, what: &str) -> Result<i64, AvroError> {
        let mut z = 0u64;
        for i in 0..10 {
            let b = *self.bytes.get(self.at).ok_or_else(|| short(what))?;
            self.at += 1;
            z |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        Err(AvroError::Container(format!(
            "{what}: varint longer than 10 bytes"
        )))
    }

    /// A length (`bytes`, `string`): not negative, and no more than the bytes left.
    fn len(&mut self, what: &str) -> Result<usize, AvroError> {
        let n = self.long(what)?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.remaining())
            .ok_or_else(|| {
                AvroError::Container(format!(
                    "{what} declares {n} bytes, {} are left",
                    self.remaining()
                ))
            })
    }

    /// The item count of an array or map block (0 ends it); a negative count is followed by
    /// the block's size in bytes. No more items than bytes left.
    fn block_count(&mut self, what: &str) -> Result<usize, AvroError> {
        let raw = self.long(what)?;
        let n = if raw < 0 {
            self.long(what)?;
            raw.checked_neg()
                .ok_or_else(|| AvroError::Container(format!("{what}: count out of range")))?
        } else {
            raw
        };
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.remaining())
            .ok_or_else(|| {
                AvroError::Container(format!(
                    "{what} declares {n} items, {} bytes are left",
                    self.remaining()
                ))
            })
    }

    fn skip_bytes(&mut self, what: &str) -> Result<&'a [u8], AvroError> {
        let n = self.len(what)?;
        self.take(n, what)
    }
}

/// Check the header and the first data block (what a single-record read decodes) of an Avro
/// object container file, and the first record in it against the embedded writer schema.
pub(crate) fn check_container(bytes: &[u8]) -> Result<(), AvroError> {
    let mut c = Cursor::new(bytes);
    if c.take(MAGIC.len(), "the magic")? != MAGIC {
        return Err(AvroError::Container("no Avro container magic".into()));
    }
    let mut schema_json = None;
    let mut codec = None;
    loop {
        let n = c.block_count("the file metadata")?;
        if n == 0 {
            break;
        }
        for _ in 0..n {
            let key = c.skip_bytes("a file metadata key")?;
            let value = c.skip_bytes("a file metadata value")?;
            match key {
                b"avro.schema" => schema_json = Some(value),
                b"avro.codec" => codec = Some(value),
                _ => {}
            }
        }
    }
    c.take(SYNC_SIZE, "the sync marker")?;
    if let Some(codec) = codec.filter(|c| *c != b"null") {
        return Err(AvroError::Container(format!(
            "compressed with codec `{}`; Hudi writes timeline files uncompressed",
            String::from_utf8_lossy(codec)
        )));
    }
    let schema_json = schema_json
        .ok_or_else(|| AvroError::Container("no `avro.schema` in the file metadata".into()))?;
    let text = std::str::from_utf8(schema_json)
        .map_err(|_| AvroError::Container("the writer schema is not UTF-8".into()))?;
    let schema = parse_schema(text)?;
    if c.remaining() == 0 {
        // No block: the reader finds no record.
        return Ok(());
    }
    let objects = c.long("the block's record count")?;
    let size = c.len("the block")?;
    let block = c.take(size, "the block")?;
    c.take(SYNC_SIZE, "the block's sync marker")?;
    if objects == 0 {
        return Ok(());
    }
    check_datum(&schema, block).map(|_| ())
}

/// Parse an Avro schema read from input (a container's writer schema, an HFile's `schema`).
///
/// `apache_avro`'s parser unwraps the names it reads (record, enum and fixed names, named type
/// references, aliases), so a damaged name would panic it: every such name is checked first
/// (defaults, which may hold anything, are not names). A panic left in the parser is caught
/// and reported as an error too.
pub fn parse_schema(text: &str) -> Result<Schema, AvroError> {
    let bad = |why: String| AvroError::Container(format!("schema: {why}"));
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    check_names(&json).map_err(bad)?;
    std::panic::catch_unwind(|| Schema::parse(&json))
        .map_err(|_| bad("the Avro library failed on it".into()))?
        .map_err(|e| bad(e.to_string()))
}

/// An Avro full name: dot-separated parts of `[A-Za-z_][A-Za-z0-9_]*`.
fn is_full_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut b = part.bytes();
            b.next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        })
}

fn check_names(v: &serde_json::Value) -> Result<(), String> {
    use serde_json::Value;
    match v {
        Value::Array(items) => items.iter().try_for_each(check_names),
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("default", _) => {}
                    ("name" | "type", Value::String(n)) if !is_full_name(n) => {
                        return Err(format!("`{n}` is not an Avro name"))
                    }
                    ("namespace", Value::String(n)) if !n.is_empty() && !is_full_name(n) => {
                        return Err(format!("`{n}` is not an Avro namespace"))
                    }
                    ("aliases", Value::Array(aliases)) => {
                        for a in aliases {
                            if !a.as_str().is_some_and(is_full_name) {
                                return Err(format!("alias {a} is not an Avro name"));
                            }
                        }
                    }
                    _ => check_names(value)?,
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Check one datum written under `schema` at the start of `bytes`; returns the bytes it takes.
pub(crate) fn check_datum(schema: &Schema, bytes: &[u8]) -> Result<usize, AvroError> {
    let mut c = Cursor::new(bytes);
    Walker {
        root: schema,
        names: None,
    }
    .walk(schema, &None, &mut c, 0)?;
    Ok(c.at)
}

/// Decode one `files`-partition record (`HoodieMetadataRecord`) written under `schema`, in one
/// pass over its bytes and without building its values: `entry` gets each
/// `filesystemMetadata` entry (name, size, isDeleted) as it is read; returns the record's
/// `type`. Every other field is skipped as [`check_datum`] walks it, with the same bounds, so a
/// record of millions of entries costs what `entry` keeps of them.
pub(crate) fn visit_files_record(
    schema: &Schema,
    bytes: &[u8],
    mut entry: impl FnMut(&str, i64, bool),
) -> Result<i32, AvroError> {
    let Schema::Record(r) = schema else {
        return Err(AvroError::Shape("the schema is not a record".into()));
    };
    let ns = r.name.fully_qualified_name(&None).namespace;
    let mut c = Cursor::new(bytes);
    let mut w = Walker {
        root: schema,
        names: None,
    };
    let mut record_type = None;
    for f in &r.fields {
        match f.name.as_str() {
            "type" => {
                let (s, _) = w.resolve(&f.schema, &ns, &mut c)?;
                record_type = Some(match s {
                    Schema::Int | Schema::Long => i32::try_from(c.long("the record type")?)
                        .map_err(|_| AvroError::Shape("record type out of range".into()))?,
                    other => return Err(AvroError::Shape(format!("no record type ({other:?})"))),
                });
            }
            "filesystemMetadata" => w.file_map(&f.schema, &ns, &mut c, &mut entry)?,
            _ => w.walk(&f.schema, &ns, &mut c, 1)?,
        }
    }
    if c.remaining() != 0 {
        return Err(AvroError::Shape(format!(
            "{} bytes after the record",
            c.remaining()
        )));
    }
    record_type.ok_or_else(|| AvroError::Shape("no record type".into()))
}

/// Walks a datum; the schema's named types are looked up (and collected, once) only when a
/// reference to one is met: a files-partition record mostly holds nulls and meets none.
struct Walker<'s> {
    root: &'s Schema,
    names: Option<ResolvedSchema<'s>>,
}

impl<'s> Walker<'s> {
    fn named(&mut self, full: &Name) -> Result<&'s Schema, AvroError> {
        if self.names.is_none() {
            self.names = Some(
                ResolvedSchema::try_from(self.root)
                    .map_err(|e| AvroError::Shape(format!("schema: {e}")))?,
            );
        }
        self.names
            .as_ref()
            .and_then(|n| n.get_names().get(full).copied())
            .ok_or_else(|| AvroError::Shape(format!("schema names unknown type {full}")))
    }

    /// The schema a value of `schema` has once its union branch is read and named references
    /// are followed, and the namespace it is in.
    fn resolve(
        &mut self,
        schema: &'s Schema,
        ns: &Namespace,
        c: &mut Cursor<'_>,
    ) -> Result<(&'s Schema, Namespace), AvroError> {
        let (mut schema, mut ns) = (schema, ns.clone());
        for _ in 0..MAX_DEPTH {
            match schema {
                Schema::Union(u) => {
                    let i = c.long("a union branch")?;
                    schema = usize::try_from(i)
                        .ok()
                        .and_then(|i| u.variants().get(i))
                        .ok_or_else(|| {
                            AvroError::Container(format!("union branch {i} out of range"))
                        })?;
                }
                Schema::Ref { name } => {
                    let full: Name = name.fully_qualified_name(&ns);
                    schema = self.named(&full)?;
                    ns = full.namespace;
                }
                other => return Ok((other, ns)),
            }
        }
        Err(AvroError::Container(format!(
            "values nested deeper than {MAX_DEPTH} levels"
        )))
    }

    /// A `filesystemMetadata` value: null, or a map of name to `{size, isDeleted}`, each entry
    /// to `entry`.
    fn file_map(
        &mut self,
        schema: &'s Schema,
        ns: &Namespace,
        c: &mut Cursor<'_>,
        entry: &mut impl FnMut(&str, i64, bool),
    ) -> Result<(), AvroError> {
        let (schema, ns) = self.resolve(schema, ns, c)?;
        let values = match schema {
            Schema::Null => return Ok(()),
            Schema::Map(m) => &m.types,
            other => {
                return Err(AvroError::Shape(format!(
                    "filesystemMetadata is not a map ({other:?})"
                )))
            }
        };
        loop {
            let n = c.block_count("filesystemMetadata")?;
            if n == 0 {
                return Ok(());
            }
            for _ in 0..n {
                let name = std::str::from_utf8(c.skip_bytes("a file name")?)
                    .map_err(|_| AvroError::Shape("a file name is not UTF-8".into()))?;
                let (info, info_ns) = self.resolve(values, &ns, c)?;
                let Schema::Record(info) = info else {
                    return Err(AvroError::Shape(format!("entry `{name}` is not a record")));
                };
                let inner = info.name.fully_qualified_name(&info_ns).namespace;
                let (mut size, mut deleted) = (None, None);
                for f in &info.fields {
                    match f.name.as_str() {
                        "size" => match self.resolve(&f.schema, &inner, c)?.0 {
                            Schema::Long | Schema::Int => size = Some(c.long("a file size")?),
                            other => {
                                return Err(AvroError::Shape(format!(
                                    "entry `{name}` has no size ({other:?})"
                                )))
                            }
                        },
                        "isDeleted" => match self.resolve(&f.schema, &inner, c)?.0 {
                            Schema::Boolean => {
                                deleted = Some(match c.take(1, "a boolean")?[0] {
                                    0 => false,
                                    1 => true,
                                    b => {
                                        return Err(AvroError::Shape(format!(
                                            "entry `{name}`: {b} is not a boolean"
                                        )))
                                    }
                                })
                            }
                            other => {
                                return Err(AvroError::Shape(format!(
                                    "entry `{name}` has no isDeleted ({other:?})"
                                )))
                            }
                        },
                        _ => self.walk(&f.schema, &inner, c, 2)?,
                    }
                }
                let (Some(size), Some(deleted)) = (size, deleted) else {
                    return Err(AvroError::Shape(format!(
                        "entry `{name}` lacks its size or isDeleted"
                    )));
                };
                entry(name, size, deleted);
            }
        }
    }

    fn walk(
        &mut self,
        schema: &'s Schema,
        ns: &Namespace,
        c: &mut Cursor<'_>,
        depth: usize,
    ) -> Result<(), AvroError> {
        if depth > MAX_DEPTH {
            return Err(AvroError::Container(format!(
                "values nested deeper than {MAX_DEPTH} levels"
            )));
        }
        match schema {
            Schema::Null => {}
            Schema::Boolean => {
                c.take(1, "a boolean")?;
            }
            Schema::Int
            | Schema::Long
            | Schema::Date
            | Schema::TimeMillis
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos
            | Schema::Enum(_) => {
                c.long("a number")?;
            }
            Schema::Float => {
                c.take(4, "a float")?;
            }
            Schema::Double => {
                c.take(8, "a double")?;
            }
            Schema::Duration => {
                c.take(12, "a duration")?;
            }
            Schema::Bytes | Schema::BigDecimal => {
                c.skip_bytes("a bytes value")?;
            }
            // A string must be UTF-8, as the Avro library reads it (which refuses the datum).
            Schema::String | Schema::Uuid => {
                std::str::from_utf8(c.skip_bytes("a string")?)
                    .map_err(|_| AvroError::Shape("a string that is not UTF-8".into()))?;
            }
            Schema::Fixed(f) => {
                c.take(f.size, "a fixed value")?;
            }
            Schema::Decimal(d) => self.walk(&d.inner, ns, c, depth + 1)?,
            Schema::Array(a) => loop {
                let n = c.block_count("an array")?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    self.walk(&a.items, ns, c, depth + 1)?;
                }
            },
            Schema::Map(m) => loop {
                let n = c.block_count("a map")?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    c.skip_bytes("a map key")?;
                    self.walk(&m.types, ns, c, depth + 1)?;
                }
            },
            Schema::Union(u) => {
                let i = c.long("a union branch")?;
                let branch = usize::try_from(i)
                    .ok()
                    .and_then(|i| u.variants().get(i))
                    .ok_or_else(|| {
                        AvroError::Container(format!("union branch {i} out of range"))
                    })?;
                self.walk(branch, ns, c, depth + 1)?;
            }
            Schema::Record(r) => {
                let inner = r.name.fully_qualified_name(ns).namespace;
                for f in &r.fields {
                    self.walk(&f.schema, &inner, c, depth + 1)?;
                }
            }
            Schema::Ref { name } => {
                let full: Name = name.fully_qualified_name(ns);
                let target = self.named(&full)?;
                self.walk(target, &full.namespace, c, depth + 1)?;
            }
        }
        Ok(())
    }
}
