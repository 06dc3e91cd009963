//! Hudi's `ZookeeperBasedLockProvider`: a Curator `InterProcessMutex` at
//! `<base_path>/<lock_key>` (`hoodie.write.lock.zookeeper.base_path` and `.lock_key`, the
//! latter the table name by default).
//!
//! The recipe, as Curator runs it and as a Java writer expects a peer to run it: each contender
//! creates an ephemeral sequential node `<lock path>/_c_<uuid>-lock-<sequence>` (the `_c_<uuid>-`
//! prefix is Curator's "protection"); the children of the lock path are ordered by what follows
//! the last `lock-` in their names (the ten-digit sequence the server appends), and the
//! contender whose node comes first holds the lock. A contender that gives up, or a holder
//! that releases, deletes its node; a holder that dies loses its node when its session ends.
//! Missing parents are created (Curator creates them as container nodes; here they are
//! persistent, which a Curator peer treats the same).
//!
//! A waiting contender looks again every retry interval instead of watching its predecessor:
//! it costs a request per interval and keeps the recipe small. The session itself is
//! [`super::zk_client`]'s (the `zookeeper-client` crate: TLS, SASL DIGEST-MD5).

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::zk_client::{CreateMode, ZkClient, ZkConnect, ZkError, ZkSasl, ZkTls};

/// Curator's lock node name, after the protection prefix.
const LOCK_NAME: &str = "lock-";

/// Where a ZooKeeper lock lives and how to talk to the ensemble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkLockConfig {
    /// `host:port[,host:port…]` (Hudi: `hoodie.write.lock.zookeeper.url` and `.port`).
    pub connect: String,
    /// `hoodie.write.lock.zookeeper.base_path`, for example `/hudi/locks`.
    pub base_path: String,
    /// `hoodie.write.lock.zookeeper.lock_key`. Empty: the table's `hoodie.table.name`, the key
    /// Hudi's writers infer when none is set ([`super::LockOptions::for_table`] fills it in before
    /// the lock is taken; a lock is never taken with an empty key).
    pub lock_key: String,
    /// `hoodie.write.lock.zookeeper.session_timeout_ms` (Hudi's default: 60 s).
    pub session_timeout: Duration,
    /// `hoodie.write.lock.zookeeper.connection_timeout_ms` (Hudi's default: 15 s).
    pub connection_timeout: Duration,
    /// TLS to the servers' secure port (Java: `zookeeper.client.secure=true` with the
    /// `zookeeper.ssl.*` stores); `None`: plain TCP.
    pub tls: Option<ZkTls>,
    /// SASL DIGEST-MD5 (Java: the `DigestLoginModule` of the JAAS file's `Client` section);
    /// `None`: no SASL.
    pub sasl: Option<ZkSasl>,
}

impl ZkLockConfig {
    /// Check the path rules Hudi applies: an absolute base path without a trailing `/`, a key
    /// without `/` (empty: the table's name), and a connect string without a chroot.
    pub fn validate(&self) -> Result<(), String> {
        if !self.base_path.starts_with('/')
            || (self.base_path.len() > 1 && self.base_path.ends_with('/'))
        {
            return Err(format!(
                "the base path `{}` must start with `/` and not end with `/`, as Hudi requires",
                self.base_path
            ));
        }
        if self.lock_key.contains('/') || self.lock_key == "." || self.lock_key == ".." {
            return Err(format!(
                "the lock key `{}` must be one path segment",
                self.lock_key
            ));
        }
        if self.connect.trim().is_empty() || self.connect.contains('/') {
            return Err(format!(
                "the url `{}` must be host:port[,host:port…] without a chroot",
                self.connect
            ));
        }
        Ok(())
    }

    /// How to open a session with the ensemble.
    pub fn connect(&self) -> ZkConnect {
        ZkConnect {
            connect: self.connect.clone(),
            session_timeout: self.session_timeout,
            connection_timeout: self.connection_timeout,
            tls: self.tls.clone(),
            sasl: self.sasl.clone(),
        }
    }

