//! `[[tables]]` entries read one at a time. figment holds a document as one tree of values and
//! clones that tree once more to extract it: a file of 100,000 entries took 120 MiB of heap at
//! the peak that way. Here the text is cut at its table headers (found with `toml_parser`'s
//! lexer, which reads strings, multi-line strings, arrays and comments as TOML does): every
//! `[[tables]]` entry, with the `[tables.…]` sub-tables that follow it, is parsed on its own,
//! and only the rest of the file goes through figment.

use toml_parser::lexer::TokenKind;
use toml_parser::Source;

use super::TableEntry;

/// A configuration text cut into its `[[tables]]` entries and the rest.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cut<'a> {
    /// The text with each `[[tables]]` entry replaced by as many empty lines (what figment
    /// reads: its errors name the lines of the file).
    pub rest: String,
    /// Each entry's text (its header first) and the line it starts at (1-based).
    pub entries: Vec<(usize, &'a str)>,
}

/// What a header line opens.
#[derive(Debug, PartialEq, Eq)]
enum Header {
    /// `[[tables]]`: a new entry.
    Entry,
    /// `[tables.…]` or `[[tables.…]]`: a sub-table of the entry before it.
    OfEntry,
    /// Any other table.
    Other,
}

/// The header whose text (from its first `[` to the end of its line) is `line`; `None` when it
/// cannot be told without a full parse (a quoted key with escapes, a `[tables]` table).
fn header(line: &str) -> Option<Header> {
    let array = line.starts_with("[[");
    let inner = line.trim_start_matches('[').trim_start();
    let first = if let Some(q) = inner.strip_prefix('"').or_else(|| inner.strip_prefix('\'')) {
        let end = q.find(['"', '\''])?;
        let key = &q[..end];
        if key.contains('\\') {
            return None;
        }
        (key, q[end + 1..].trim_start())
    } else {
        let end = inner.find(['.', ']', ' ', '\t']).unwrap_or(inner.len());
        (&inner[..end], inner[end..].trim_start())
    };
    let (key, after) = first;
    if key != "tables" {
        return Some(Header::Other);
    }
    match (array, after.starts_with('.')) {
        (true, false) => Some(Header::Entry),
        (_, true) => Some(Header::OfEntry),
        (false, false) => None,
    }
}

/// Cut `text` at its headers; `None` when it cannot be cut safely (the caller reads it whole,
/// as before): a header that cannot be told, brackets that do not balance.
pub fn cut<'a>(text: &'a str) -> Option<Cut<'a>> {
    // Where each header's line starts, and what it opens.
    let mut headers: Vec<(usize, Header)> = Vec::new();
    let mut depth: u32 = 0;
    let mut line_start = true;
    let mut in_header = false;
    for token in Source::new(text).lex() {
        let span = token.span();
        match token.kind() {
            TokenKind::Newline => {
                line_start = true;
                in_header = false;
                continue;
            }
            TokenKind::Whitespace | TokenKind::Comment => continue,
            TokenKind::Eof => break,
            TokenKind::LeftSquareBracket if line_start && depth == 0 => {
                let line_end = text[span.start()..]
                    .find('\n')
                    .map_or(text.len(), |n| span.start() + n);
                let kind = header(&text[span.start()..line_end])?;
                let begins = text[..span.start()].rfind('\n').map_or(0, |n| n + 1);
                headers.push((begins, kind));
                in_header = true;
            }
            TokenKind::LeftSquareBracket | TokenKind::LeftCurlyBracket if !in_header => depth += 1,
            TokenKind::RightSquareBracket | TokenKind::RightCurlyBracket if !in_header => {
                depth = depth.checked_sub(1)?
            }
            _ => {}
        }
        line_start = false;
    }
    if depth != 0 {
        return None;
    }
    let mut out = Cut::default();
    let mut from = 0; // the start of text not yet given to either side
    let mut entry: Option<usize> = None; // the start of the entry being read
    let mut line = 1;
    let mut counted = 0; // `line` is the line of byte `counted`
    let mut line_of = |at: usize| {
        line += text[counted..at].matches('\n').count();
        counted = at;
        line
    };
    let mut take = |out: &mut Cut<'a>, start: usize, end: usize| {
        let entry = &text[start..end];
        out.entries.push((line_of(start), entry));
        for _ in 0..entry.matches('\n').count() {
            out.rest.push('\n');
        }
    };
    for (at, kind) in headers {
        match (kind, entry) {
            (Header::OfEntry, Some(_)) => {}
            (Header::Entry, _) => {
                match entry.replace(at) {
                    Some(start) => take(&mut out, start, at),
                    None => out.rest.push_str(&text[from..at]),
                }
                from = at;
            }
            (Header::Other | Header::OfEntry, _) => {
                if let Some(start) = entry.take() {
                    take(&mut out, start, at);
                    from = at;
                }
            }
        }
    }
    match entry {
        Some(start) => take(&mut out, start, text.len()),
        None => out.rest.push_str(&text[from..]),
    }
    Some(out)
}

/// One `[[tables]]` entry's text parsed alone.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct One {
    tables: Vec<TableEntry>,
}

