//! How the configuration reads and writes durations: `30s`, `1m30s`, or a bare number (seconds;
//! minutes for `lock.filesystem_expire`, as in Hudi), at most [`MAX_DURATION`].

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::{parse_duration, parse_lock_expire, MAX_DURATION};

pub(crate) fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Secs(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Text(s) => parse_duration(&s).map_err(serde::de::Error::custom),
        Raw::Secs(n) => within_limit(Duration::from_secs(n), &format!("{n}")),
    }
}

/// A bare number is held to the limit a duration with a unit is (`crate::duration`): a longer one
/// would overflow the clock arithmetic of the polls (`Instant + d` panics).
fn within_limit<E: serde::de::Error>(d: Duration, given: &str) -> Result<Duration, E> {
    if d > MAX_DURATION {
        return Err(E::custom(format!(
            "`{given}` is longer than the limit of 100 years"
        )));
    }
    Ok(d)
}

/// `lock.filesystem_expire`: a bare number (a TOML integer or a string of digits) is minutes, as
/// Hudi reads `hoodie.write.lock.filesystem.expire`; a value with a unit keeps it.
pub(crate) fn de_lock_expire<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Minutes(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Text(s) => parse_lock_expire(&s).map_err(serde::de::Error::custom),
        Raw::Minutes(n) => within_limit(
            Duration::from_secs(n.saturating_mul(60)),
            &format!("{n} minutes"),
        ),
    }
}

pub(crate) fn de_opt_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

pub(crate) fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}ms", d.as_millis()))
}

pub(crate) fn ser_opt_duration<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}
