//! Which replica polls which table (issue #18): rendezvous (highest-random-weight) hashing of
//! table names over the replicas. Each table goes to the replica whose weight for it is the
//! highest; a replica that leaves gives up only its own tables (each to the replica with the next
//! highest weight), and one that joins takes only the tables it now weighs highest. Ownership
//! only decides who polls: every change still takes the table's Hudi lock and re-checks the
//! timeline under it, so two replicas that both believe they own a table never undo one instant
//! twice.
//!
//! The weights are a fixed function of the replica's id and the table's name (FNV-1a over both,
//! then a 64-bit finalizer), the same on every replica, every build and every platform.

use serde::{Deserialize, Serialize};

/// `[cluster]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// `none`: this daemon polls every table it has; `static`: `replicas` daemons share them,
    /// this one being `replica`.
    pub mode: ClusterMode,
    /// `static`: how many replicas share the tables.
    pub replicas: Option<u32>,
    /// `static`: this replica's index, `0..replicas`. Without it, the index ends the pod's name
    /// (`$POD_NAME`, else `$HOSTNAME`), as a StatefulSet names its pods: `hudi-keeper-2`.
    pub replica: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterMode {
    #[default]
    None,
    Static,
}

/// The most replicas a static cluster may name (an owner lookup weighs every one).
pub const MAX_REPLICAS: u32 = 1024;

/// The replicas sharing the tables, and which one this daemon is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// This replica's index in `members`.
    me: usize,
    /// Every replica's id (its index, in decimal, for a static cluster), in index order.
    members: Vec<String>,
    /// The pods' common name stem (`hudi-keeper` of `hudi-keeper-2`), when known: owners are
    /// then named as their pods.
    stem: Option<String>,
}

/// Who owns a table, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// The owner's index.
    pub replica: usize,
    /// Its pod name where known (`hudi-keeper-2`), else `replica 2`.
    pub name: String,
    /// Whether it is this daemon.
    pub this_replica: bool,
}

impl Cluster {
    /// One daemon owning everything (`mode = "none"`).
    pub fn single() -> Self {
        Self {
            me: 0,
            members: vec!["0".to_string()],
            stem: None,
        }
    }

    /// The cluster `config` describes; `pod_name` is `$POD_NAME` or `$HOSTNAME` (read by the
    /// caller, so this stays pure). Errors name the setting to fix.
    pub fn from_config(config: &ClusterConfig, pod_name: Option<&str>) -> Result<Self, String> {
        match config.mode {
            ClusterMode::None => {
                if config.replicas.is_some() || config.replica.is_some() {
                    return Err(
                        "cluster.replicas and cluster.replica need cluster.mode = \"static\""
                            .into(),
                    );
                }
                Ok(Self::single())
            }
            ClusterMode::Static => {
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
                    me: me as usize,
                    members: (0..n).map(|i| i.to_string()).collect(),
                    stem,
                })
            }
        }
    }

    /// How many replicas share the tables.
    pub fn replicas(&self) -> usize {
        self.members.len()
    }

    /// This replica's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// Whether more than one replica shares the tables.
    pub fn is_shared(&self) -> bool {
        self.members.len() > 1
    }

    /// Whether this replica owns `table`.
    pub fn owns(&self, table: &str) -> bool {
        owner_index(&self.members, table) == Some(self.me)
    }

    /// Who owns `table`.
    pub fn owner(&self, table: &str) -> Owner {
        let replica = owner_index(&self.members, table).unwrap_or(self.me);
        Owner {
            replica,
            name: self.name_of(replica),
            this_replica: replica == self.me,
        }
    }

    /// Replica `i`'s name: its pod's where the stem is known.
    pub fn name_of(&self, i: usize) -> String {
        match &self.stem {
            Some(stem) => format!("{stem}-{i}"),
            None => format!("replica {i}"),
        }
    }
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
        };
        let c = Cluster::from_config(&cfg(Some(3), None), Some("hudi-keeper-2")).unwrap();
        assert_eq!((c.me(), c.replicas()), (2, 3));
        assert_eq!(c.name_of(0), "hudi-keeper-0");
        let c = Cluster::from_config(&cfg(Some(3), Some(1)), None).unwrap();
        assert_eq!((c.me(), c.name_of(1)), (1, "replica 1".to_string()));
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
            let err = Cluster::from_config(&config, pod).unwrap_err();
            assert!(err.contains(says), "{config:?} {pod:?}: {err}");
        }
        assert_eq!(
            Cluster::from_config(&ClusterConfig::default(), Some("x-1")).unwrap(),
            Cluster::single()
        );
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
                .map(|i| Cluster::from_config(&ClusterConfig { mode: ClusterMode::Static, replicas: Some(n), replica: Some(i) }, None).unwrap())
                .collect();
            for name in &names {
                let owners: Vec<usize> = replicas.iter().filter(|c| c.owns(name)).map(|c| c.me()).collect();
                prop_assert_eq!(owners.len(), 1);
                for c in &replicas {
                    prop_assert_eq!(c.owner(name).replica, owners[0]);
                }
            }
        }
    }
}