/// The entry of `text` (starting at `line` of `file`), or what is wrong with it, naming the
/// line.
pub fn parse_entry(text: &str, line: usize, file: &str) -> Result<TableEntry, String> {
    let one: One = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(line, |s| {
            line + text[..s.start.min(text.len())].matches('\n').count()
        });
        format!(
            "{file}, line {at} (the `[[tables]]` entry at line {line}): {}",
            e.message()
        )
    })?;
    let mut tables = one.tables;
    match (tables.pop(), tables.is_empty()) {
        (Some(t), true) => Ok(t),
        _ => Err(format!(
            "{file}, line {line}: the `[[tables]]` entry there is not one table"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# a comment with [[tables]]
[server]
listen = "127.0.0.1:9000"
allowed_table_uris = [
  "s3://b/[[tables]]",
  [1, 2],
]
note = """
[[tables]]
name = "not a table"
"""
[[tables]]
name = "a"
uri = "/a"
[tables.lock]
provider = "none"
[[tables]] # the second
name = "b"
uri = '''/b
[x]'''
[cluster]
mode = "none"
[[tables]]
name = "c"
uri = "/c"
"#;

    #[test]
    fn entries_are_cut_at_their_headers_and_strings_arrays_comments_are_not() {
        let cut = cut(TEXT).unwrap();
        let starts: Vec<usize> = cut.entries.iter().map(|(l, _)| *l).collect();
        assert_eq!(starts, [12, 17, 23]);
        assert!(cut.entries[0].1.starts_with("[[tables]]\nname = \"a\""));
        assert!(cut.entries[0].1.ends_with("provider = \"none\"\n"));
        assert!(cut.entries[1].1.ends_with("[x]'''\n"));
        assert!(cut
            .rest
            .contains("note = \"\"\"\n[[tables]]\nname = \"not a table\""));
        assert!(cut.rest.contains("[cluster]\nmode = \"none\"\n"));
        // Nothing is lost or doubled, and the rest keeps the file's line numbers.
        let mut joined = cut.rest.clone();
        for (line, t) in &cut.entries {
            let at = joined
                .match_indices('\n')
                .nth(line - 2)
                .map_or(0, |(i, _)| i + 1);
            let lines = t.matches('\n').count();
            let end = at + lines;
            assert_eq!(&joined[at..end], "\n".repeat(lines));
            joined.replace_range(at..end, t);
        }
        assert_eq!(joined, TEXT);
        let names: Vec<String> = cut
            .entries
            .iter()
            .map(|(l, t)| parse_entry(t, *l, "f").unwrap().name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        let rest: toml::Table = toml::from_str(&cut.rest).unwrap();
        assert!(!rest.contains_key("tables"));
    }

    #[test]
    fn what_cannot_be_told_without_a_full_parse_is_not_cut() {
        assert_eq!(cut("[tables]\nx = 1\n"), None);
        assert_eq!(cut("[[\"tab\\u006ces\"]]\nname = \"a\"\n"), None);
        assert_eq!(cut("x = [1, 2\n"), None);
        // Quoted `tables` is the same key.
        let c = cut("[[\"tables\"]]\nname = \"a\"\nuri = \"/a\"\n").unwrap();
        assert_eq!(c.entries.len(), 1);
    }

    #[test]
    fn an_error_names_the_entry_and_its_line() {
        let cut =
            cut("[server]\n\n[[tables]]\nname = \"a\"\nuri = \"/a\"\npoll_intervall = \"1s\"\n")
                .unwrap();
        let (line, text) = cut.entries[0];
        let e = parse_entry(text, line, "hk.toml").unwrap_err();
        assert!(
            e.starts_with("hk.toml, line 6 (the `[[tables]]` entry at line 3): "),
            "{e}"
        );
        assert!(e.contains("poll_intervall"), "{e}");
    }

    /// One generated piece of a configuration: an entry (with or without a sub-table, with
    /// values that look like headers), another section, or a comment.
    fn piece() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let value = prop_oneof![
            "[a-z/]{0,8}".prop_map(|v| format!("\"{v}\"")),
            "[a-z]{0,4}".prop_map(|v| format!("\"\"\"\n[[tables]]\n{v}\n[x]\"\"\"")),
            "[a-z]{0,4}".prop_map(|v| format!("'''\n[tables.lock]\n{v}'''")),
            Just("[\n  \"[[tables]]\",\n  [1, 2],\n]".to_string()),
        ];
        prop_oneof![
            ("[a-z]{1,6}", value.clone(), any::<bool>()).prop_map(|(n, v, lock)| {
                let mut t = format!("[[tables]]\nname = \"{n}\"\nuri = {v}\n");
                if lock {
                    t.push_str("[tables.lock]\nprovider = \"none\" # [[tables]]\n");
                }
                t
            }),
            ("[a-z]{1,6}", value).prop_map(|(k, v)| format!("[s{k}]\nv = {v}\n")),
            Just("# [[tables]]\n\n".to_string()),
        ]
    }

    proptest::proptest! {
        /// Cut and parsed one at a time, a configuration reads as it reads whole: the same
        /// entries in order, and the same rest.
        #[test]
        fn a_cut_configuration_reads_as_the_whole(pieces in proptest::collection::vec(piece(), 0..12)) {
            let text: String = pieces.concat();
            let Ok(whole) = toml::from_str::<toml::Table>(&text) else {
                return Ok(()); // e.g. one section twice: not TOML, figment refuses it whole
            };
            let cut = cut(&text).expect("a TOML document is cut");
            let mut rest: toml::Table = toml::from_str(&cut.rest).expect("the rest is TOML");
            let mut entries = Vec::new();
            for (_, t) in &cut.entries {
                let mut one: toml::Table = toml::from_str(t).expect("an entry is TOML");
                let tables = one.remove("tables").expect("its tables");
                proptest::prop_assert!(one.is_empty());
                entries.extend(tables.as_array().expect("an array").iter().cloned());
            }
            if !entries.is_empty() {
                rest.insert("tables".into(), toml::Value::Array(entries));
            }
            proptest::prop_assert_eq!(rest, whole);
        }
    }
}