    /// The znode of the mutex: `<base_path>/<lock_key>`.
    pub fn lock_path(&self) -> String {
        format!("{}/{}", self.base_path.trim_end_matches('/'), self.lock_key)
    }
}

/// The files a ZooKeeper lock's TLS and SASL settings name, as an operator gives them (CLI
/// flags, the daemon's `[lock]` keys): one place that reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZkSecurityFiles {
    /// A JAAS file with a `DigestLoginModule` entry (the writers' `java.security.auth.login.config`).
    pub jaas_file: Option<std::path::PathBuf>,
    /// Its section (default `Client`, as ZooKeeper's `zookeeper.sasl.clientconfig`).
    pub jaas_section: Option<String>,
    /// PEM CA certificates: TLS on.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// PEM client certificate, with `tls_key_file`.
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// PEM client key, with `tls_cert_file`.
    pub tls_key_file: Option<std::path::PathBuf>,
}

impl ZkSecurityFiles {
    /// Whether any file is named.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The TLS settings and the SASL credentials these files give (the JAAS file is read now;
    /// the PEM files when a session is opened).
    pub fn load(&self) -> Result<(Option<ZkTls>, Option<ZkSasl>), String> {
        let tls = match (&self.tls_ca_file, &self.tls_cert_file, &self.tls_key_file) {
            (None, None, None) => None,
            (None, _, _) => {
                return Err("a TLS client certificate or key needs the CA file too".into())
            }
            (Some(_), Some(_), None) | (Some(_), None, Some(_)) => {
                return Err(
                    "a TLS client certificate needs both the certificate and the key file".into(),
                )
            }
            (Some(ca), cert, key) => Some(ZkTls {
                ca_file: ca.clone(),
                cert_file: cert.clone(),
                key_file: key.clone(),
            }),
        };
        let sasl = match &self.jaas_file {
            None if self.jaas_section.is_some() => {
                return Err("a JAAS section needs the JAAS file".into())
            }
            None => None,
            Some(path) => {
                let bytes = read_small(path)?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| format!("the JAAS file `{}` is not UTF-8", path.display()))?;
                let section = self.jaas_section.as_deref().unwrap_or("Client");
                Some(
                    jaas_digest_credentials(&text, section)
                        .map_err(|e| format!("the JAAS file `{}`: {e}", path.display()))?,
                )
            }
        };
        Ok((tls, sasl))
    }
}

