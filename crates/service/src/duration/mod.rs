//! Durations on the command line and in config: `500ms`, `30s`, `2m`, `1h`, `1d`, or a bare
//! number of seconds; several parts may be combined (`1m30s`, `1h 30m`), and a unit may be
//! spelt out after a space (`5 minutes`, `2 hours`, `1 day`). At most [`MAX_DURATION`].

pub(crate) mod serde_helpers;

use std::time::Duration;

/// The longest duration accepted: 100 years. Longer ones are refused rather than saturated: a
/// timeout or interval of `u64::MAX` seconds overflows every clock it is added to (a poll
/// timeout that long panicked the daemon's poll task), and none means anything here.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Parse a duration such as `90s`, `1m30s` or `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = parse_unbounded(s)?;
    if d > MAX_DURATION {
        return Err(format!(
            "\"{}\" is longer than the limit of 100 years",
            s.trim()
        ));
    }
    Ok(d)
}

fn parse_unbounded(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "\"{s}\" is not a duration (e.g. 500ms, 30s, 2m, 1h, 5 minutes)"
            ));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("\"{s}\": number too large"))?;
        rest = rest[digits..].trim_start();
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = rest[unit_len..].trim_start();
        let part = match unit {
            "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => Duration::from_millis(n),
            "s" | "sec" | "secs" | "second" | "seconds" => Duration::from_secs(n),
            "m" | "min" | "mins" | "minute" | "minutes" => Duration::from_secs(n.saturating_mul(60)),
            "h" | "hr" | "hrs" | "hour" | "hours" => Duration::from_secs(n.saturating_mul(3600)),
            "d" | "day" | "days" => Duration::from_secs(n.saturating_mul(86_400)),
            "" => {
                return Err(format!(
                    "\"{s}\": {n} has no unit (use ms, s, m, h or d, or their names: 5 minutes)"
                ))
            }
            _ => {
                return Err(format!(
                    "\"{s}\": unknown unit \"{unit}\" (use ms, s, m, h or d, or their names: 5 minutes)"
                ))
            }
        };
        total = total.saturating_add(part);
    }
    Ok(total)
}

/// Parse a file-system lock expiry as Hudi reads `hoodie.write.lock.filesystem.expire`: a bare
/// number is whole minutes (so a writer's `10` means the same here); `30s`, `10m`, `1h` keep
/// their unit. `0` means the lock never expires.
pub fn parse_lock_expire(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<u64>() {
        Ok(minutes) => parse_duration(&format!("{minutes}m")),
        Err(_) => parse_duration(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    }

    #[test]
    fn units_may_be_spelt_out_and_parts_spaced() {
        assert_eq!(parse_duration("5 minutes"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1 minute"), Ok(Duration::from_secs(60)));
        assert_eq!(
            parse_duration("2 hours 30 mins"),
            Ok(Duration::from_secs(9000))
        );
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1 day"), Ok(Duration::from_secs(86_400)));
        assert_eq!(
            parse_duration("250 milliseconds"),
            Ok(Duration::from_millis(250))
        );
        assert_eq!(parse_duration("45 secs"), Ok(Duration::from_secs(45)));
    }

    #[test]
    fn a_missing_or_unknown_unit_is_named_in_the_message() {
        let e = parse_duration("5 x").unwrap_err();
        assert!(e.contains("unknown unit \"x\""), "{e}");
        let e = parse_duration("1m 5").unwrap_err();
        assert!(e.contains("5 has no unit"), "{e}");
        assert!(!e.contains("``"), "{e}");
    }

    #[test]
    fn a_bare_lock_expiry_is_minutes_as_in_hudi_and_a_unit_is_kept() {
        assert_eq!(parse_lock_expire("10"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_lock_expire("0"), Ok(Duration::ZERO));
        assert_eq!(parse_lock_expire("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_lock_expire("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_lock_expire("-1").is_err());
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "s", "10x", "1.5s", "-1s", "5 weeks", "1m 5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
