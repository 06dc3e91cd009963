//! Which replica polls which table (issue #18): rendezvous (highest-random-weight) hashing of
//! table names over the replicas. Each table goes to the replica whose weight for it is the
//! highest; a replica that leaves gives up only its own tables (each to the replica with the next
//! highest weight), and one that joins takes only the tables it now weighs highest. Ownership
//! only decides who polls: every change still takes the table's Hudi lock and re-checks the
//! timeline under it, so two replicas that both believe they own a table never undo one instant
//! twice.
//!
//! The replicas are known in one of two ways: `static` (a count, and this replica's index from
//! the configuration or its StatefulSet pod name) or `zookeeper` (each live replica holds an
//! ephemeral node under a path of the writers' ZooKeeper ensemble; `membership.rs` keeps the
//! view). A [`Cluster`] is one view; it is pure and never changes, a new view replaces it.
//!
//! The weights are a fixed function of the replica's id and the table's name (FNV-1a over both,
//! then a 64-bit finalizer), the same on every replica, every build and every platform.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// `none`: this daemon polls every table it has; `static`: `replicas` daemons share them,
    /// this one being `replica`; `zookeeper`: the daemons registered under `zookeeper_path`
    /// share them.
    pub mode: ClusterMode,
    /// `static`: how many replicas share the tables.
    pub replicas: Option<u32>,
    /// `static`: this replica's index, `0..replicas`. Without it, the index ends the pod's name
    /// (`$POD_NAME`, else `$HOSTNAME`), as a StatefulSet names its pods: `hudi-keeper-2`.
    pub replica: Option<u32>,
    /// `zookeeper`: this replica's id, which the table weights are computed from (default: the
    /// pod's name, `$POD_NAME`, else `$HOSTNAME`). A replica that restarts under the same id takes
    /// the same tables back.
    pub member: Option<String>,
    /// `zookeeper`: the ensemble, `host:port[,host:port…]` (default: `[defaults.lock]
    /// zookeeper_url`; TLS, SASL and the connection timeout always come from `[defaults.lock]`).
    pub zookeeper_url: Option<String>,
    /// `zookeeper`: the node the replicas register under (created when missing).
    pub zookeeper_path: String,
    /// `zookeeper`: the membership session's timeout: a replica that dies loses its tables to
    /// the others this long after (as the server grants it, within its min and max), plus one
    /// poll interval.
    #[serde(
        deserialize_with = "crate::duration::serde_helpers::de_duration",
        serialize_with = "crate::duration::serde_helpers::ser_duration"
    )]
    pub zookeeper_session_timeout: Duration,
}

/// `cluster.zookeeper_path` unless set.
pub const DEFAULT_ZK_PATH: &str = "/hudi-keeper/replicas";

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            mode: ClusterMode::None,
            replicas: None,
            replica: None,
            member: None,
            zookeeper_url: None,
            zookeeper_path: DEFAULT_ZK_PATH.to_string(),
            zookeeper_session_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterMode {
    #[default]
    None,
    Static,
    Zookeeper,
}

impl ClusterMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Static => "static",
            Self::Zookeeper => "zookeeper",
        }
    }
}

/// The most replicas a cluster may have (an owner lookup weighs every one).
pub const MAX_REPLICAS: u32 = 1024;

/// The longest member id (a Kubernetes pod name is at most 253 characters).
pub const MAX_MEMBER_ID: usize = 253;

/// One view of the replicas sharing the tables, and which one this daemon is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    mode: ClusterMode,
    /// This replica's index in `members`; `None` while it is not a member (a `zookeeper`
    /// replica before it registered, or after its session was lost): then it owns nothing.
    me: Option<usize>,
    /// Every replica's id, in order: its index in decimal for a static cluster; the sorted
    /// member ids registered in ZooKeeper.
    members: Vec<String>,
    /// The pods' common name stem (`hudi-keeper` of `hudi-keeper-2`) of a static cluster, when
    /// known: owners are then named as their pods.
    stem: Option<String>,
    /// This replica's id (a `zookeeper` member's, whether registered or not).
    id: String,
}

