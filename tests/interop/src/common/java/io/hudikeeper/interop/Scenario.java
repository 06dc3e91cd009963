package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.File;
import java.io.IOException;
import java.util.Locale;
import java.util.Properties;

/**
 * A scenario: table type, metadata table on/off, marker kind, how the failed write dies, and how the
 * table is partitioned.
 * Name grammar:
 * {@code <cow|mor>-<mdt|nomdt>-<direct|timeline>[-mdtdone|-mdtinflight|-mdtcompact|-requested|-clusterfail][-append][-urlenc|-hive|-slash|-nopart]}.
 */
public final class Scenario {
  public static final String TABLE_NAME = "interop";
  public static final int HEARTBEAT_INTERVAL_MS = 1000;
  public static final int HEARTBEAT_TOLERABLE_MISSES = 2;
  /** {@code hoodie.clustering.expiration.threshold.mins} of the {@code -clusterfail} scenarios. */
  public static final int CLUSTERING_EXPIRATION_THRESHOLD_MINS = 0;

  public final String name;
  public final boolean mor;
  public final boolean mdt;
  public final boolean timelineMarkers;
  /** The failed writer is killed after its metadata-table deltacommit completed (inside commit()). */
  public final boolean mdtDone;
  /**
   * {@code -mdtinflight}: the failed writer is killed inside commit(), while its metadata-table
   * deltacommit is pending: its requested and inflight files exist and its log blocks are written, and
   * the writer blocks on creating the metadata table's completed deltacommit file.
   */
  public final boolean mdtInflight;
  /** The failed writer is killed right after startCommit(): only the requested instant exists. */
  public final boolean requestedOnly;
  /**
   * {@code -mdtcompact}: as {@code -mdtdone}, with {@code hoodie.metadata.compact.max.delta.commits=1} for
   * the writers that make the table, so that the failed write's own upsert compacts the metadata table
   * after the failed instant started and before its metadata-table deltacommit completed.
   */
  public final boolean mdtCompact;
  /**
   * {@code -append}: the failed write's log-file markers are APPEND markers (renamed from the CREATE
   * markers Hudi 1.x writes; Hudi's 1.x rollback has a separate rule for APPEND markers on v8/v9), and
   * the failed writer's task has the write token {@code 1-2-0} (as a Spark task may), not the
   * {@code 0-0-0} of the rollbacks' task.
   */
  public final boolean appendMarkers;
  /**
   * {@code -clusterfail} (Hudi 1.2 only): the failed job is a clustering, not a write. It schedules a
   * clustering of the table with {@code hoodie.clustering.enable.expirations=true} (so Hudi heartbeats
   * the clustering instant from its scheduling on), writes the clustered base files and is killed before
   * it commits: the clustering instant stays inflight, its new base files and markers exist, and its
   * heartbeat goes stale. Every JVM of the scenario has clustering expirations on, with
   * {@code hoodie.clustering.expiration.threshold.mins=0}.
   */
  public final boolean clusterFail;
  /** How records are mapped to partition folders (the name's last suffix; none: {@link Partitioning#PLAIN}). */
  public final Partitioning partitioning;

  /**
   * The partition layouts. Each has four logical partitions 0-3 (the completed commits write 0-2, the
   * failed write and {@code commit} also write 3, which is new to the table); {@link #value} is what the
   * record's {@code part} field holds, and Hudi's own key generator turns it into the partition path.
   */
  public enum Partitioning {
    /** {@code part} = p0..p3, SimpleKeyGenerator, no encoding: folders p0..p3 (the key is built directly). */
    PLAIN("", "org.apache.hudi.keygen.SimpleKeyGenerator", false, false,
        new String[] {"p0", "p1", "p2", "p3"}, null),
    /**
     * SimpleKeyGenerator with {@code hoodie.datasource.write.partitionpath.urlencode=true}: values with
     * a colon and a space, a percent sign and a tilde, a slash, and a hash, a space and non-ASCII letters.
     */
    URLENC("urlenc", "org.apache.hudi.keygen.SimpleKeyGenerator", true, false,
        new String[] {"2024-01-01 10:00", "50%~1", "a/b", "x#1 é日本"}, null),
    /**
     * ComplexKeyGenerator on two fields, {@code part} and {@code hr}, hive-style and URL-encoded:
     * multi-level folders {@code part=<v>/hr=<h>}, with an '=' and a ':' in two of the hr values.
     */
    HIVE("hive", "org.apache.hudi.keygen.ComplexKeyGenerator", true, true,
        new String[] {"2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"},
        new String[] {"00", "12", "a=b", "23:59"}),
    /** SimpleKeyGenerator, no encoding, values with slashes: multi-level folders {@code 2024/0<i+1>/p<i>}. */
    SLASH("slash", "org.apache.hudi.keygen.SimpleKeyGenerator", false, false,
        new String[] {"2024/01/p0", "2024/02/p1", "2024/03/p2", "2024/04/p3"}, null),
    /** NonpartitionedKeyGenerator: every file in the base path ({@code part} stays p0..p3 in the records). */
    NOPART("nopart", "org.apache.hudi.keygen.NonpartitionedKeyGenerator", false, false,
        new String[] {"p0", "p1", "p2", "p3"}, null);

