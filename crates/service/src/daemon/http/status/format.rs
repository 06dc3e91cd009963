//! Words and numbers of the status page: escaping for the SVG (built by hand), ages, moments,
//! durations, and query strings of its links.

/// Append `s` to `out` with `&`, `<`, `>`, `"` and `'` escaped (text and attribute values).
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// An age in words: `45 s`, `12 min`, `3 h`, `2 d`.
pub fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

/// A duration: `850 ms`, `1.2 s`, `3 min`.
pub fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1000..=119_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => age(ms as i64),
    }
}

/// A moment (epoch ms) in UTC, with how long ago it was.
pub fn moment(ms: i64, now_ms: i64) -> String {
    let at = chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string());
    format!("{at} ({} ago)", age(now_ms - ms))
}

/// `s` percent-encoded for a query string (everything but unreserved characters).
pub fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `hay` holds `needle` (already in ASCII lower case), ignoring ASCII case.
pub fn contains_ignore_case(hay: &str, needle: &[u8]) -> bool {
    needle.is_empty()
        || hay.as_bytes().windows(needle.len()).any(|w| {
            w.iter()
                .zip(needle)
                .all(|(a, b)| a.to_ascii_lowercase() == *b)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_numbers() {
        let mut s = String::new();
        escape_into(&mut s, r#"<a href="x">'&'</a>"#);
        assert_eq!(s, "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(age(45_000), "45 s");
        assert_eq!(age(600_000), "10 min");
        assert_eq!(age(3 * 3_600_000), "3 h");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(1_200), "1.2 s");
        assert_eq!(query_value("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert!(contains_ignore_case("Trips_Prod", b"trips"));
        assert!(contains_ignore_case("x", b""));
        assert!(!contains_ignore_case("trips", b"tripsx"));
        assert_eq!(
            moment(0, 60_000),
            "1970-01-01 00:00:00 UTC (60 s ago)".to_string()
        );
    }
}