/// Who owns a table, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// The owner's index among the current members.
    pub replica: usize,
    /// Its pod name where known (`hudi-keeper-2`), its member id in a `zookeeper` cluster,
    /// else `replica 2`.
    pub name: String,
    /// Whether it is this daemon.
    pub this_replica: bool,
}

impl Cluster {
    /// One daemon owning everything (`mode = "none"`).
    pub fn single() -> Self {
        Self {
            mode: ClusterMode::None,
            me: Some(0),
            members: vec!["0".to_string()],
            stem: None,
            id: "0".to_string(),
        }
    }

    /// The cluster `config` describes (for `zookeeper`, the view before registering: no
    /// members); `pod_name` is `$POD_NAME` or `$HOSTNAME` (read by the caller, so this stays
    /// pure). Errors name the setting to fix.
    pub fn from_config(
        config: &ClusterConfig,
        pod_name: Option<&str>,
    ) -> Result<Self, InvalidCluster> {
        Self::checked(config, pod_name).map_err(InvalidCluster)
    }

    fn checked(config: &ClusterConfig, pod_name: Option<&str>) -> Result<Self, String> {
        let static_keys = config.replicas.is_some() || config.replica.is_some();
        let zk_keys = config.member.is_some() || config.zookeeper_url.is_some();
        match config.mode {
            ClusterMode::None => {
                if static_keys || zk_keys {
                    return Err(
                        "cluster.replicas and cluster.replica need cluster.mode = \"static\"; cluster.member and cluster.zookeeper_url need cluster.mode = \"zookeeper\""
                            .into(),
                    );
                }
                Ok(Self::single())
            }
            ClusterMode::Static => {
                if zk_keys {
                    return Err(
                        "cluster.member and cluster.zookeeper_url need cluster.mode = \"zookeeper\""
                            .into(),
                    );
                }
                let n = config
                    .replicas
                    .ok_or("cluster.mode = \"static\" needs cluster.replicas (how many daemons share the tables)")?;
                if n == 0 || n > MAX_REPLICAS {
                    return Err(format!(
                        "cluster.replicas must be 1 to {MAX_REPLICAS}, not {n}"
                    ));
                }
                let from_pod = pod_name.and_then(pod_index);
                let (me, stem) = match (config.replica, from_pod) {
                    (Some(i), from_pod) => (i, from_pod.map(|(stem, _)| stem)),
                    (None, Some((stem, i))) => (i, Some(stem)),
                    (None, None) => {
                        return Err(format!(
                            "cluster.mode = \"static\" needs cluster.replica, or a pod name ending in its index (a StatefulSet's `name-2`){}",
                            pod_name
                                .map(|p| format!("; `{p}` does not"))
                                .unwrap_or_default()
                        ))
                    }
                };
                if me >= n {
                    return Err(format!(
                        "this replica's index {me} is not below cluster.replicas = {n}"
                    ));
                }
                Ok(Self {
                    mode: ClusterMode::Static,
                    me: Some(me as usize),
                    members: (0..n).map(|i| i.to_string()).collect(),
                    stem,
                    id: me.to_string(),
                })
            }
            ClusterMode::Zookeeper => {
                if static_keys {
                    return Err(
                        "cluster.replicas and cluster.replica need cluster.mode = \"static\"; a zookeeper cluster's replicas are the ones registered".into(),
                    );
                }
                let id = match (&config.member, pod_name) {
                    (Some(m), _) => m.clone(),
                    (None, Some(p)) => p.trim().to_string(),
                    (None, None) => {
                        return Err("cluster.mode = \"zookeeper\" needs cluster.member, or $POD_NAME or $HOSTNAME to take it from".into())
                    }
                };
                check_member_id(&id)?;
                check_zk_path(&config.zookeeper_path)?;
                if config.zookeeper_session_timeout < Duration::from_secs(1)
                    || config.zookeeper_session_timeout > Duration::from_secs(3600)
                {
                    return Err(format!(
                        "cluster.zookeeper_session_timeout must be 1s to 1h, not {:?}",
                        config.zookeeper_session_timeout
                    ));
                }
                Ok(Self {
                    mode: ClusterMode::Zookeeper,
                    me: None,
                    members: Vec::new(),
                    stem: None,
                    id,
                })
            }
        }
    }