    /** The scenario-name suffix ("" for PLAIN). */
    public final String suffix;
    /** hoodie.table.keygenerator.class (the Spark-side name, as Spark writers record it). */
    public final String keyGenerator;
    public final boolean urlEncode;
    public final boolean hiveStyle;
    private final String[] values;
    /** The second partition field's value per logical partition (HIVE only), else null. */
    private final String[] second;

    Partitioning(String suffix, String keyGenerator, boolean urlEncode, boolean hiveStyle, String[] values,
                 String[] second) {
      this.suffix = suffix;
      this.keyGenerator = keyGenerator;
      this.urlEncode = urlEncode;
      this.hiveStyle = hiveStyle;
      this.values = values;
      this.second = second;
    }

    /** The {@code part} value of logical partition {@code i} (0-3). */
    public String value(int i) {
      return values[i];
    }

    /** The second partition field ({@code hr}), or null when the layout has one field or none. */
    public String secondField() {
      return second == null ? null : "hr";
    }

    /** The {@code hr} value of the record whose {@code part} is {@code partValue}. */
    public String secondValue(String partValue) {
      for (int i = 0; i < values.length; i++) {
        if (values[i].equals(partValue)) {
          return second[i];
        }
      }
      throw new IllegalArgumentException("not a partition value of " + this + ": " + partValue);
    }

    /** hoodie.table.partition.fields / hoodie.datasource.write.partitionpath.field ("" when none). */
    public String partitionFields() {
      if (this == NOPART) {
        return "";
      }
      return second == null ? "part" : "part," + secondField();
    }

    static Partitioning ofSuffix(String s) {
      for (Partitioning p : values()) {
        if (!p.suffix.isEmpty() && p.suffix.equals(s)) {
          return p;
        }
      }
      return null;
    }
  }

  private Scenario(String name, boolean mor, boolean mdt, boolean timelineMarkers, boolean mdtDone,
                   boolean mdtInflight, boolean requestedOnly, boolean mdtCompact, boolean appendMarkers,
                   boolean clusterFail, Partitioning partitioning) {
    this.name = name;
    this.mor = mor;
    this.mdt = mdt;
    this.timelineMarkers = timelineMarkers;
    this.mdtDone = mdtDone;
    this.mdtInflight = mdtInflight;
    this.requestedOnly = requestedOnly;
    this.mdtCompact = mdtCompact;
    this.appendMarkers = appendMarkers;
    this.clusterFail = clusterFail;
    this.partitioning = partitioning;
  }