/// A small configuration file, at most 1 MiB.
fn read_small(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("`{}`: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take((1 << 20) + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("`{}`: {e}", path.display()))?;
    if bytes.len() > 1 << 20 {
        return Err(format!("`{}` is larger than 1 MiB", path.display()));
    }
    Ok(bytes)
}

/// The DIGEST-MD5 credentials of a JAAS login configuration (the file a Java writer names
/// with `-Djava.security.auth.login.config`): the `username` and `password` options of the
/// `org.apache.zookeeper.server.auth.DigestLoginModule` entry of `section` (ZooKeeper's client
/// reads `Client` unless `zookeeper.sasl.clientconfig` names another). `//` and `/* */`
/// comments, quoted and bare values are read as Java reads them. An error never quotes the
/// file's text (a damaged file could put a secret where a name belongs): it names the section
/// asked for and counts the rest.
pub fn jaas_digest_credentials(text: &str, section: &str) -> Result<ZkSasl, String> {
    const DIGEST: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";
    let tokens = jaas_tokens(text)?;
    let mut cur = JaasCursor {
        tokens: &tokens,
        at: 0,
    };
    let mut found = false;
    let mut sections = 0usize;
    let mut modules = Vec::new();
    let mut digest: Option<(Option<String>, Option<String>)> = None;
    while let Some(t) = cur.next() {
        let JaasToken::Word(name) = t else {
            return Err("expected a section name".into());
        };
        if cur.next() != Some(&JaasToken::Open) {
            return Err(format!(
                "section {}: expected `{{` after its name",
                sections + 1
            ));
        }
        let this = name == section;
        found |= this;
        // Entries: module flag (key=value)* ; … then `}` `;`.
        loop {
            match cur.next() {
                Some(JaasToken::Close) => break,
                Some(JaasToken::Word(module)) => {
                    let Some(JaasToken::Word(_flag)) = cur.next() else {
                        return Err(format!(
                            "section {}: a login module has no control flag",
                            sections + 1
                        ));
                    };
                    let options = jaas_options(&mut cur, sections + 1)?;
                    if this {
                        modules.push(module.clone());
                        if module == DIGEST {
                            let get = |k: &str| {
                                options.iter().find(|(o, _)| o == k).map(|(_, v)| v.clone())
                            };
                            digest = Some((get("username"), get("password")));
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "section {}: expected a login module or `}}`",
                        sections + 1
                    ))
                }
            }
        }
        if cur.next() != Some(&JaasToken::Semi) {
            return Err(format!("section {}: expected `;` after `}}`", sections + 1));
        }
        sections += 1;
    }
    if !found {
        return Err(format!("no section `{section}`"));
    }
    match digest {
        Some((Some(username), Some(password))) => Ok(ZkSasl { username, password }),
        Some(_) => Err(format!(
            "section `{section}`: the DigestLoginModule entry needs both username and password"
        )),
        None => Err(format!(
            "section `{section}` has no {DIGEST} entry ({} other login module(s)); only SASL DIGEST-MD5 is supported",
            modules.len()
        )),
    }
}

/// A read position in the tokens of a JAAS file.
struct JaasCursor<'a> {
    tokens: &'a [JaasToken],
    at: usize,
}

impl<'a> JaasCursor<'a> {
    /// The next token, if any (the position moves on either way).
    fn next(&mut self) -> Option<&'a JaasToken> {
        let t = self.tokens.get(self.at);
        self.at += 1;
        t
    }
}

/// The options (`key=value`)* of a login module entry after its control flag, through the `;`
/// that ends it. `section` numbers the section in errors.
fn jaas_options(cur: &mut JaasCursor<'_>, section: usize) -> Result<Vec<(String, String)>, String> {
    let mut options: Vec<(String, String)> = Vec::new();
    loop {
        match cur.next() {
            Some(JaasToken::Semi) => return Ok(options),
            Some(JaasToken::Word(key)) => {
                if cur.next() != Some(&JaasToken::Eq) {
                    return Err(format!("section {section}: an option has no `=`"));
                }
                match cur.next() {
                    Some(JaasToken::Word(v)) | Some(JaasToken::Quoted(v)) => {
                        options.push((key.clone(), v.clone()))
                    }
                    _ => return Err(format!("section {section}: an option has no value")),
                }
            }
            _ => {
                return Err(format!(
                    "section {section}: a login module does not end with `;`"
                ))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum JaasToken {
    Word(String),
    Quoted(String),
    Open,
    Close,
    Semi,
    Eq,
}

fn jaas_tokens(text: &str) -> Result<Vec<JaasToken>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                let mut closed = false;
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    prev = c;
                }
                if !closed {
                    return Err("a `/*` comment is not closed".into());
                }
            }
            '{' => out.push(JaasToken::Open),
            '}' => out.push(JaasToken::Close),
            ';' => out.push(JaasToken::Semi),
            '=' => out.push(JaasToken::Eq),
            '"' => {
                let mut v = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some(e) => v.push(e),
                            None => break,
                        },
                        c => v.push(c),
                    }
                }
                if !closed {
                    return Err("a quoted value is not closed".into());
                }
                out.push(JaasToken::Quoted(v));
            }
            c => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || "{};=\"".contains(n) {
                        break;
                    }
                    w.push(n);
                    chars.next();
                }
                out.push(JaasToken::Word(w));
            }
        }
    }
    Ok(out)
}