    /// The view of a `zookeeper` cluster whose registered members are `members` (ids, in any
    /// order, repeated where one replica's old session has not expired yet): sorted and
    /// deduplicated, at most [`MAX_REPLICAS`]. This replica is a member when `registered`
    /// (its own node was among them).
    pub fn with_members(
        &self,
        members: impl IntoIterator<Item = String>,
        registered: bool,
    ) -> Self {
        let mut members: Vec<String> = members.into_iter().collect();
        if registered {
            members.push(self.id.clone());
        }
        members.sort();
        members.dedup();
        members.truncate(MAX_REPLICAS as usize);
        let me = if registered {
            members.iter().position(|m| *m == self.id)
        } else {
            None
        };
        Self {
            mode: self.mode,
            me,
            members,
            stem: None,
            id: self.id.clone(),
        }
    }

    /// `none`, `static` or `zookeeper`.
    pub fn mode(&self) -> ClusterMode {
        self.mode
    }

    /// How many replicas share the tables (the members this view knows).
    pub fn replicas(&self) -> usize {
        self.members.len()
    }

    /// The members' ids, in order.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// This replica's index, while it is a member.
    pub fn me(&self) -> Option<usize> {
        self.me
    }

    /// This replica's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// This replica's name, as owners are named.
    pub fn my_name(&self) -> String {
        match (self.mode, self.me) {
            (ClusterMode::Zookeeper, _) => self.id.clone(),
            (_, Some(i)) => self.name_of(i),
            (_, None) => self.id.clone(),
        }
    }

    /// Whether other replicas may share the tables: a static cluster of more than one, and
    /// every `zookeeper` cluster (replicas may join at any time).
    pub fn is_shared(&self) -> bool {
        self.mode == ClusterMode::Zookeeper || self.members.len() > 1
    }

    /// Whether this replica owns `table`.
    pub fn owns(&self, table: &str) -> bool {
        self.me.is_some() && owner_index(&self.members, table) == self.me
    }

    /// Who owns `table`; `None` when this view knows no member (a `zookeeper` replica that is
    /// not registered and sees nobody).
    pub fn owner(&self, table: &str) -> Option<Owner> {
        let replica = owner_index(&self.members, table)?;
        Some(Owner {
            replica,
            name: self.name_of(replica),
            this_replica: Some(replica) == self.me,
        })
    }

    /// Replica `i`'s name: its member id in a `zookeeper` cluster, its pod's where a static
    /// cluster's stem is known.
    pub fn name_of(&self, i: usize) -> String {
        match (self.mode, &self.stem) {
            (ClusterMode::Zookeeper, _) => self.members.get(i).cloned().unwrap_or_default(),
            (_, Some(stem)) => format!("{stem}-{i}"),
            (_, None) => format!("replica {i}"),
        }
    }

    /// How many of `tables` another replica owns in `next` than in this view.
    pub fn moved<'a>(&self, next: &Cluster, tables: impl IntoIterator<Item = &'a str>) -> usize {
        tables
            .into_iter()
            .filter(|t| {
                let before = owner_index(&self.members, t).map(|i| &self.members[i]);
                let after = owner_index(&next.members, t).map(|i| &next.members[i]);
                before != after
            })
            .count()
    }
}

/// The daemon's current view, replaced as a whole when the replicas change.
#[derive(Debug)]
pub struct ClusterView(std::sync::RwLock<std::sync::Arc<Cluster>>);

impl ClusterView {
    pub fn new(cluster: Cluster) -> Self {
        Self(std::sync::RwLock::new(std::sync::Arc::new(cluster)))
    }

    /// The current view.
    pub fn current(&self) -> std::sync::Arc<Cluster> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Make `next` the view; the previous one is returned.
    pub fn replace(&self, next: Cluster) -> std::sync::Arc<Cluster> {
        let mut guard = self.0.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *guard, std::sync::Arc::new(next))
    }
}

