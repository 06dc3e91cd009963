//! Instant times: `yyyyMMddHHmmssSSS` (or the legacy `yyyyMMddHHmmss`) in the table's zone.

use chrono::{DateTime, Local, NaiveDateTime, TimeZone, Utc};

use crate::config::TimelineTimezone;

/// The zone instant times of a table are written in. `Local` is this process's zone (set `TZ`
/// to the writers' zone for tables with `hoodie.table.timeline.timezone=LOCAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstantZone {
    /// UTC.
    Utc,
    /// The process's local zone.
    Local,
}

impl From<TimelineTimezone> for InstantZone {
    fn from(tz: TimelineTimezone) -> Self {
        match tz {
            TimelineTimezone::Utc => InstantZone::Utc,
            TimelineTimezone::Local => InstantZone::Local,
        }
    }
}

/// The wall-clock moment an instant time stands for, in epoch milliseconds. Legacy second
/// precision times count as `…999` ms, as Hudi compares them. Longer (suffixed metadata-table)
/// times use their first 17 digits. `None` for special or malformed times.
pub fn instant_to_epoch_ms(time: &str, zone: InstantZone) -> Option<i64> {
    if !time.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (secs, millis) = match time.len() {
        14 => (time, 999),
        n if n >= 17 => (&time[..14], time[14..17].parse::<i64>().ok()?),
        _ => return None,
    };
    let naive = NaiveDateTime::parse_from_str(secs, "%Y%m%d%H%M%S").ok()?;
    let base = match zone {
        InstantZone::Utc => Utc.from_utc_datetime(&naive).timestamp_millis(),
        InstantZone::Local => Local
            .from_local_datetime(&naive)
            .earliest()?
            .timestamp_millis(),
    };
    Some(base + millis)
}

/// Format a moment as a 17-digit instant time in `zone`.
pub fn format_instant(at: DateTime<Utc>, zone: InstantZone) -> String {
    const FMT: &str = "%Y%m%d%H%M%S%3f";
    match zone {
        InstantZone::Utc => at.format(FMT).to_string(),
        InstantZone::Local => at.with_timezone(&Local).format(FMT).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn millisecond_and_second_times_convert() {
        assert_eq!(
            instant_to_epoch_ms("20250126040823628", InstantZone::Utc),
            Some(1_737_864_503_628)
        );
        assert_eq!(
            instant_to_epoch_ms("20250126040823", InstantZone::Utc),
            Some(1_737_864_503_999)
        );
        assert_eq!(
            instant_to_epoch_ms("20250126040823628001", InstantZone::Utc),
            Some(1_737_864_503_628)
        );
    }

    #[test]
    fn special_and_malformed_times_have_no_moment() {
        for t in [
            "00000000000000",
            "00000000000001",
            "0000000000000000",
            "abc",
            "2025",
        ] {
            assert_eq!(instant_to_epoch_ms(t, InstantZone::Utc), None, "{t}");
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(ms in 0i64..4_102_444_800_000) {
            let at = Utc.timestamp_millis_opt(ms).unwrap();
            let s = format_instant(at, InstantZone::Utc);
            prop_assert_eq!(s.len(), 17);
            prop_assert_eq!(instant_to_epoch_ms(&s, InstantZone::Utc), Some(ms));
        }
    }
}