/// The sort key of a lock node: what follows the last `lock-` (Curator's rule); a name without
/// it sorts by its whole self, as in Curator.
pub fn sort_key(name: &str) -> &str {
    match name.rfind(LOCK_NAME) {
        Some(i) => &name[i + LOCK_NAME.len()..],
        None => name,
    }
}

/// Why a ZooKeeper lock attempt ended without the lock.
#[derive(Debug)]
pub enum ZkAcquireError {
    /// The lock was held by another contender for the whole wait; `holder` is its node.
    Timeout {
        /// The node that came first when the wait ended.
        holder: Option<String>,
    },
    /// ZooKeeper failed or could not be reached.
    Zk(ZkError),
    /// The wait was cancelled; our node (if any) was deleted.
    Cancelled,
}

impl From<ZkError> for ZkAcquireError {
    fn from(e: ZkError) -> Self {
        ZkAcquireError::Zk(e)
    }
}

/// A held ZooKeeper lock: the session and the node.
#[derive(Debug)]
pub struct ZkHeld {
    /// The session that owns the node.
    pub client: ZkClient,
    /// The full path of our node.
    pub node: String,
}

impl ZkHeld {
    /// Delete our node and close the session.
    pub async fn release(self) -> Result<(), ZkError> {
        let deleted = match self.client.delete(&self.node).await {
            Ok(()) | Err(ZkError::NoNode(_)) => Ok(()),
            Err(e) => Err(e),
        };
        // Closing the session removes the node too, should the delete have failed.
        let closed = self.client.close().await;
        deleted?;
        if let Err(e) = closed {
            warn!(error = %e, "closing the ZooKeeper session failed; the server will expire it");
        }
        Ok(())
    }
}

/// Contend for the lock, waiting up to `timeout` (or until `cancel` fires) and looking again
/// every `retry`.
pub async fn acquire(
    config: &ZkLockConfig,
    owner: &str,
    timeout: Duration,
    retry: Duration,
    cancel: Option<&CancellationToken>,
) -> Result<ZkHeld, ZkAcquireError> {
    let started = tokio::time::Instant::now();
    let client = ZkClient::open(&config.connect()).await?;
    let result = contend(&client, config, owner, started, timeout, retry, cancel).await;
    match result {
        Ok(node) => {
            info!(lock = %node, session = format!("{:#x}", client.session_id()), "took the ZooKeeper lock");
            Ok(ZkHeld { client, node })
        }
        Err(e) => {
            // Our node (if any) goes with the session.
            let _ = client.close().await;
            Err(e)
        }
    }
}

