//! Values as messages show them to people: durations as `350ms`, `4.2s`, `3m 12s`, `1h 02m`,
//! `2d 03h` (the `inspect` table's ages and every verdict's reason alike).

use std::fmt;

/// A duration in ms, the way messages show it (negative ones with a `-`).
pub fn duration_ms(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let s = ms / 1000;
    let text = match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{}.{}s", s, (ms % 1000) / 100),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {:02}h", s / 86_400, (s % 86_400) / 3600),
    };
    format!("{sign}{text}")
}

/// A number of ms shown as [`duration_ms`] shows it (one beyond `i64` as the largest).
#[derive(Debug, Clone, Copy)]
pub struct Ms<T>(pub T);

impl<T: Copy + TryInto<i64>> fmt::Display for Ms<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&duration_ms(self.0.try_into().unwrap_or(i64::MAX)))
    }
}

/// `v` (a field's reference, as `thiserror` hands it) as [`Ms`].
pub fn ms<T: Copy + TryInto<i64>>(v: &T) -> Ms<T> {
    Ms(*v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_largest_two_units() {
        assert_eq!(duration_ms(350), "350ms");
        assert_eq!(duration_ms(4_250), "4.2s");
        assert_eq!(duration_ms(600_005), "10m 00s");
        assert_eq!(duration_ms(3_723_000), "1h 02m");
        assert_eq!(duration_ms(183_600_000), "2d 03h");
        assert_eq!(duration_ms(-1_500), "-1.5s");
        assert_eq!(Ms(120_000u128).to_string(), "2m 00s");
        assert_eq!(Ms(u128::MAX).to_string(), duration_ms(i64::MAX));
    }
}