/// Why `[cluster]` does not describe a cluster: the message names the setting to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidCluster(pub String);

/// A member id: 1 to [`MAX_MEMBER_ID`] characters of `[A-Za-z0-9._-]`, as a pod or host name
/// has (it names a ZooKeeper node, and appears in logs and the API).
fn check_member_id(id: &str) -> Result<(), String> {
    if id.is_empty()
        || id.len() > MAX_MEMBER_ID
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "cluster.member `{id}`: a member id is 1 to {MAX_MEMBER_ID} characters of letters, digits, `.`, `_` and `-`"
        ));
    }
    Ok(())
}

/// `cluster.zookeeper_path`: absolute, no empty or relative segment, no trailing `/`.
fn check_zk_path(path: &str) -> Result<(), String> {
    let ok = path.len() > 1
        && path.len() <= 1024
        && path.starts_with('/')
        && path[1..]
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains('\0'));
    if !ok {
        return Err(format!(
            "cluster.zookeeper_path `{path}` must be an absolute ZooKeeper path like {DEFAULT_ZK_PATH}"
        ));
    }
    Ok(())
}

/// The prefix of this member's ephemeral node names; ZooKeeper appends a 10-digit sequence
/// number, so a replica that restarts before its old session expired does not collide with it.
pub fn node_prefix(id: &str) -> String {
    format!("{id}-")
}

/// The member id of a node under the membership path (`hudi-keeper-2-0000000007` →
/// `hudi-keeper-2`); `None` for a node that is not a member's.
pub fn member_of_node(node: &str) -> Option<&str> {
    let (id, seq) = node.rsplit_once('-')?;
    (seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit()) && check_member_id(id).is_ok())
        .then_some(id)
}

/// The stem and index of a StatefulSet pod's name (`hudi-keeper-2` → (`hudi-keeper`, 2)).
pub fn pod_index(name: &str) -> Option<(String, u32)> {
    let (stem, index) = name.trim().rsplit_once('-')?;
    if stem.is_empty()
        || index.is_empty()
        || index.len() > 4
        || !index.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((stem.to_string(), index.parse().ok()?))
}

