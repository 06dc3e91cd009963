//! `java.util.Properties` text format, as `hoodie.properties` is written.

use std::collections::BTreeMap;

/// Where and why a properties text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct PropertiesError {
    /// 1-based line number of the logical line that failed.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// Parse the text of a Java properties file (ISO-8859-1 escapes aside: Hudi writes ASCII with
/// `\uXXXX` escapes, and UTF-8 bytes are kept as they are).
///
/// Follows `java.util.Properties.load`: `#` and `!` comments, `=`, `:` or whitespace as the
/// key/value separator, backslash escapes (`\t \n \r \f \uXXXX`, any other escaped character
/// stands for itself) and backslash line continuations. A later key replaces an earlier one.
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, PropertiesError> {
    let mut out = BTreeMap::new();
    let mut lines = text.split('\n').enumerate().peekable();
    while let Some((idx, raw)) = lines.next() {
        let first_line = idx + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim_start_matches([' ', '\t', '\x0c']);
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes continues the line.
        let mut logical = trimmed.to_string();
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => {
                    let next = next.strip_suffix('\r').unwrap_or(next);
                    logical.push_str(next.trim_start_matches([' ', '\t', '\x0c']));
                }
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).map_err(|reason| PropertiesError {
            line: first_line,
            reason,
        })?;
        let value = unescape(value).map_err(|reason| PropertiesError {
            line: first_line,
            reason,
        })?;
        out.insert(key, value);
    }
    Ok(out)
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// Split at the first unescaped `=`, `:` or whitespace; whitespace around the separator is
/// skipped.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut key_end = line.len();
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => {
                key_end = i;
                break;
            }
            _ => i += 1,
        }
    }
    if key_end >= line.len() {
        return (line, "");
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("malformed \\uXXXX escape `\\u{hex}`"))?;
                let ch = char::from_u32(code)
                    .ok_or_else(|| format!("\\u{hex} is not a character on its own"))?;
                out.push(ch);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_a_real_hoodie_properties() {
        let text = "#Updated at 2025-01-26T04:08:23.532Z\n#Sun Jan 26 04:08:23 UTC 2025\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=6\nhoodie.table.create.schema={\"type\"\\:\"record\"}\nhoodie.archivelog.folder=archived\n";
        let p = parse(text).unwrap();
        assert_eq!(p["hoodie.table.type"], "MERGE_ON_READ");
        assert_eq!(p["hoodie.table.version"], "6");
        assert_eq!(p["hoodie.table.create.schema"], "{\"type\":\"record\"}");
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn follows_java_separators_escapes_and_continuations() {
        let text =
            "a = 1\nb:2\nc 3\n  ! comment\nd\\ key=x\\ty\ne=\\u0041\\\\\nf=one\\\n    two\ng\n";
        let p = parse(text).unwrap();
        assert_eq!(p["a"], "1");
        assert_eq!(p["b"], "2");
        assert_eq!(p["c"], "3");
        assert_eq!(p["d key"], "x\ty");
        assert_eq!(p["e"], "A\\");
        assert_eq!(p["f"], "onetwo");
        assert_eq!(p["g"], "");
    }

    #[test]
    fn crlf_line_ends_are_accepted() {
        let p = parse("a=1\r\nb=2\r\n").unwrap();
        assert_eq!(p["a"], "1");
        assert_eq!(p["b"], "2");
    }

    #[test]
    fn a_bad_unicode_escape_names_its_line() {
        let err = parse("a=1\nb=\\u12G4\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.reason.contains("\\u"), "{err}");
    }

    fn escape(s: &str, is_key: bool) -> String {
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '=' | ':' | '#' | '!' => {
                    out.push('\\');
                    out.push(c);
                }
                ' ' if is_key || i == 0 => out.push_str("\\ "),
                c => out.push(c),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn parse_inverts_java_style_escaping(
            entries in proptest::collection::btree_map("[a-z.:= #!\\\\]{1,12}", "[ -~\t\n]{0,16}", 0..8)
        ) {
            let text: String = entries
                .iter()
                .map(|(k, v)| format!("{}={}\n", escape(k, true), escape(v, false)))
                .collect();
            let parsed = parse(&text).unwrap();
            prop_assert_eq!(parsed, entries);
        }
    }
}