  public static Scenario parse(String name) {
    String[] p = name.toLowerCase(Locale.ROOT).split("-");
    Partitioning partitioning = Partitioning.PLAIN;
    if (p.length > 3 && Partitioning.ofSuffix(p[p.length - 1]) != null) {
      partitioning = Partitioning.ofSuffix(p[p.length - 1]);
      p = java.util.Arrays.copyOf(p, p.length - 1);
    }
    if (p.length > 3 && p[p.length - 1].equals("twice")) {
      // -twice: run.sh kills a second writer after the first (same batch, same file groups); every
      // JVM of this scenario otherwise behaves as without the suffix
      p = java.util.Arrays.copyOf(p, p.length - 1);
    }
    boolean appendMarkers = false;
    if (p.length > 3 && p[p.length - 1].equals("append")) {
      appendMarkers = true;
      p = java.util.Arrays.copyOf(p, p.length - 1);
    }
    if (p.length < 3 || p.length > 4) {
      throw new IllegalArgumentException("bad scenario name " + name);
    }
    boolean mor = req(p[0], "mor", "cow");
    boolean mdt = req(p[1], "mdt", "nomdt");
    boolean tl = req(p[2], "timeline", "direct");
    boolean mdtDone = false;
    boolean mdtInflight = false;
    boolean requestedOnly = false;
    boolean mdtCompact = false;
    boolean clusterFail = false;
    if (p.length == 4) {
      if (p[3].equals("mdtdone") || p[3].equals("mdtcompact")) {
        if (!mdt) {
          throw new IllegalArgumentException("-" + p[3] + " needs the metadata table (mdt)");
        }
        mdtDone = true;
        mdtCompact = p[3].equals("mdtcompact");
      } else if (p[3].equals("mdtinflight")) {
        if (!mdt) {
          throw new IllegalArgumentException("-mdtinflight needs the metadata table (mdt)");
        }
        mdtInflight = true;
      } else if (p[3].equals("requested")) {
        requestedOnly = true;
      } else if (p[3].equals("clusterfail")) {
        clusterFail = true;
      } else {
        throw new IllegalArgumentException("bad scenario suffix " + p[3]);
      }
    }
    if (appendMarkers && (!mor || requestedOnly || clusterFail)) {
      throw new IllegalArgumentException("-append needs a merge-on-read table whose failed write wrote log files");
    }
    return new Scenario(name.toLowerCase(Locale.ROOT), mor, mdt, tl, mdtDone, mdtInflight, requestedOnly, mdtCompact,
        appendMarkers, clusterFail, partitioning);
  }

  private static boolean req(String v, String yes, String no) {
    if (v.equals(yes)) {
      return true;
    }
    if (v.equals(no)) {
      return false;
    }
    throw new IllegalArgumentException("expected " + yes + " or " + no + ", got " + v);
  }

  /**
   * Reads {@code <dir>/scenario.json} (written by generate) and makes its partitioning the one
   * {@link Data} uses in this JVM.
   */
  public static Scenario load(File tableDir) throws IOException {
    return load(TableDir.of(tableDir.getPath()));
  }

  /** {@link #load(File)} for a table in a local folder or on an object store. */
  static Scenario load(TableDir table) throws IOException {
    if (!table.exists("scenario.json")) {
      throw new IOException("no scenario.json in " + table);
    }
    JsonNode n = new ObjectMapper().readTree(table.read("scenario.json"));
    Scenario s = parse(n.get("scenario").asText());
    Data.use(s);
    return s;
  }

  public String tableType() {
    return mor ? "MERGE_ON_READ" : "COPY_ON_WRITE";
  }

  public String markerType() {
    return timelineMarkers ? "TIMELINE_SERVER_BASED" : "DIRECT";
  }

  /** Table properties for initTable (keys understood by 0.15 and 1.x). */
  public Properties tableProps() {
    Properties p = new Properties();
    p.setProperty("hoodie.table.name", TABLE_NAME);
    p.setProperty("hoodie.table.type", tableType());
    p.setProperty("hoodie.table.recordkey.fields", "id");
    if (!partitioning.partitionFields().isEmpty()) {
      p.setProperty("hoodie.table.partition.fields", partitioning.partitionFields());
    }
    p.setProperty("hoodie.table.precombine.field", "ts");
    p.setProperty("hoodie.table.ordering.fields", "ts");
    p.setProperty("hoodie.table.keygenerator.class", partitioning.keyGenerator);
    p.setProperty("hoodie.table.base.file.format", "PARQUET");
    if (partitioning != Partitioning.PLAIN) {
      // table configs too (HoodieTableConfig.URL_ENCODE_PARTITIONING / HIVE_STYLE_PARTITIONING_ENABLE)
      p.setProperty("hoodie.datasource.write.partitionpath.urlencode", String.valueOf(partitioning.urlEncode));
      p.setProperty("hoodie.datasource.write.hive_style_partitioning", String.valueOf(partitioning.hiveStyle));
    }
    return p;
  }