/// The weight of `member` for `table`: FNV-1a 64 over the member's id, a separator that
/// neither can hold, and the table's name, then the finalizer of SplitMix64 (FNV alone mixes
/// its last bytes poorly).
pub fn weight(member: &str, table: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for b in member.bytes().chain([0xff]).chain(table.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The index of the member with the highest weight for `table` (ties, which a 64-bit weight
/// all but never has, to the smaller id); `None` without members.
pub fn owner_index(members: &[String], table: &str) -> Option<usize> {
    members
        .iter()
        .enumerate()
        .max_by(|(_, a), (_, b)| {
            weight(a, table)
                .cmp(&weight(b, table))
                .then_with(|| b.cmp(a))
        })
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| i.to_string()).collect()
    }

    fn tables(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("db.table_{i:05}")).collect()
    }

    #[test]
    fn weights_are_fixed_values() {
        // The same on every build and platform: replicas of different builds must agree.
        assert_eq!(weight("0", "orders"), weight("0", "orders"));
        assert_ne!(weight("0", "orders"), weight("1", "orders"));
        assert_ne!(weight("0", "orders"), weight("0", "orders2"));
        // Pinned (computed by a separate Python implementation of the same function): a change
        // of the function would move tables between replicas running different versions.
        assert_eq!(weight("0", "orders"), 0xd66f_fd03_11a2_c1c3);
        assert_eq!(weight("2", "db.table_00042"), 0x068a_da30_8710_47ed);
    }

    #[test]
    fn every_table_has_one_owner_and_the_load_is_even() {
        let m = members(3);
        let t = tables(3_000);
        let mut count = [0usize; 3];
        for name in &t {
            count[owner_index(&m, name).unwrap()] += 1;
        }
        assert_eq!(count.iter().sum::<usize>(), 3_000);
        for c in count {
            assert!((850..=1150).contains(&c), "{count:?}");
        }
    }

    #[test]
    fn a_replica_leaving_moves_only_its_own_tables_and_one_joining_takes_only_its_new_ones() {
        let t = tables(3_000);
        let three = members(3);
        let two: Vec<String> = vec!["0".into(), "2".into()];
        let mut moved = 0;
        for name in &t {
            let before = &three[owner_index(&three, name).unwrap()];
            let after = &two[owner_index(&two, name).unwrap()];
            if before != "1" {
                assert_eq!(before, after, "{name} moved though its owner stayed");
            } else {
                moved += 1;
            }
        }
        assert!((850..=1150).contains(&moved), "{moved}");
        let four = members(4);
        for name in &t {
            let before = &three[owner_index(&three, name).unwrap()];
            let after = &four[owner_index(&four, name).unwrap()];
            assert!(
                after == before || after == "3",
                "{name}: {before} -> {after}"
            );
        }
    }

    #[test]
    fn a_static_cluster_reads_its_index_from_the_config_or_the_pod_name() {
        let cfg = |replicas, replica| ClusterConfig {
            mode: ClusterMode::Static,
            replicas,
            replica,
            ..Default::default()
        };
        let c = Cluster::from_config(&cfg(Some(3), None), Some("hudi-keeper-2")).unwrap();
        assert_eq!((c.me(), c.replicas()), (Some(2), 3));
        assert_eq!(c.name_of(0), "hudi-keeper-0");
        let c = Cluster::from_config(&cfg(Some(3), Some(1)), None).unwrap();
        assert_eq!((c.me(), c.name_of(1)), (Some(1), "replica 1".to_string()));
        for (config, pod, says) in [
            (cfg(None, Some(0)), None, "cluster.replicas"),
            (cfg(Some(0), Some(0)), None, "1 to 1024"),
            (cfg(Some(3), Some(3)), None, "not below"),
            (cfg(Some(3), None), Some("hudi-keeper-7"), "not below"),
            (cfg(Some(3), None), Some("keeper"), "`keeper` does not"),
            (cfg(Some(3), None), None, "cluster.replica"),
            (
                ClusterConfig {
                    replicas: Some(2),
                    ..Default::default()
                },
                None,
                "mode = \"static\"",
            ),
        ] {
            let err = Cluster::from_config(&config, pod).unwrap_err().to_string();
            assert!(err.contains(says), "{config:?} {pod:?}: {err}");
        }
        assert_eq!(
            Cluster::from_config(&ClusterConfig::default(), Some("x-1")).unwrap(),
            Cluster::single()
        );
    }

    fn zk(id: &str) -> Cluster {
        Cluster::from_config(
            &ClusterConfig {
                mode: ClusterMode::Zookeeper,
                member: Some(id.to_string()),
                ..Default::default()
            },
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_zookeeper_replica_owns_nothing_until_registered_and_only_its_share_after() {
        let c = Cluster::from_config(
            &ClusterConfig {
                mode: ClusterMode::Zookeeper,
                ..Default::default()
            },
            Some("hudi-keeper-1"),
        )
        .unwrap();
        assert_eq!((c.id(), c.me(), c.replicas()), ("hudi-keeper-1", None, 0));
        assert!(c.is_shared());
        assert!(!c.owns("orders"));
        assert_eq!(c.owner("orders"), None);
        // Seeing others but not itself (its session was lost): still nothing.
        let lost = c.with_members(["hudi-keeper-0".to_string()], false);
        assert!(!lost.owns("orders"));
        assert_eq!(lost.owner("orders").unwrap().name, "hudi-keeper-0");
        let t = tables(3_000);
        let three = c.with_members(
            ["hudi-keeper-2", "hudi-keeper-0", "hudi-keeper-0"].map(String::from),
            true,
        );
        assert_eq!(
            three.members(),
            ["hudi-keeper-0", "hudi-keeper-1", "hudi-keeper-2"]
        );
        assert_eq!(three.me(), Some(1));
        let mine = t.iter().filter(|n| three.owns(n)).count();
        assert!((850..=1150).contains(&mine), "{mine}");
        // hudi-keeper-2 leaves: only its tables move.
        let two = c.with_members(["hudi-keeper-0".to_string()], true);
        let moved = three.moved(&two, t.iter().map(String::as_str));
        let its = t
            .iter()
            .filter(|n| three.owner(n).unwrap().name == "hudi-keeper-2")
            .count();
        assert_eq!(moved, its);
        for (config, pod, says) in [
            (Some("a/b"), None, "a member id"),
            (Some(""), None, "a member id"),
            (None, None, "cluster.member"),
        ] {
            let err = Cluster::from_config(
                &ClusterConfig {
                    mode: ClusterMode::Zookeeper,
                    member: config.map(String::from),
                    ..Default::default()
                },
                pod,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(says), "{config:?}: {err}");
        }
        for bad in ["", "/", "relative", "/a//b", "/a/", "/a/../b"] {
            assert!(check_zk_path(bad).is_err(), "{bad}");
        }
        assert!(check_zk_path("/hudi-keeper/replicas").is_ok());
        for (node, id) in [
            ("hudi-keeper-0-0000000012", Some("hudi-keeper-0")),
            ("x-123", None),
            ("-0000000001", None),
            ("lock-0000000001", Some("lock")),
        ] {
            assert_eq!(member_of_node(node), id, "{node}");
        }
    }

    #[test]
    fn pod_names_parse_as_statefulsets_make_them() {
        assert_eq!(
            pod_index("hudi-keeper-12"),
            Some(("hudi-keeper".into(), 12))
        );
        for bad in [
            "hudi-keeper",
            "-1",
            "keeper-",
            "keeper-1a",
            "keeper-123456",
            "",
        ] {
            assert_eq!(pod_index(bad), None, "{bad}");
        }
    }

    proptest! {
        /// Every replica of a static cluster agrees on every table's owner, and exactly one of
        /// them owns it.
        #[test]
        fn replicas_agree_and_exactly_one_owns_each_table(n in 1u32..8, names in proptest::collection::vec(".{0,40}", 1..50)) {
            let replicas: Vec<Cluster> = (0..n)
                .map(|i| Cluster::from_config(&ClusterConfig { mode: ClusterMode::Static, replicas: Some(n), replica: Some(i), ..Default::default() }, None).unwrap())
                .collect();
            for name in &names {
                let owners: Vec<usize> = replicas.iter().filter(|c| c.owns(name)).filter_map(|c| c.me()).collect();
                prop_assert_eq!(owners.len(), 1);
                for c in &replicas {
                    prop_assert_eq!(c.owner(name).map(|o| o.replica), Some(owners[0]));
                }
            }
        }

        /// Every member of a `zookeeper` cluster that sees the same members (in any order,
        /// with repeats) agrees on every owner, exactly one owns each table, and a node name
        /// gives back the id it was made from.
        #[test]
        fn zookeeper_members_agree_and_exactly_one_owns_each_table(ids in proptest::collection::btree_set("[a-z0-9][a-z0-9.-]{0,20}", 1..6), names in proptest::collection::vec(".{0,40}", 1..30)) {
            let ids: Vec<String> = ids.into_iter().collect();
            let mut seen = ids.clone();
            seen.extend(ids.iter().take(1).cloned());
            seen.reverse();
            let views: Vec<Cluster> = ids.iter().map(|id| zk(id).with_members(seen.clone(), true)).collect();
            for name in &names {
                let owners: Vec<&str> = views.iter().filter(|c| c.owns(name)).map(|c| c.id()).collect();
                prop_assert_eq!(owners.len(), 1);
                for c in &views {
                    prop_assert_eq!(c.owner(name).map(|o| o.name), Some(owners[0].to_string()));
                }
            }
            for id in &ids {
                let node = format!("{}{:010}", node_prefix(id), 42);
                prop_assert_eq!(member_of_node(&node), Some(id.as_str()));
            }
        }
    }
}
