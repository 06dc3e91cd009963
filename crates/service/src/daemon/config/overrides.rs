//! The settings a table may override, declared once (`per_table_settings!`): `[defaults]`
//! holds each as given, a `[[tables]]` entry (and `POST /api/v1/tables`' body) each as an
//! `Option`, and one function lays an entry's over the defaults ([`Defaults::overridden_by`]).
//!
//! Both structs stay flat, with `deny_unknown_fields`: a misspelt key is refused with the key
//! named, and errors keep the key's path (serde's `flatten` would lose both).
//!
//! [`Defaults::overridden_by`]: super::Defaults::overridden_by

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{LockSettings, PolicySetting};
use crate::duration::serde_helpers::{
    de_duration, de_opt_duration, ser_duration, ser_opt_duration,
};

/// How a per-table setting is read and written, as a default and as a table's override.
pub(super) trait Setting: Sized {
    /// The value of `[defaults]`.
    fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
    /// The override of a table (absent: `None`, through `#[serde(default)]`).
    fn de_override<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error>;
    fn ser<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;

    /// A table's override, written (skipped when `None`).
    fn ser_override<S: Serializer>(v: &Option<Self>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => v.ser(s),
            None => s.serialize_none(),
        }
    }
}

/// Settings read and written as serde derives them (an override may also be `null`: unset).
macro_rules! plain_setting {
    ($($t:ty),*) => {$(
        impl Setting for $t {
            fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$t>::deserialize(d)
            }
            fn de_override<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
                Option::<$t>::deserialize(d)
            }
            fn ser<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.serialize(s)
            }
        }
    )*};
}

plain_setting!(PolicySetting, u32, usize, bool, Box<LockSettings>);

/// A duration (`30s`, or a bare number of seconds), written in milliseconds.
impl Setting for Duration {
    fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_duration(d)
    }
    fn de_override<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        de_opt_duration(d)
    }
    fn ser<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_duration(self, s)
    }
}

/// A duration that may be unset by default (`max_write_duration`); a table's override, when
/// given, is a duration.
impl Setting for Option<Duration> {
    fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_opt_duration(d)
    }
    fn de_override<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        de_duration(d).map(|d| Some(Some(d)))
    }
    fn ser<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_opt_duration(self, s)
    }
}

/// Declares `Defaults` and `TableEntry` with the overridable settings listed once, in
/// `overridable { name: Type = default, … }`: `Defaults` gets each as `Type` (then the
/// `not overridable` ones, with their defaults), `TableEntry` each as `Option<Type>` between its
/// own leading and trailing fields, and `TableOverrides` each as `Option<Type>` alone. Also
/// `Default for Defaults` and
/// [`Defaults::overridden_by`](super::Defaults::overridden_by), the merge.
macro_rules! per_table_settings {
    (
        $(#[$dmeta:meta])*
        pub struct Defaults;
        $(#[$emeta:meta])*
        pub struct TableEntry { $($ehead:tt)* }
        overridable {
            $( $(#[doc = $doc:literal])* $field:ident: $ty:ty = $default:expr, )*
        }
        not overridable {
            $( $(#[$xmeta:meta])* $xfield:ident: $xty:ty = $xdefault:expr, )*
        }
        table only { $($etail:tt)* }
    ) => {
        $(#[$dmeta])*
        pub struct Defaults {
            $(
                $(#[doc = $doc])*
                #[serde(deserialize_with = "Setting::de", serialize_with = "Setting::ser")]
                pub $field: $ty,
            )*
            $( $(#[$xmeta])* pub $xfield: $xty, )*
        }

        impl Default for Defaults {
            fn default() -> Self {
                Self {
                    $( $field: $default, )*
                    $( $xfield: $xdefault, )*
                }
            }
        }

        $(#[$emeta])*
        pub struct TableEntry {
            $($ehead)*
            $(
                $(#[doc = $doc])*
                #[serde(
                    default,
                    deserialize_with = "Setting::de_override",
                    serialize_with = "Setting::ser_override",
                    skip_serializing_if = "Option::is_none"
                )]
                pub $field: Option<$ty>,
            )*
            $($etail)*
        }

        /// The overridable settings alone, each unset unless given: a `[[discover]]` source's
        /// `defaults` for the tables it finds.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct TableOverrides {
            $(
                $(#[doc = $doc])*
                #[serde(
                    default,
                    deserialize_with = "Setting::de_override",
                    serialize_with = "Setting::ser_override",
                    skip_serializing_if = "Option::is_none"
                )]
                pub $field: Option<$ty>,
            )*
        }

        impl TableOverrides {
            /// A table entry with these overrides.
            pub fn entry(
                &self,
                name: String,
                uri: String,
                storage_options: std::collections::BTreeMap<String, String>,
            ) -> TableEntry {
                TableEntry {
                    name,
                    uri,
                    demo: false,
                    $( $field: self.$field.clone(), )*
                    storage_options,
                }
            }
        }

        impl Defaults {
            /// These defaults with `entry`'s overrides on top (a table's `lock` replaces the
            /// default one as a whole). The settings no table overrides are these defaults';
            /// `storage_options` are merged by [`Defaults::resolve`].
            pub fn overridden_by(&self, entry: &TableEntry) -> Defaults {
                Defaults {
                    $( $field: entry.$field.clone().unwrap_or_else(|| self.$field.clone()), )*
                    ..self.clone()
                }
            }

            /// Every overridable setting of these defaults as an override: a table's settings
            /// whole, to compare with other defaults ([`Defaults::weaker`]).
            pub fn as_overrides(&self) -> TableOverrides {
                TableOverrides {
                    $( $field: Some(self.$field.clone()), )*
                }
            }
        }
    };
}