  /**
   * Write-client properties shared by every JVM that touches the table: the multi-writer (OCC, LAZY,
   * file-system lock) setup under which heartbeats exist and failed writes are rolled back lazily.
   */
  public Properties writeProps(boolean embedTimelineServer) {
    Properties p = new Properties();
    p.setProperty("hoodie.table.name", TABLE_NAME);
    p.setProperty("hoodie.datasource.write.recordkey.field", "id");
    p.setProperty("hoodie.datasource.write.partitionpath.field", partitioning.partitionFields());
    p.setProperty("hoodie.datasource.write.precombine.field", "ts");
    p.setProperty("hoodie.table.ordering.fields", "ts");
    p.setProperty("hoodie.datasource.write.keygenerator.class", partitioning.keyGenerator);
    if (partitioning != Partitioning.PLAIN) {
      p.setProperty("hoodie.datasource.write.partitionpath.urlencode", String.valueOf(partitioning.urlEncode));
      p.setProperty("hoodie.datasource.write.hive_style_partitioning", String.valueOf(partitioning.hiveStyle));
    }
    p.setProperty("hoodie.index.type", "SIMPLE");
    p.setProperty("hoodie.write.concurrency.mode", "optimistic_concurrency_control");
    p.setProperty("hoodie.cleaner.policy.failed.writes", "LAZY");
    lockProps(p);
    p.setProperty("hoodie.client.heartbeat.interval_in_ms", String.valueOf(HEARTBEAT_INTERVAL_MS));
    p.setProperty("hoodie.client.heartbeat.tolerable.misses", String.valueOf(HEARTBEAT_TOLERABLE_MISSES));
    p.setProperty("hoodie.write.markers.type", markerType());
    p.setProperty("hoodie.embed.timeline.server", String.valueOf(embedTimelineServer));
    p.setProperty("hoodie.metadata.enable", String.valueOf(mdt));
    // 0.15/1.0: the caller commits explicitly (1.1 has no auto-commit at all).
    p.setProperty("hoodie.auto.commit", "false");
    p.setProperty("hoodie.insert.shuffle.parallelism", "2");
    p.setProperty("hoodie.upsert.shuffle.parallelism", "2");
    p.setProperty("hoodie.bulkinsert.shuffle.parallelism", "2");
    p.setProperty("hoodie.delete.shuffle.parallelism", "2");
    // no compaction/clustering during generation; the timeline stays exactly: commits + 1 failed write
    p.setProperty("hoodie.compact.inline", "false");
    // small parquet footers (the default bloom filter makes every base file ~430 KB)
    p.setProperty("hoodie.index.bloom.num_entries", "100");
    p.setProperty("hoodie.clustering.inline", "false");
    if (clusterFail) {
      // Hudi 1.2: a clustering heartbeats from its scheduling on, and a LAZY rollback of failed writes
      // also rolls back a pending clustering whose heartbeat expired and whose instant time is at least
      // the threshold old (0: any age)
      p.setProperty("hoodie.clustering.enable.expirations", "true");
      p.setProperty("hoodie.clustering.expiration.threshold.mins", String.valueOf(CLUSTERING_EXPIRATION_THRESHOLD_MINS));
    }
    return p;
  }

  /**
   * Extra write properties of the JVMs that make the table (the completed commits and the failed
   * write), not of Hudi's reference rollback nor of verify: {@code -mdtcompact} compacts the metadata
   * table at the start of every write.
   */
  public Properties makingProps() {
    Properties p = new Properties();
    if (mdtCompact) {
      p.setProperty("hoodie.metadata.compact.max.delta.commits", "1");
    }
    return p;
  }