async fn contend(
    client: &ZkClient,
    config: &ZkLockConfig,
    owner: &str,
    started: tokio::time::Instant,
    timeout: Duration,
    retry: Duration,
    cancel: Option<&CancellationToken>,
) -> Result<String, ZkAcquireError> {
    let dir = config.lock_path();
    let prefix = format!("{dir}/_c_{}-{LOCK_NAME}", uuid::Uuid::new_v4());
    client.create_parents(&prefix).await?;
    let node = client
        .create(
            &prefix,
            format!("hudi-keeper {owner}").as_bytes(),
            CreateMode::EphemeralSequential,
        )
        .await?;
    let ours = node.rsplit('/').next().unwrap_or_default().to_string();
    loop {
        let mut children = client.children(&dir).await?;
        children.sort_by(|a, b| sort_key(a).cmp(sort_key(b)));
        match children.iter().position(|c| *c == ours) {
            Some(0) => return Ok(node),
            Some(_) => {}
            None => {
                return Err(ZkAcquireError::Zk(ZkError::SessionLost(format!(
                    "our lock node `{node}` disappeared while waiting"
                ))))
            }
        }
        let cancelled = cancel.is_some_and(CancellationToken::is_cancelled);
        if cancelled || started.elapsed() >= timeout {
            let holder = children.first().map(|c| format!("{dir}/{c}"));
            match client.delete(&node).await {
                Ok(()) | Err(ZkError::NoNode(_)) => {}
                Err(e) => {
                    warn!(node = %node, error = %e, "could not delete our lock node; it goes with the session")
                }
            }
            if cancelled {
                return Err(ZkAcquireError::Cancelled);
            }
            return Err(ZkAcquireError::Timeout { holder });
        }
        match cancel {
            Some(c) => {
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = c.cancelled() => {}
                }
            }
            None => tokio::time::sleep(retry).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_credentials_come_from_the_client_section_of_a_jaas_file() {
        let jaas = r#"
            // Hudi writers' JAAS file
            Server {
              org.apache.zookeeper.server.auth.DigestLoginModule required
              user_bob="server-side";
            };
            /* the client */
            Client {
              org.apache.zookeeper.server.auth.DigestLoginModule required
              username="bob"
              password="s3cr=t;\"x\"";
            };
            Other { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };
        "#;
        let c = jaas_digest_credentials(jaas, "Client").unwrap();
        assert_eq!(c.username, "bob");
        assert_eq!(c.password, "s3cr=t;\"x\"");
        assert!(
            !format!("{c:?}").contains("s3cr"),
            "the password is redacted"
        );
        let err = jaas_digest_credentials(jaas, "Other").unwrap_err();
        assert!(
            err.contains("only SASL DIGEST-MD5") && err.contains("1 other login module"),
            "{err}"
        );
        assert!(jaas_digest_credentials(jaas, "Nope")
            .unwrap_err()
            .contains("no section"));
        let server = jaas_digest_credentials(jaas, "Server").unwrap_err();
        assert!(server.contains("both username and password"), "{server}");
    }

    proptest::proptest! {
        /// Any text, and mutations of a real JAAS file: no panic, and the password the file
        /// holds never appears in an error.
        #[test]
        fn fuzz_jaas_files(
            noise in ".{0,200}",
            cut in 0usize..200,
            insert in "[{};=\"/* a-z]{0,8}",
        ) {
            let _ = jaas_digest_credentials(&noise, "Client");
            let good = "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"u\" password=\"hunter2\"; };";
            let at = cut.min(good.len());
            let (a, b) = good.split_at(at);
            for text in [format!("{a}{insert}{b}"), a.to_string()] {
                if let Err(e) = jaas_digest_credentials(&text, "Client") {
                    proptest::prop_assert!(!e.contains("hunter2"), "{}", e);
                }
            }
        }
    }

    #[test]
    fn a_malformed_jaas_file_is_an_error_that_does_not_quote_secrets() {
        for bad in [
            "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\" password=\"hunter2\" }; ",
            "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\" password=\"hunter2",
            "Client org.apache.zookeeper.server.auth.DigestLoginModule",
            "Client { x required password hunter2; };",
            "/* hunter2",
            "",
        ] {
            let err = jaas_digest_credentials(bad, "Client").unwrap_err();
            assert!(!err.contains("hunter2"), "{bad}: {err}");
        }
    }

    #[test]
    fn nodes_sort_by_the_sequence_after_the_last_lock_name() {
        let mut names = [
            "_c_bbbb-lock-0000000003",
            "_c_zzzz-lock-0000000001",
            "_c_aaaa-lock-0000000002",
        ];
        names.sort_by(|a, b| sort_key(a).cmp(sort_key(b)));
        assert_eq!(names[0], "_c_zzzz-lock-0000000001");
        assert_eq!(names[2], "_c_bbbb-lock-0000000003");
        // A protection prefix that itself contains `lock-` does not confuse the order.
        assert_eq!(sort_key("_c_lock-x-lock-0000000007"), "0000000007");
    }

    #[test]
    fn the_lock_path_joins_base_path_and_key() {
        let c = ZkLockConfig {
            connect: "127.0.0.1:2181".into(),
            base_path: "/hudi/locks".into(),
            lock_key: "trips".into(),
            session_timeout: Duration::from_secs(60),
            connection_timeout: Duration::from_secs(15),
            tls: None,
            sasl: None,
        };
        assert_eq!(c.lock_path(), "/hudi/locks/trips");
    }
}
