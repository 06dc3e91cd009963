//! Where table URIs point ([`Location`]), and the folders around an API table where a table
//! holding it would be ([`EnclosingFolders`]).

use std::path::PathBuf;

use super::Config;

/// Where a table URI points, reduced for comparison: the scheme (`s3a` read as `s3`, every Azure
/// scheme as `azure`, `file` for a local path), the bucket or host as written (an Azure container
/// with its account, see [`azure_container`]), and the path's segments (empty ones dropped, so
/// `a//b/` is `a/b`). The path is taken literally, as the store reads it: `%2e%2e` is not `..`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub(super) scheme: String,
    pub(super) authority: String,
    pub(super) segments: Vec<String>,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}/{}",
            self.scheme,
            self.authority,
            self.segments.join("/")
        )
    }
}

impl Location {
    /// Parse a table URI or a prefix: an absolute local path, `file:`, or `scheme://bucket/path`.
    /// Refused: a relative local path, a `.` or `..` segment, a bucket or host with anything but
    /// letters, digits, `-`, `.`, `_` (and `@` in Azure's `container@account`).
    pub fn parse(uri: &str) -> Result<Location, String> {
        let t = uri.trim();
        if t.is_empty() {
            return Err("the URI is empty".into());
        }
        let (scheme, authority, path) = if let Some(rest) = t.strip_prefix("file:") {
            // As the store opens it: `file:///p`, `file://localhost/p`, `file:/p`.
            let p = match rest.strip_prefix("//") {
                Some(r) => r.strip_prefix("localhost").unwrap_or(r),
                None => rest,
            };
            ("file".to_string(), String::new(), p)
        } else if let Some((scheme, rest)) = t.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let azure = matches!(scheme.as_str(), "az" | "azure" | "abfs" | "abfss" | "adl");
            if authority.is_empty()
                || !authority.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') || (azure && c == '@')
                })
            {
                return Err(format!(
                    "`{authority}` is not a plain bucket, container or host name"
                ));
            }
            let (scheme, authority) = match scheme.as_str() {
                "s3a" => ("s3".to_string(), authority.to_string()),
                _ if azure => ("azure".to_string(), azure_container(&scheme, authority)?),
                _ => (scheme, authority.to_string()),
            };
            (scheme, authority, path)
        } else {
            ("file".to_string(), String::new(), t)
        };
        if scheme == "file" && !path.starts_with('/') {
            return Err(format!("`{t}` is not an absolute path"));
        }
        let mut segments = Vec::new();
        for s in path.split('/') {
            match s {
                "" => {}
                "." | ".." => return Err(format!("`{t}` has a `{s}` segment")),
                s => segments.push(s.to_string()),
            }
        }
        Ok(Location {
            scheme,
            authority,
            segments,
        })
    }

    /// Where a registered table's URI points, to find a second registration of the same table:
    /// as [`Location::parse`], but a relative local path is read from the working folder, and a
    /// local path is resolved (links, `..`; one that does not exist yet, as far as it exists).
    /// `None` when it cannot be read.
    pub fn of_table(uri: &str) -> Option<Location> {
        let t = uri.trim();
        let local = match t.strip_prefix("file:") {
            Some(rest) => Some(match rest.strip_prefix("//") {
                Some(r) => r.strip_prefix("localhost").unwrap_or(r),
                None => rest,
            }),
            None => (!t.contains("://")).then_some(t),
        };
        match local {
            Some(p) => {
                let p = std::path::absolute(p).ok()?;
                if let Ok(real) = std::fs::canonicalize(&p) {
                    return Location::parse(real.to_str()?).ok();
                }
                // Not there (yet): where its deepest existing folder leads.
                let at = Location::parse(p.to_str()?).ok()?;
                Some(at.resolved().unwrap_or(at))
            }
            None => Location::parse(t).ok(),
        }
    }

    /// Where a local path leads: its deepest part that exists, resolved (links, `..`), with the
    /// rest appended as written (none of it exists, so no link lies in it). `None` for another
    /// scheme, or when it cannot be told: a link that leads nowhere, a folder that cannot be
    /// read.
    pub(super) fn resolved(&self) -> Option<Location> {
        if self.scheme != "file" {
            return None;
        }
        for k in (0..=self.segments.len()).rev() {
            let p = format!("/{}", self.segments[..k].join("/"));
            match std::fs::symlink_metadata(&p) {
                Ok(_) => {
                    let real = std::fs::canonicalize(&p).ok()?;
                    let mut text = real.to_str()?.trim_end_matches('/').to_string();
                    for s in &self.segments[k..] {
                        text.push('/');
                        text.push_str(s);
                    }
                    if text.is_empty() {
                        text.push('/');
                    }
                    return Location::parse(&text).ok();
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// Whether this is `prefix` or lies under it, for `server.allowed_table_uris`: the bucket,
    /// container and account exactly as the prefix names them (the store addresses the bucket
    /// as written: `s3://MyBucket` is not `s3://mybucket`), a prefix ending at a `/`.
    pub fn is_allowed_under(&self, prefix: &Location) -> bool {
        self.scheme == prefix.scheme
            && self.authority == prefix.authority
            && self.segments.starts_with(&prefix.segments)
    }

    /// Whether this may be `other` or lie under it, to find a second registration of a table:
    /// as [`Location::is_allowed_under`], but buckets in any case, and an Azure container in the
    /// default account (`az://c`) as the same container in any named account (it may be the
    /// default one).
    #[cfg(test)]
    pub fn is_under(&self, other: &Location) -> bool {
        let same_authority = self.authority.eq_ignore_ascii_case(&other.authority)
            || (self.scheme == "azure" && {
                let container = |a: &str| a.split('@').next().unwrap_or_default().to_string();
                (!self.authority.contains('@') || !other.authority.contains('@'))
                    && container(&self.authority) == container(&other.authority)
            });
        self.scheme == other.scheme && same_authority && self.segments.starts_with(&other.segments)
    }

    /// Whether a `.hoodie` folder holds it (a table's metadata table, or anything else of a
    /// table's own folder): never a table to watch on its own.
    pub fn in_hoodie(&self) -> bool {
        self.segments.iter().any(|s| s == ".hoodie")
    }

    /// The scheme: `file`, `s3` (also for `s3a`), `gs`, `azure` (every Azure scheme), or as
    /// written in lower case.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// Whether this place (where a table found by a scan of a local prefix leads, see
    /// [`Location::of_table`]) is where its path as written (`written`) says below where the
    /// prefix leads (`prefix` as written, `prefix_real` where it leads): no symbolic link on
    /// its way down from the prefix, nor out of it.
    pub fn lies_as_written_below(
        &self,
        written: &Location,
        prefix: &Location,
        prefix_real: &Location,
    ) -> bool {
        let Some(below) = written.segments.strip_prefix(prefix.segments.as_slice()) else {
            return false;
        };
        self.scheme == prefix_real.scheme
            && written.scheme == prefix.scheme
            && self.segments.strip_prefix(prefix_real.segments.as_slice()) == Some(below)
    }

    /// The place as [`Location::is_under`] compares it, as one text that every spelling of the
    /// place shares: `scheme://bucket/seg/…/` (the bucket or container in lower case, each
    /// segment followed by `/`), then, for an Azure container of a named account, `\0` and the
    /// account. A place lies inside another when its text starts with the other's up to the
    /// `\0` (see `places`). `None` when a segment holds `\0` or another control character:
    /// such a place is not compared, so not registered but from the config.
    pub fn place_key(&self) -> Option<String> {
        if self
            .segments
            .iter()
            .any(|s| s.chars().any(char::is_control))
        {
            return None;
        }
        let (container, account) = match self.authority.split_once('@') {
            Some((c, a)) if self.scheme == "azure" => (c, Some(a)),
            _ => (self.authority.as_str(), None),
        };
        let mut key = format!("{}://{}/", self.scheme, container.to_ascii_lowercase());
        for s in &self.segments {
            key.push_str(s);
            key.push('/');
        }
        if let Some(account) = account {
            key.push('\0');
            key.push_str(account);
        }
        Some(key)
    }
}

/// The container (and account) an Azure URI names, as object_store 0.14 reads it: `az://c`,
/// `azure://c`, `adl://c`, `abfs://c`, `abfss://c` name container `c` of the configured account
/// (`c`); `az`, `abfs` and `abfss` with `c@account.dfs.core.windows.net` (or
/// `blob.core.windows.net`) name container `c` of `account` (`c@account`, the account in lower
/// case as DNS reads it). Other forms (Fabric, private endpoints, `adl`/`azure` with an account)
/// are refused: they cannot be compared.
fn azure_container(scheme: &str, authority: &str) -> Result<String, String> {
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    };
    match authority.split_once('@') {
        None if plain(authority) => Ok(authority.to_string()),
        None => Err(format!("`{authority}` is not a plain Azure container name")),
        Some((container, host)) => {
            let host = host.to_ascii_lowercase();
            let account = host
                .strip_suffix(".dfs.core.windows.net")
                .or_else(|| host.strip_suffix(".blob.core.windows.net"));
            match account {
                Some(account)
                    if matches!(scheme, "az" | "abfs" | "abfss")
                        && plain(container)
                        && !account.is_empty()
                        && account.chars().all(|c| c.is_ascii_alphanumeric()) =>
                {
                    Ok(format!("{container}@{account}"))
                }
                _ => Err(format!(
                    "`{authority}` is not `container@account.dfs.core.windows.net` (or `blob.core.windows.net`) of an {scheme}:// URI; give the table as az://container/path or abfss://container@account.dfs.core.windows.net/path"
                )),
            }
        }
    }
}

/// The folders where a table holding an API table's URI would have its base path (each one's
/// `.hoodie/hoodie.properties` is looked for): from the allowed prefix the URI lies under down
/// to the URI's parent, outermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnclosingFolders {
    /// Local folders: absolute, where the URI leads (links resolved).
    Local(Vec<PathBuf>),
    /// Folders of an object store: the store as the URI names it (`scheme://bucket`), and each
    /// folder's path in it, as the URI spells it (`""`: the bucket's root).
    Store { store: String, folders: Vec<String> },
}

impl Config {
    /// Where a table around the API table at `uri` would be ([`EnclosingFolders`]): every
    /// folder from the prefix of `server.allowed_table_uris` it lies under (the shortest, when
    /// several do) down to its parent; nothing above the prefix is looked at. `None` when `uri`
    /// is not one the API may register ([`Config::check_api_entry`] says why).
    pub fn enclosing_folders(&self, uri: &str) -> Option<EnclosingFolders> {
        let at = Location::parse(uri).ok()?;
        let prefixes = self
            .server
            .allowed_table_uris
            .iter()
            .filter_map(|p| Location::parse(p).ok());
        if at.scheme == "file" {
            let real = at.resolved()?;
            let base = prefixes
                .map(|p| p.resolved().unwrap_or(p))
                .filter(|p| real.is_allowed_under(p))
                .map(|p| p.segments.len())
                .min()?;
            let folders = (base..real.segments.len())
                .map(|k| PathBuf::from(format!("/{}", real.segments[..k].join("/"))))
                .collect();
            return Some(EnclosingFolders::Local(folders));
        }
        let base = prefixes
            .filter(|p| at.is_allowed_under(p))
            .map(|p| p.segments.len())
            .min()?;
        // The store as the URI names it (`s3a://b`, `abfss://c@account…`), to be opened as the
        // table is; the path's segments are the location's, as written.
        let (scheme, rest) = uri.trim().split_once("://")?;
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        Some(EnclosingFolders::Store {
            store: format!("{scheme}://{authority}"),
            folders: (base..at.segments.len())
                .map(|k| at.segments[..k].join("/"))
                .collect(),
        })
    }
}