  /**
   * The lock provider. Environment variable INTEROP_LOCK chooses it for every JVM of a run:
   * unset or {@code filesystem}: FileSystemBasedLockProvider (a traced subclass, same lock file);
   * {@code zookeeper,<host:port>,<base_path>,<lock_key>}: ZookeeperBasedLockProvider;
   * {@code storage,<s3-endpoint>,<validity_secs>,<renew_secs>}: StorageBasedLockProvider (Hudi 1.1 only, on an
   * s3:// or s3a:// base path; see LockCycles).
   */
  static void lockProps(Properties p) {
    String spec = System.getenv().getOrDefault("INTEROP_LOCK", "filesystem");
    if (spec.equals("filesystem")) {
      // a subclass of FileSystemBasedLockProvider that only adds tracing (same lock file, same content)
      p.setProperty("hoodie.write.lock.provider", TracingFileSystemLockProvider.class.getName());
      return;
    }
    String[] z = spec.split(",");
    if (z.length == 4 && z[0].equals("storage")) {
      // Hudi 1.x's StorageBasedLockProvider on an s3:// or s3a:// base path; it loads the harness's own
      // S3StorageLockClient (src/storage-lock-s3, Hudi 1.1 module only), pointed at <endpoint>
      p.setProperty("hoodie.write.lock.provider", "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider");
      p.setProperty("hoodie.write.lock.storage.validity.timeout.secs", z[2]);
      p.setProperty("hoodie.write.lock.storage.renew.interval.secs", z[3]);
      p.setProperty("interop.s3.endpoint", z[1]);
      p.setProperty("interop.s3.region", "us-east-1");
      p.setProperty("interop.s3.access.key", "test");
      p.setProperty("interop.s3.secret.key", "test");
      return;
    }
    if (z.length != 4 || !z[0].equals("zookeeper")) {
      throw new IllegalArgumentException("INTEROP_LOCK must be filesystem, zookeeper,<host:port>,<base_path>,<key>"
          + " or storage,<s3-endpoint>,<validity-secs>,<renew-secs>: " + spec);
    }
    p.setProperty("hoodie.write.lock.provider", "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider");
    p.setProperty("hoodie.write.lock.zookeeper.url", z[1]);
    p.setProperty("hoodie.write.lock.zookeeper.port", z[1].substring(z[1].lastIndexOf(':') + 1));
    p.setProperty("hoodie.write.lock.zookeeper.base_path", z[2]);
    p.setProperty("hoodie.write.lock.zookeeper.lock_key", z[3]);
    p.setProperty("hoodie.write.lock.zookeeper.session_timeout_ms", "10000");
    p.setProperty("hoodie.write.lock.zookeeper.connection_timeout_ms", "5000");
  }

  public ObjectNode toJson(String hudiVersion, String tableVersion) {
    ObjectNode n = new ObjectMapper().createObjectNode();
    n.put("scenario", name);
    n.put("hudi_version", hudiVersion);
    n.put("table_version", tableVersion);
    n.put("table_type", tableType());
    n.put("metadata_table", mdt);
    n.put("marker_type_configured", markerType());
    n.put("embedded_timeline_server", timelineMarkers);
    n.put("failure_point", mdtDone ? "after-mdt-commit-before-dt-complete"
        : mdtInflight ? "mdt-deltacommit-written-before-mdt-complete"
        : requestedOnly ? "after-start-commit"
        : clusterFail ? "clustering-files-written-before-commit" : "after-write-before-commit");
    n.put("metadata_table_compacts_during_failed_write", mdtCompact);
    n.put("append_markers", appendMarkers);
    n.put("clustering_expirations", clusterFail);
    if (clusterFail) {
      n.put("clustering_expiration_threshold_mins", CLUSTERING_EXPIRATION_THRESHOLD_MINS);
    }
    n.put("heartbeat_interval_ms", HEARTBEAT_INTERVAL_MS);
    n.put("heartbeat_tolerable_misses", HEARTBEAT_TOLERABLE_MISSES);
    n.put("lock_provider", "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider (traced subclass)");
    n.put("failed_writes_policy", "LAZY");
    n.put("concurrency_mode", "optimistic_concurrency_control");
    n.put("partitioning", partitioning.name().toLowerCase(Locale.ROOT));
    n.put("key_generator", partitioning.keyGenerator);
    n.put("partition_fields", partitioning.partitionFields());
    n.put("partitionpath_urlencode", partitioning.urlEncode);
    n.put("hive_style_partitioning", partitioning.hiveStyle);
    return n;
  }
}
