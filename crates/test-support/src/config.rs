//! The daemon's TOML configuration as the suites write it, built section by section:
//! `[server]` (its `state_dir` is `state`, inside the daemon's folder), `[cluster]`,
//! `[defaults]`, raw text (storage options), `[defaults.lock]`, then the `[[tables]]`.

use std::fmt;

/// A TOML value as written: booleans, integers and arrays as they are, anything else quoted.
fn value(v: &str) -> String {
    let bare = v == "true"
        || v == "false"
        || v.starts_with('[')
        || (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
    if bare {
        v.to_string()
    } else {
        format!("\"{v}\"")
    }
}

fn lines(out: &mut String, entries: &[(String, String)]) {
    for (k, v) in entries {
        out.push_str(&format!("{k} = {}\n", value(v)));
    }
}

/// A daemon configuration; its [`Display`](fmt::Display) is the TOML text.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    server: Vec<(String, String)>,
    cluster: Vec<(String, String)>,
    defaults: Vec<(String, String)>,
    raw: String,
    lock: Vec<(String, String)>,
    tables: String,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl DaemonConfig {
    /// `[server]` with `state_dir = "state"`, and nothing else.
    pub fn new() -> Self {
        Self {
            server: vec![("state_dir".into(), "state".into())],
            cluster: Vec::new(),
            defaults: Vec::new(),
            raw: String::new(),
            lock: Vec::new(),
            tables: String::new(),
        }
    }

    /// A `[server]` setting.
    pub fn server(mut self, key: &str, v: &str) -> Self {
        self.server.push((key.into(), v.into()));
        self
    }

    /// A `[cluster]` setting.
    pub fn cluster(mut self, key: &str, v: &str) -> Self {
        self.cluster.push((key.into(), v.into()));
        self
    }

    /// A `[defaults]` setting.
    pub fn defaults(mut self, key: &str, v: &str) -> Self {
        self.defaults.push((key.into(), v.into()));
        self
    }

    /// Text written as it is after the `[defaults]` settings (more of them, or a
    /// `[defaults.storage_options]` section).
    pub fn raw(mut self, text: &str) -> Self {
        self.raw.push_str(text);
        self
    }

    /// A `[defaults.lock]` setting.
    pub fn lock(mut self, key: &str, v: &str) -> Self {
        self.lock.push((key.into(), v.into()));
        self
    }

    /// A `[[tables]]` entry.
    pub fn table(self, name: &str, uri: &str) -> Self {
        self.table_with(name, uri, &[])
    }

    /// A `[[tables]]` entry with settings of its own.
    pub fn table_with(mut self, name: &str, uri: &str, settings: &[(&str, &str)]) -> Self {
        self.tables.push_str("[[tables]]\n");
        let mut entries = vec![("name".to_string(), name.to_string())];
        entries.push(("uri".to_string(), uri.to_string()));
        entries.extend(settings.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        lines(&mut self.tables, &entries);
        self
    }
}

impl fmt::Display for DaemonConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = "[server]\n".to_string();
        lines(&mut out, &self.server);
        if !self.cluster.is_empty() {
            out.push_str("[cluster]\n");
            lines(&mut out, &self.cluster);
        }
        if !self.defaults.is_empty() {
            out.push_str("[defaults]\n");
            lines(&mut out, &self.defaults);
        }
        out.push_str(&self.raw);
        if !self.lock.is_empty() {
            out.push_str("[defaults.lock]\n");
            lines(&mut out, &self.lock);
        }
        out.push_str(&self.tables);
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::DaemonConfig;

    #[test]
    fn the_sections_come_in_order_and_values_are_written_as_toml_wants() {
        let c = DaemonConfig::new()
            .server("auth_token", "tok")
            .server("halt_after_failures", "2")
            .cluster("mode", "static")
            .defaults("poll_interval", "1h")
            .defaults("assume_lazy_writers", "true")
            .raw("[defaults.storage_options]\nx = \"y\"\n")
            .lock("provider", "filesystem")
            .table("t", "/tmp/t")
            .table_with("u", "s3://b/u", &[("failed_writes_policy", "observe")]);
        assert_eq!(
            c.to_string(),
            "[server]\nstate_dir = \"state\"\nauth_token = \"tok\"\nhalt_after_failures = 2\n[cluster]\nmode = \"static\"\n[defaults]\npoll_interval = \"1h\"\nassume_lazy_writers = true\n[defaults.storage_options]\nx = \"y\"\n[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"/tmp/t\"\n[[tables]]\nname = \"u\"\nuri = \"s3://b/u\"\nfailed_writes_policy = \"observe\"\n"
        );
    }

    #[test]
    fn a_bare_config_is_the_server_section_and_its_state_dir() {
        assert_eq!(
            DaemonConfig::new().to_string(),
            "[server]\nstate_dir = \"state\"\n"
        );
    }
}
