package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.hudi.client.HoodieJavaWriteClient;
import org.apache.hudi.client.WriteStatus;
import org.apache.hudi.client.common.HoodieJavaEngineContext;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.config.HoodieWriteConfig;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * Entry point of the per-version harness JVM. Commands (see ../run.sh, which drives them):
 * <pre>
 *   commits  --dir D --scenario S   create the table and run the completed commits
 *   fail     --dir D                start one more write and stop before it completes (READY_TO_DIE)
 *   scenario-set --dir D --json J   merge the top-level fields of JSON object J into D's scenario.json
 *                                   (objects on both sides are merged field by field)
 *   copy-local --from B --to D      copy the table at base path B (s3a://...) into the new local folder D
 *                                   (see TableDir; commits, fail, writer and scenario-set also take an
 *                                   s3a:// base path as --dir)
 *   rollback --dir D                Hudi's own lazy rollback of expired failed writes
 *   verify   --dir D --expect F     validate the table with Hudi's APIs (JSON report, exit 1 on failure)
 *   dump     --file F               print a timeline file (Avro decoded)
 *   timeline --dir D                Hudi's active timeline of D (and of its metadata table) as JSON, read-only
 *   bench-fail --dir D --files N [--partitions P] [--scenario S]   benchmark table with a failed write of ~N files
 *                                   (D: a local folder or an s3a:// base path)
 *   bench-rollback --dir D          time Hudi's rollbackFailedWrites() on a bench-fail table (local or s3a://)
 *   writer   --dir D --id W --commits N   commit N insert batches of new keys in a loop (OCC, the lock of
 *                                   INTEROP_LOCK, no cleaning); prints COMMITTED/FAILED lines and a JSON summary
 *   savepoint --dir D --instant T   Hudi's own savepoint of completed commit T (user "interop", comment "harness")
 *   restore  --dir D --instant T [--mode savepoint|instant]   Hudi's own restore: restoreToSavepoint(T)
 *                                   (default) or restoreToInstant(T, metadata table enabled); JSON summary,
 *                                   exit 1 with the exception on stderr when Hudi refuses or fails
 *   commit   --dir D                one more completed upsert commit (k00-k05 updated, 3 new keys in p3);
 *                                   writes expected-records-T.json when the previous commit has one
 *   commits-n --dir D --n N         N such commits in one JVM (one write client); the same rows and
 *                                   expected-records-T.json files as N runs of commit; prints a JSON summary
 *   hold-lock --dir D --seconds N   take the table lock the writers take (INTEROP_LOCK's provider, Hudi's
 *                                   own provider class), print LOCKED, hold it N seconds, release, print UNLOCKED
 *   lock-cycles --base B --cycles N --hold-ms H --wait-ms W [--pause-ms P]   take the lock of base path B N
 *                                   times (INTEROP_LOCK's provider, tryLock(W ms)), hold H ms each; see LockCycles
 *   info                            print the Hudi version of this classpath
 * </pre>
 */
public final class Main {
  /** The real stdout, for results only; System.out goes to stderr (libraries print warnings there). */
  static final java.io.PrintStream OUT = System.out;
  static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private Main() {
  }

  public static void main(String[] args) throws Exception {
    System.setOut(System.err);
    if (args.length == 0) {
      usage();
    }
    Map<String, String> opts = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) {
        usage();
      }
      opts.put(args[i].substring(2), args[++i]);
    }
    System.setProperty("interop.role", args[0]);
    int rc;
    switch (args[0]) {
      case "info" -> {
        ObjectNode n = JSON.createObjectNode();
        n.put("hudi_version", hudiVersion());
        n.put("api", Compat.API);
        OUT.println(JSON.writeValueAsString(n));
        rc = 0;
      }
      case "commits" -> rc = commits(TableDir.of(req(opts, "dir")), Scenario.parse(req(opts, "scenario")));
      case "fail" -> rc = fail(TableDir.of(req(opts, "dir")));
      case "scenario-set" -> rc = scenarioSet(TableDir.of(req(opts, "dir")), req(opts, "json"));
      case "copy-local" -> rc = TableDir.copyLocal(req(opts, "from"), new File(req(opts, "to")));
      case "savepoint" -> rc = savepoint(new File(req(opts, "dir")), req(opts, "instant"));
      case "restore" -> rc = restore(new File(req(opts, "dir")), req(opts, "instant"),
          opts.getOrDefault("mode", "savepoint"));
      case "commit" -> rc = commit(new File(req(opts, "dir")));
      case "commits-n" -> rc = commitsN(new File(req(opts, "dir")), Integer.parseInt(req(opts, "n")));
      case "hold-lock" -> rc = holdLock(new File(req(opts, "dir")), Integer.parseInt(req(opts, "seconds")));
      case "writer" -> rc = writer(TableDir.of(req(opts, "dir")), Integer.parseInt(req(opts, "id")),
          Integer.parseInt(req(opts, "commits")));
      case "rollback" -> rc = rollback(new File(req(opts, "dir")));
      case "verify" -> rc = Verify.run(new File(req(opts, "dir")), new File(req(opts, "expect")));
      case "dump" -> rc = Dump.run(new File(req(opts, "file")));
      case "timeline" -> rc = Timeline.run(new File(req(opts, "dir")));
      default -> {
        usage();
        rc = 2;
      }
    }
    OUT.flush();
    // Hudi leaves non-daemon threads behind (timeline server, executors): exit explicitly.
    System.exit(rc);
  }

  private static void usage() {
    System.err.println("usage: Main info | commits --dir D --scenario S | fail --dir D | rollback --dir D"
        + " | scenario-set --dir D --json J | copy-local --from B --to D"
        + " | writer --dir D --id W --commits N | hold-lock --dir D --seconds N | savepoint --dir D --instant T"
        + " | lock-cycles --base B --cycles N --hold-ms H --wait-ms W [--pause-ms P]"
        + " | restore --dir D --instant T [--mode savepoint|instant] | commit --dir D | commits-n --dir D --n N"
        + " | verify --dir D --expect F | dump --file F | timeline --dir D | archived --dir D"
        + " | bench-fail --dir D --files N [--partitions P] [--scenario S] | bench-rollback --dir D");
    System.exit(2);
  }

  private static String req(Map<String, String> o, String k) {
    String v = o.get(k);
    if (v == null) {
      usage();
    }
    return v;
  }

  /** The Hudi version on the classpath (hudi-common's jar name; notes a different hudi-java-client). */
  public static String hudiVersion() {
    String common = "unknown";
    String client = null;
    for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
      String n = new File(e).getName();
      if (n.startsWith("hudi-common-") && n.endsWith(".jar")) {
        common = n.substring("hudi-common-".length(), n.length() - 4);
      } else if (n.startsWith("hudi-java-client-") && n.endsWith(".jar")) {
        client = n.substring("hudi-java-client-".length(), n.length() - 4);
      }
    }
    return client == null || client.equals(common) ? common : common + " (hudi-java-client " + client + ")";
  }

  /**
   * file:// for the harness's writers, readers and verifier: {@link NoForkLocalFileSystem} (Hadoop's
   * checksummed local file system without a forked {@code chmod} per created file), or
   * {@link BlockingLocalFileSystem} (the same, blocking on one completed file). Without Hadoop's native
   * library, the stock file system forks for every file it creates, the heartbeat file included; on a
   * loaded machine a fork can take longer than the 2 s a 1 s heartbeat with 2 tolerable misses allows,
   * and the writer aborts its own commit (seen in CI). Only the benchmark's "stock" column uses
   * Hadoop's default ({@code storageConf((Class<?>) null)}). With INTEROP_PAUSE_DELETES or
   * INTEROP_PAUSE_CREATES set (and no blocking file system asked for), {@link PausingLocalFileSystem}:
   * NoFork, holding data-file deletes or creates.
   */
  static HadoopConf storageConf(boolean blockingFs) {
    return storageConf(blockingFs ? BlockingLocalFileSystem.class
        : PausingLocalFileSystem.enabled() ? PausingLocalFileSystem.class : NoForkLocalFileSystem.class);
  }

  /**
   * file:// served by the given LocalFileSystem subclass (null: Hadoop's default), and s3a:// (Hadoop's
   * S3A of the pinned release) pointed at the S3-compatible server of the tests.
   */
  static HadoopConf storageConf(Class<?> localFs) {
    HadoopConf c = new HadoopConf();
    if (localFs != null) {
      c.set("fs.file.impl", localFs.getName());
      c.setBoolean("fs.file.impl.disable.cache", true);
    }
    s3a(c);
    String nativeReader = nativeHFileReader();
    if (nativeReader != null) {
      // 0.15.0 and 1.0.1 read it from the storage (Hadoop) configuration, not from any Hudi config:
      // HoodieLogFileReader passes storage.getConf().getBoolean(key, default) to HoodieHFileDataBlock.
      c.set(HFILE_NATIVE_READER_KEY, nativeReader);
    }
    return c;
  }

  /**
   * s3a:// against the server named by INTEROP_S3_ENDPOINT (else HUDI_KEEPER_S3_ENDPOINT, which
   * scripts/s3-server prints), e.g. http://127.0.0.1:5757: path-style requests over plain HTTP, the
   * server's fake credentials (test/test, as tests/common/s3.rs), no bucket probing beyond S3A's own.
   * Nothing is set without an endpoint: s3a:// then means AWS, as for any Hadoop client.
   */
  static void s3a(Configuration c) {
    c.set("fs.s3a.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem");
    String endpoint = System.getenv("INTEROP_S3_ENDPOINT");
    if (endpoint == null || endpoint.isEmpty()) {
      endpoint = System.getenv("HUDI_KEEPER_S3_ENDPOINT");
    }
    if (endpoint == null || endpoint.isEmpty()) {
      return;
    }
    c.set("fs.s3a.endpoint", endpoint);
    c.setBoolean("fs.s3a.connection.ssl.enabled", endpoint.startsWith("https://"));
    c.setBoolean("fs.s3a.path.style.access", true);
    c.set("fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider");
    c.set("fs.s3a.access.key", "test");
    c.set("fs.s3a.secret.key", "test");
  }

  /** HoodieReaderConfig.USE_NATIVE_HFILE_READER (0.15.0: default false; 1.0.1: default true; 1.1.1: gone). */
  static final String HFILE_NATIVE_READER_KEY = "_hoodie.hfile.use.native.reader";

  /**
   * INTEROP_EXTRA_PROPS="k=v;k=v": writer properties that override the scenario's in every JVM (an
   * entry without '=' is an error).
   */
  static Properties extraProps() {
    Properties p = new Properties();
    String spec = System.getenv().getOrDefault("INTEROP_EXTRA_PROPS", "");
    for (String kv : spec.split(";")) {
      if (kv.isBlank()) {
        continue;
      }
      int eq = kv.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("INTEROP_EXTRA_PROPS entry is not key=value: " + kv);
      }
      p.setProperty(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
    }
    return p;
  }

  /**
   * The HFile reader this JVM asks Hudi for: INTEROP_HFILE_NATIVE_READER (true|false, set by
   * {@code run.sh verify --native-hfile-reader|--hbase-hfile-reader}), else
   * {@code _hoodie.hfile.use.native.reader} in INTEROP_EXTRA_PROPS; null: Hudi's default.
   */
  static String nativeHFileReader() {
    String v = System.getenv("INTEROP_HFILE_NATIVE_READER");
    if (v == null || v.isEmpty()) {
      v = extraProps().getProperty(HFILE_NATIVE_READER_KEY);
    }
    if (v != null && !v.equals("true") && !v.equals("false")) {
      throw new IllegalArgumentException(HFILE_NATIVE_READER_KEY + " must be true or false, got " + v);
    }
    return v;
  }

  static HoodieWriteConfig writeConfig(Scenario s, String base, Properties extra) {
    Properties p = s.writeProps(s.timelineMarkers);
    // Hudi 0.13's Java client has only the INMEMORY and BLOOM indexes (JavaHoodieIndexFactory); INMEMORY
    // forgets every key when its JVM ends, so the 0.13 key tags records with the bloom index
    p.setProperty("hoodie.index.type", "BLOOM");
    if (extra != null) {
      p.putAll(extra);
    }
    p.putAll(extraProps());
    if (nativeHFileReader() != null) {
      // the write side too (0.15's HoodieAppendHandle gives its HFile blocks the write config's value)
      p.setProperty(HFILE_NATIVE_READER_KEY, nativeHFileReader());
    }
    return HoodieWriteConfig.newBuilder().withPath(base).withSchema(Data.schemaJson()).forTable(Scenario.TABLE_NAME)
        .withProperties(p).build();
  }

  static String base(File dir) {
    return dir.getAbsoluteFile().toURI().toString().replaceAll("/$", "");
  }

  static HoodieTableMetaClient metaClient(HadoopConf conf, String base) {
    return HoodieTableMetaClient.builder().setConf(conf).setBasePath(base).setLoadActiveTimelineOnLoad(true).build();
  }

  static int tableVersion(HoodieTableMetaClient mc) {
    return mc.getTableConfig().getTableVersion().versionCode();
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  static int commits(TableDir dir, Scenario s) throws Exception {
    if (dir.holdsTable()) {
      throw new IOException(dir + " already holds a table");
    }
    dir.create();
    Data.use(s);
    String base = dir.base;
    HadoopConf conf = storageConf(false);
    HoodieTableMetaClient mc = Compat.initTable(conf, base, s.tableProps());
    ArrayNode instants = JSON.createArrayNode();
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        writeConfig(s, base, s.makingProps()))) {
      for (int c = 1; c <= Data.COMPLETED_COMMITS; c++) {
        String t = client.startCommit();
        List<HoodieRecord> recs = Data.hoodieRecords(Data.commitBatch(c));
        List<WriteStatus> ws = c == 1 ? client.insert(recs, t) : upsert(client, s.mor, recs, t);
        for (WriteStatus w : ws) {
          if (w.hasErrors()) {
            throw new IllegalStateException("write errors in " + t + ": " + w.getErrors());
          }
        }
        if (!client.commit(t, ws)) {
          throw new IllegalStateException("commit " + t + " failed");
        }
        instants.add(t);
      }
    }
    mc = HoodieTableMetaClient.reload(mc);
    ObjectNode sj = s.toJson(hudiVersion(), String.valueOf(tableVersion(mc)));
    sj.set("completed_instants", instants);
    dir.writeJson("scenario.json", sj);
    dir.writeJson("expected-records.json", Data.toJson(Data.expected()));
    // what a reader must see once the table is restored to each completed commit
    for (int c = 1; c <= Data.COMPLETED_COMMITS; c++) {
      dir.writeJson(expectedName(instants.get(c - 1).asText()), Data.toJson(Data.expectedAfter(c)));
    }
    OUT.println(JSON.writeValueAsString(sj));
    return 0;
  }

  /**
   * One of several concurrent writers: each commit inserts three new keys {@code w<W>c<C>r<i>} (one per
   * partition p0..p2, so that small-file handling appends to the file groups other writers use too).
   * A commit that fails (a write conflict, a lock timeout) is left pending for a lazy rollback, as a
   * crashed writer's would be once its heartbeat expires. Cleaning is off, so that only the
   * rollbacks under test undo failed writes.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static int writer(TableDir dir, int id, int commits) throws Exception {
    Scenario s = Scenario.load(dir);
    String base = dir.base;
    HadoopConf conf = storageConf(false);
    Properties extra = new Properties();
    extra.setProperty("hoodie.clean.automatic", "false");
    extra.setProperty("hoodie.archive.automatic", "false");
    if (s.mor) {
      // The Java client's MOR inserts into a small file group rewrite its base file without the
      // group's log files, which drops the records of completed deltacommits (seen with 1.1.1,
      // without any rollback involved): new keys go to new file groups instead.
      extra.setProperty("hoodie.parquet.small.file.limit", "0");
    }
    ArrayNode committed = JSON.createArrayNode();
    ArrayNode failed = JSON.createArrayNode();
    for (int c = 1; c <= commits; c++) {
      List<Data.Row> rows = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        rows.add(new Data.Row(String.format("w%dc%02dr%d", id, c, i), Data.partValue(i), 100 + c, "w" + id + "c" + c, c));
      }
      String t = null;
      try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
          writeConfig(s, base, extra))) {
        t = client.startCommit();
        List<WriteStatus> ws = client.insert(Data.hoodieRecords(rows), t);
        for (WriteStatus w : ws) {
          if (w.hasErrors()) {
            throw new IllegalStateException("write errors in " + t + ": " + w.getErrors());
          }
        }
        // Announced before the commit: a writer killed after its commit completed but before it
        // printed COMMITTED still names the records of that commit (the soak expects them).
        String records = new ObjectMapper().writeValueAsString(Data.toJson(rowMap(rows)).get("records"));
        OUT.println("COMMITTING " + t + " " + records);
        OUT.flush();
        if (!client.commit(t, ws)) {
          throw new IllegalStateException("commit returned false");
        }
        ObjectNode n = committed.addObject();
        n.put("instant", t);
        n.set("records", Data.toJson(rowMap(rows)).get("records"));
        OUT.println("COMMITTED " + t);
      } catch (Exception e) {
        ObjectNode n = failed.addObject();
        n.put("instant", t);
        n.put("error", e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).split("\n")[0]);
        OUT.println("FAILED " + t + " " + e);
        // where Hudi refused (stderr; stdout keeps one line per commit)
        e.printStackTrace(System.err);
      }
      OUT.flush();
    }
    ObjectNode summary = JSON.createObjectNode();
    summary.put("writer", id);
    summary.set("committed", committed);
    summary.set("failed", failed);
    OUT.println("SUMMARY " + new ObjectMapper().writeValueAsString(summary));
    return 0;
  }

  private static Map<String, Data.Row> rowMap(List<Data.Row> rows) {
    Map<String, Data.Row> m = new java.util.TreeMap<>();
    for (Data.Row r : rows) {
      m.put(r.id(), r);
    }
    return m;
  }

  /** Hudi's own savepoint of completed commit {@code instant}. */
  @SuppressWarnings({"rawtypes"})
  static int savepoint(File dir, String instant) throws Exception {
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    HadoopConf conf = storageConf(false);
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        writeConfig(s, base, null))) {
      client.savepoint(instant, "interop", "harness");
    }
    OUT.println("SAVEPOINT " + instant);
    return 0;
  }

  /** {@code <dir>/expected-records-<instant>.json}: the records of the table as of that completed commit. */
  static File expectedFile(File dir, String instant) {
    return new File(dir, expectedName(instant));
  }

  static String expectedName(String instant) {
    return "expected-records-" + instant + ".json";
  }

  /**
   * Hudi's own restore, with the harness write config (OCC, LAZY, the INTEROP_LOCK lock).
   * {@code mode} savepoint: {@code restoreToSavepoint(instant)}; instant: {@code restoreToInstant(instant,
   * <metadata table enabled in the write config>)}. Prints a JSON summary; on failure prints the exception
   * (with its causes) to stderr and returns 1.
   */
  @SuppressWarnings({"rawtypes"})
  static int restore(File dir, String instant, String mode) throws Exception {
    if (!mode.equals("savepoint") && !mode.equals("instant")) {
      throw new IllegalArgumentException("--mode must be savepoint or instant, got " + mode);
    }
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    HadoopConf conf = storageConf(false);
    HoodieWriteConfig cfg = writeConfig(s, base, null);
    HoodieTableMetaClient mc = metaClient(conf, base);
    boolean mdtEnabled = cfg.isMetadataTableEnabled();
    boolean mdtAvailable = !mc.getTableConfig().getMetadataPartitions().isEmpty();
    List<String> restoresBefore = restoreInstants(mc);
    List<String> rolledBack = null;
    long t0 = System.currentTimeMillis();
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf), cfg)) {
      if (s.mor) {
        rolledBack = restoreMergeOnRead(client, cfg, instant, mode.equals("savepoint"));
      } else if (mode.equals("savepoint")) {
        client.restoreToSavepoint(instant);
      } else {
        org.apache.hudi.avro.model.HoodieRestoreMetadata md = client.restoreToInstant(instant, mdtEnabled);
        rolledBack = md == null ? null : new ArrayList<>(md.getInstantsToRollback());
      }
    } catch (Exception e) {
      StringBuilder msg = new StringBuilder("restore to " + instant + " (" + mode + ") failed: " + e);
      for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
        msg.append("\n  caused by: ").append(c);
      }
      e.printStackTrace(System.err);
      System.err.println(msg);
      System.err.flush();
      return 1;
    }
    long ms = System.currentTimeMillis() - t0;
    mc = HoodieTableMetaClient.reload(mc);
    List<String> restoresAfter = restoreInstants(mc);
    List<String> newRestores = new ArrayList<>(restoresAfter);
    newRestores.removeAll(restoresBefore);
    ObjectNode n = JSON.createObjectNode();
    n.put("hudi_version", hudiVersion());
    n.put("table_version", tableVersion(mc));
    n.put("mode", mode);
    n.put("restored_to", instant);
    n.put("metadata_table_enabled", mdtEnabled);
    n.put("metadata_table_available_before", mdtAvailable);
    n.set("restore_instants_new", JSON.valueToTree(newRestores));
    n.set("restore_instants", JSON.valueToTree(restoresAfter));
    if (rolledBack != null) {
      n.set("instants_rolled_back", JSON.valueToTree(rolledBack));
    }
    n.put("restore_ms", ms);
    List<String> active = new ArrayList<>();
    for (HoodieInstant i : mc.getActiveTimeline().getInstants()) {
      active.add(Compat.instantTime(i) + "." + i.getAction() + "." + i.getState());
    }
    n.set("active_timeline", JSON.valueToTree(active));
    List<String> pending = pending(mc);
    n.set("pending", JSON.valueToTree(pending));
    OUT.println(JSON.writeValueAsString(n));
    return 0;
  }

  /**
   * Hudi 0.13's restore of a merge-on-read table, as its Spark table runs it: the restore plan
   * ({@code RestorePlanActionExecutor}, through the Java table's {@code scheduleRestore}), then
   * {@code MergeOnReadRestoreActionExecutor}, which rolls each instant back with
   * {@code MergeOnReadRollbackActionExecutor} (all of hudi-client-common 0.13.1). The Java client's
   * own restore cannot: HoodieJavaMergeOnReadTable inherits the copy-on-write restore, which refuses a
   * deltacommit ("Unsupported action in rollback instant"). With {@code savepoint}, the savepoint's
   * presence is checked before and the result after, as {@code restoreToSavepoint} does.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static List<String> restoreMergeOnRead(HoodieJavaWriteClient client, HoodieWriteConfig cfg, String instant,
      boolean savepoint) {
    org.apache.hudi.client.common.HoodieJavaEngineContext ctx =
        (org.apache.hudi.client.common.HoodieJavaEngineContext) client.getEngineContext();
    org.apache.hudi.table.HoodieJavaTable table = org.apache.hudi.table.HoodieJavaTable.create(cfg, ctx);
    if (savepoint) {
      org.apache.hudi.table.action.savepoint.SavepointHelpers.validateSavepointPresence(table, instant);
    }
    String restoreTime = org.apache.hudi.common.table.timeline.HoodieActiveTimeline.createNewInstantTime();
    if (!table.scheduleRestore(ctx, restoreTime, instant).isPresent()) {
      throw new IllegalStateException("Hudi scheduled no restore of " + cfg.getBasePath() + " to " + instant);
    }
    org.apache.hudi.avro.model.HoodieRestoreMetadata md =
        new org.apache.hudi.table.action.restore.MergeOnReadRestoreActionExecutor(ctx, cfg, table, restoreTime, instant)
            .execute();
    if (savepoint) {
      org.apache.hudi.table.action.savepoint.SavepointHelpers.validateSavepointRestore(
          org.apache.hudi.table.HoodieJavaTable.create(cfg, ctx), instant);
    }
    return md == null ? null : new ArrayList<>(md.getInstantsToRollback());
  }

  private static List<String> restoreInstants(HoodieTableMetaClient mc) {
    List<String> out = new ArrayList<>();
    for (HoodieInstant i : mc.reloadActiveTimeline().getRestoreTimeline().getInstants()) {
      out.add(Compat.instantTime(i) + "." + i.getAction() + "." + i.getState());
    }
    return out;
  }

  /**
   * One more completed upsert commit: updates k00-k05 (partitions p0-p2, existing file groups) and
   * inserts three new keys {@code n<T>r<i>} into partition p3. Rows have {@code ts=5} and
   * {@code val="commit-<T>"}: they win over the generated commits (ts 1-3) and lose to verify's
   * follow-up writes (ts 10+). If {@code expected-records-<previous commit>.json} exists, where the
   * previous commit is the latest completed commit before T, writes {@code expected-records-<T>.json}
   * (that state plus these rows). Prints a JSON summary.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static int commit(File dir) throws Exception {
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    HadoopConf conf = storageConf(false);
    HoodieTableMetaClient mc = metaClient(conf, base);
    Committed c;
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        writeConfig(s, base, commitProps(s)))) {
      c = commitOnce(client, s.mor);
    }
    String previous = previousCompleted(HoodieTableMetaClient.reload(mc), c.instant());
    File expected = writeExpected(dir, previous, c);
    ObjectNode n = JSON.createObjectNode();
    n.put("instant", c.instant());
    n.put("previous_commit", previous);
    if (expected != null) {
      n.put("expected_records_file", expected.getAbsolutePath());
    } else {
      n.putNull("expected_records_file");
    }
    n.set("records", Data.toJson(rowMap(c.rows())).get("records"));
    OUT.println(JSON.writeValueAsString(n));
    return 0;
  }

  /**
   * {@code commits-n}: {@link #commit} N times in one JVM, with one write client (as {@link #commits} uses
   * one). Each commit writes what {@code commit} writes (k00-k05 upserted with {@code ts=5},
   * {@code val="commit-<T>"}, three new keys {@code n<T>r<i>} in p3) and, when the previous completed commit
   * has one, {@code expected-records-<T>.json}. Prints {"instants": [...], "ms_per_commit": [...], "total_ms"}.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static int commitsN(File dir, int n) throws Exception {
    if (n < 1) {
      throw new IllegalArgumentException("--n must be at least 1, got " + n);
    }
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    HadoopConf conf = storageConf(false);
    HoodieTableMetaClient mc = metaClient(conf, base);
    ArrayNode instants = JSON.createArrayNode();
    ArrayNode times = JSON.createArrayNode();
    long start = System.currentTimeMillis();
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        writeConfig(s, base, commitProps(s)))) {
      for (int i = 0; i < n; i++) {
        long t0 = System.currentTimeMillis();
        Committed c = commitOnce(client, s.mor);
        mc = HoodieTableMetaClient.reload(mc);
        writeExpected(dir, previousCompleted(mc, c.instant()), c);
        instants.add(c.instant());
        times.add(System.currentTimeMillis() - t0);
        System.err.println("COMMITTED " + c.instant() + " (" + (i + 1) + "/" + n + ") in "
            + (System.currentTimeMillis() - t0) + " ms");
      }
    }
    ObjectNode out = JSON.createObjectNode();
    out.set("instants", instants);
    out.set("ms_per_commit", times);
    out.put("total_ms", System.currentTimeMillis() - start);
    OUT.println(JSON.writeValueAsString(out));
    return 0;
  }

  /** A completed commit of {@link #commitOnce}: its instant and the rows it wrote. */
  record Committed(String instant, List<Data.Row> rows) {}

  /** The write properties of {@link #commit}'s upserts. */
  static Properties commitProps(Scenario s) {
    Properties extra = new Properties();
    if (s.mor) {
      // see writer(): MOR inserts into a small file group lose the group's logged updates
      extra.setProperty("hoodie.parquet.small.file.limit", "0");
    }
    return extra;
  }

  /** One completed upsert commit through {@code client}: k00-k05 updated, three new keys in p3. */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static Committed commitOnce(HoodieJavaWriteClient client, boolean mor) {
    String t = client.startCommit();
    List<Data.Row> rows = new ArrayList<>();
    for (int i = 0; i <= 5; i++) {
      rows.add(new Data.Row(Data.key(i), Data.part(i), 5, "commit-" + t, 5000 + i));
    }
    for (int i = 0; i < 3; i++) {
      rows.add(new Data.Row("n" + t + "r" + i, Data.partValue(3), 5, "commit-" + t, 6000 + i));
    }
    List<WriteStatus> ws = upsert(client, mor, Data.hoodieRecords(rows), t);
    for (WriteStatus w : ws) {
      if (w.hasErrors()) {
        throw new IllegalStateException("write errors in " + t + ": " + w.getErrors());
      }
    }
    if (!client.commit(t, ws)) {
      throw new IllegalStateException("commit " + t + " failed");
    }
    return new Committed(t, rows);
  }

  /**
   * An upsert as a Hudi 0.13 merge-on-read writer makes it: updates appended to the file groups' log
   * files (APPEND markers), inserts into new file groups. Hudi 0.13.1's Java client writes delta
   * commits only through {@code upsertPreppedRecords} (HoodieJavaMergeOnReadTable overrides only
   * upsertPrepped; its plain upsert runs the copy-on-write executor, which rewrites base files), so
   * the records are tagged with the index first, as Spark's upsert does before it writes.
   * Copy-on-write tables use the plain upsert.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static List<WriteStatus> upsert(HoodieJavaWriteClient client, boolean mor, List<HoodieRecord> recs, String t) {
    if (!mor) {
      return client.upsert(recs, t);
    }
    HoodieWriteConfig cfg = client.getConfig();
    org.apache.hudi.client.common.HoodieJavaEngineContext ctx =
        (org.apache.hudi.client.common.HoodieJavaEngineContext) client.getEngineContext();
    org.apache.hudi.table.HoodieJavaTable table = org.apache.hudi.table.HoodieJavaTable.create(cfg, ctx);
    List<HoodieRecord> tagged = client.getIndex()
        .tagLocation(org.apache.hudi.common.data.HoodieListData.eager(recs), ctx, table).collectAsList();
    if (tagged.stream().allMatch(HoodieRecord::isCurrentLocationKnown)) {
      // Only the bulk insert of the new records moves the prepped delta commit to inflight (as
      // JavaBulkInsertHelper does it, with no content); without inserts 0.13.1's Java client leaves it
      // requested and its commit then fails. Spark's 0.13 executor writes the inflight before any file.
      table.getActiveTimeline().transitionRequestedToInflight(
          new HoodieInstant(HoodieInstant.State.REQUESTED, table.getMetaClient().getCommitActionType(), t),
          org.apache.hudi.common.util.Option.empty(), cfg.shouldAllowMultiWriteOnSameInstant());
    }
    return client.upsertPreppedRecords(tagged, t);
  }

  /** The latest completed commit before {@code t}, or null. */
  static String previousCompleted(HoodieTableMetaClient mc, String t) {
    String previous = null;
    for (HoodieInstant i : mc.getCommitsTimeline().filterCompletedInstants().getInstants()) {
      String it = Compat.instantTime(i);
      if (it.compareTo(t) < 0 && (previous == null || it.compareTo(previous) > 0)) {
        previous = it;
      }
    }
    return previous;
  }

  /**
   * {@code expected-records-<T>.json}: the previous commit's expected records (if that file exists)
   * with the commit's rows over them, sorted by key like {@code Data.toJson}. Returns the file, or null
   * when the previous commit has none.
   */
  static File writeExpected(File dir, String previous, Committed c) throws Exception {
    File prevFile = previous == null ? null : expectedFile(dir, previous);
    if (prevFile == null || !prevFile.exists()) {
      return null;
    }
    ObjectNode want = (ObjectNode) JSON.readTree(prevFile);
    Map<String, com.fasterxml.jackson.databind.JsonNode> recs = new java.util.TreeMap<>();
    want.get("records").fields().forEachRemaining(e -> recs.put(e.getKey(), e.getValue()));
    Data.toJson(rowMap(c.rows())).get("records").fields().forEachRemaining(e -> recs.put(e.getKey(), e.getValue()));
    ObjectNode sorted = want.putObject("records");
    recs.forEach(sorted::set);
    File out = expectedFile(dir, c.instant());
    JSON.writeValue(out, want);
    return out;
  }

  /**
   * Holds the table lock through Hudi's own lock provider class (the one the writers are configured
   * with), as a writer inside its commit would.
   */
  static int holdLock(File dir, int seconds) throws Exception {
    Properties p = new Properties();
    Scenario.lockProps(p);
    p.setProperty("hoodie.base.path", base(dir));
    // Outside a write config the lock configuration gets no defaults; these are Hudi's.
    p.putIfAbsent("hoodie.write.lock.filesystem.expire", "0");
    p.putIfAbsent("hoodie.write.lock.wait_time_ms", "60000");
    p.putIfAbsent("hoodie.write.lock.num_retries", "15");
    p.putIfAbsent("hoodie.write.lock.wait_time_ms_between_retry", "1000");
    p.putIfAbsent("hoodie.write.lock.client.num_retries", "50");
    p.putIfAbsent("hoodie.write.lock.client.wait_time_ms_between_retry", "5000");
    String cls = p.getProperty("hoodie.write.lock.provider");
    org.apache.hudi.common.config.LockConfiguration lc = new org.apache.hudi.common.config.LockConfiguration(p);
    org.apache.hudi.common.lock.LockProvider<?> lock = (org.apache.hudi.common.lock.LockProvider<?>) Class.forName(cls)
        .getConstructor(org.apache.hudi.common.config.LockConfiguration.class, org.apache.hadoop.conf.Configuration.class)
        .newInstance(lc, storageConf(false));
    if (!lock.tryLock(60, java.util.concurrent.TimeUnit.SECONDS)) {
      throw new IllegalStateException("could not take " + cls);
    }
    OUT.println("LOCKED " + cls);
    OUT.flush();
    Thread.sleep(seconds * 1000L);
    lock.unlock();
    OUT.println("UNLOCKED " + System.currentTimeMillis());
    OUT.flush();
    lock.close();
    return 0;
  }

  /**
   * {@code scenario-set}: merges the top-level fields of {@code json} into the table's scenario.json; a
   * field whose value is an object on both sides is merged the same way, one level down and further.
   */
  static int scenarioSet(TableDir dir, String json) throws Exception {
    ObjectNode sj = (ObjectNode) JSON.readTree(dir.read("scenario.json"));
    merge(sj, (ObjectNode) JSON.readTree(json));
    dir.writeJson("scenario.json", sj);
    return 0;
  }

  private static void merge(ObjectNode into, ObjectNode from) {
    from.fields().forEachRemaining(e -> {
      com.fasterxml.jackson.databind.JsonNode old = into.get(e.getKey());
      if (old instanceof ObjectNode o && e.getValue() instanceof ObjectNode v) {
        merge(o, v);
      } else {
        into.set(e.getKey(), e.getValue());
      }
    });
  }

  /** Prints the line the driver waits for, then blocks until SIGKILL. */
  public static void readyToDie(String instant, String detail) {
    OUT.println("READY_TO_DIE " + instant + " " + detail);
    OUT.flush();
    while (true) {
      try {
        Thread.sleep(60_000);
      } catch (InterruptedException e) {
        // keep waiting: only SIGKILL ends this writer
      }
    }
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  static int fail(TableDir dir) throws Exception {
    Scenario s = Scenario.load(dir);
    String base = dir.base;
    if (!dir.isLocal() && (s.mdtDone || s.mdtInflight || s.appendMarkers)) {
      // these stop or change the write inside the local file system (BlockingLocalFileSystem, renames)
      throw new IllegalArgumentException(s.name + " needs a local table folder, not " + base);
    }
    if (s.clusterFail) {
      return failClustering(dir, s);
    }
    HadoopConf conf = storageConf(s.mdtDone || s.mdtInflight);
    HoodieJavaEngineContext context = s.appendMarkers
        ? new HoodieJavaEngineContext(conf, new OtherTask())
        : new HoodieJavaEngineContext(conf);
    HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(context, writeConfig(s, base, s.makingProps()));
    String t = client.startCommit();
    OUT.println("STARTED " + t);
    OUT.flush();
    if (s.requestedOnly) {
      readyToDie(t, "requested only");
    }
    List<HoodieRecord> recs = Data.hoodieRecords(Data.failedBatch());
    List<WriteStatus> ws = upsert(client, s.mor, recs, t);
    if (s.appendMarkers) {
      appendMarkers(new File(dir.local, ".hoodie/.temp/" + t));
    }
    if (s.mdtDone || s.mdtInflight) {
      // -mdtdone: blocks before the DT completed file exists (the MDT deltacommit T completed);
      // -mdtinflight: blocks before the MDT's completed deltacommit file of T exists (its requested and
      // inflight files and its log blocks are written)
      System.setProperty("interop.block.table", s.mdtInflight ? "metadata" : "data");
      System.setProperty("interop.block.instant", t);
      client.commit(t, ws); // blocks in BlockingLocalFileSystem
      throw new IllegalStateException("commit of " + t + " was expected to block");
    }
    List<String> files = new ArrayList<>();
    for (WriteStatus w : ws) {
      files.add(w.getStat().getPath());
    }
    readyToDie(t, "wrote " + files);
    return 0;
  }

  /**
   * The execution strategy of {@code -clusterfail}'s clustering (src/v12, the Hudi 1.2 module only): Hudi's
   * Java sort-and-size strategy that, once it has written the clustered base files, prints
   * {@code READY_TO_DIE} and blocks until SIGKILL.
   */
  static final String DYING_CLUSTERING_STRATEGY = "io.hudikeeper.interop.DyingClusteringStrategy";

  /**
   * {@code -clusterfail}: schedules a clustering of the table (Hudi's Java size-based plan: every file
   * slice of p0-p2, one group per partition) with clustering expirations on, so that Hudi starts the
   * clustering instant's heartbeat when it schedules it; then executes it with {@link
   * #DYING_CLUSTERING_STRATEGY}, which writes the new base files (the instant now inflight, its markers
   * written) and blocks before the commit until the driver kills the JVM.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static int failClustering(TableDir dir, Scenario s) throws Exception {
    Properties extra = s.makingProps();
    extra.setProperty("hoodie.clustering.plan.strategy.class",
        "org.apache.hudi.client.clustering.plan.strategy.JavaSizeBasedClusteringPlanStrategy");
    extra.setProperty("hoodie.clustering.execution.strategy.class", DYING_CLUSTERING_STRATEGY);
    HadoopConf conf = storageConf(false);
    HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        writeConfig(s, dir.base, extra));
    org.apache.hudi.common.util.Option<String> t = client.scheduleClustering(org.apache.hudi.common.util.Option.empty());
    if (!t.isPresent()) {
      throw new IllegalStateException("Hudi scheduled no clustering of " + dir.base);
    }
    OUT.println("STARTED " + t.get());
    OUT.flush();
    client.cluster(t.get(), true); // blocks in the strategy once the clustered files are written
    throw new IllegalStateException("clustering " + t.get() + " was expected to block in " + DYING_CLUSTERING_STRATEGY);
  }

  /**
   * {@code -append}: the failed writer's task is partition 1, stage 2, attempt 0, as a Spark task may
   * be, so its files carry the write token {@code 1-2-0} and not the {@code 0-0-0} of the Java engine's
   * one task that the rollbacks (Hudi's and hudi-keeper's) use. Hudi 1.x names the rollback's
   * command-block log file {@code .<fileId>_<T>.log.1_0-0-0} then (version 1, rolled over only while
   * that exact name exists), not the failed log file's version + 1.
   */
  static final class OtherTask extends org.apache.hudi.client.common.JavaTaskContextSupplier {
    @Override
    public java.util.function.Supplier<Integer> getPartitionIdSupplier() {
      return () -> 1;
    }

    @Override
    public java.util.function.Supplier<Integer> getStageIdSupplier() {
      return () -> 2;
    }

    @Override
    public java.util.function.Supplier<Long> getAttemptIdSupplier() {
      return () -> 0L;
    }
  }

  /**
   * {@code -append}: turns the CREATE markers of the failed write's log files into APPEND markers (the
   * marker's {@code .crc} side file with it). Hudi 1.x writers mark a new log file CREATE; Hudi's 1.x
   * rollback treats an APPEND marker on a v8/v9 table differently (a rollback command block).
   */
  static void appendMarkers(File markerDir) throws IOException {
    List<java.nio.file.Path> found = new ArrayList<>();
    try (java.util.stream.Stream<java.nio.file.Path> w = java.nio.file.Files.walk(markerDir.toPath())) {
      w.filter(f -> f.getFileName().toString().matches("^\\..*\\.log\\.\\d+(_[^.]+)?\\.marker\\.CREATE$"))
          .forEach(found::add);
    }
    if (found.isEmpty()) {
      throw new IllegalStateException("-append: no log-file CREATE marker under " + markerDir);
    }
    for (java.nio.file.Path m : found) {
      String name = m.getFileName().toString();
      String renamed = name.substring(0, name.length() - "CREATE".length()) + "APPEND";
      java.nio.file.Files.move(m, m.resolveSibling(renamed));
      java.nio.file.Path crc = m.resolveSibling("." + name + ".crc");
      if (java.nio.file.Files.exists(crc)) {
        java.nio.file.Files.move(crc, m.resolveSibling("." + renamed + ".crc"));
      }
      OUT.println("APPEND_MARKER " + markerDir.toPath().relativize(m.resolveSibling(renamed)));
    }
    OUT.flush();
  }

  static List<String> pending(HoodieTableMetaClient mc) {
    List<String> out = new ArrayList<>();
    for (HoodieInstant i : mc.reloadActiveTimeline().filterInflightsAndRequested().getInstants()) {
      out.add(Compat.instantTime(i) + "." + i.getAction() + "." + i.getState());
    }
    return out;
  }

  /** Hudi's own rollback of the failed write, the reference outcome. */
  @SuppressWarnings({"rawtypes"})
  static int rollback(File dir) throws Exception {
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    HadoopConf conf = storageConf(false);
    waitForExpiredHeartbeats(new File(dir, ".hoodie/.heartbeat"));
    HoodieTableMetaClient mc = metaClient(conf, base);
    List<String> before = pending(mc);
    boolean result;
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        writeConfig(s, base, null))) {
      result = Compat.rollbackFailedWrites(client, mc);
    }
    List<String> after = pending(mc);
    ObjectNode n = JSON.createObjectNode();
    n.put("hudi_version", hudiVersion());
    n.put("rollback_failed_writes_returned", result);
    n.set("pending_before", JSON.valueToTree(before));
    n.set("pending_after", JSON.valueToTree(after));
    List<String> rb = new ArrayList<>();
    for (HoodieInstant i : mc.reloadActiveTimeline().getRollbackTimeline().getInstants()) {
      rb.add(Compat.instantTime(i) + "." + i.getAction() + "." + i.getState());
    }
    n.set("rollback_instants", JSON.valueToTree(rb));
    OUT.println(JSON.writeValueAsString(n));
    return after.isEmpty() ? 0 : 1;
  }

  /**
   * Waits until every heartbeat file is older than interval * tolerable misses (+ margin), except the
   * heartbeats of rollback instants (Hudi 1.2 heartbeats a rollback while it runs): whether another
   * rollback is alive is Hudi's to judge, and waiting for it would hide that.
   */
  static void waitForExpiredHeartbeats(File hbDir) throws InterruptedException {
    long maxAge = (long) Scenario.HEARTBEAT_INTERVAL_MS * Scenario.HEARTBEAT_TOLERABLE_MISSES + 1500;
    File[] hbs = hbDir.listFiles();
    if (hbs == null) {
      return;
    }
    File meta = hbDir.getParentFile();
    for (File f : hbs) {
      String t = f.getName();
      if (t.startsWith(".") && t.endsWith(".crc")) {
        // Hadoop's checksum side file of heartbeat <t>, written with it
        t = t.substring(1, t.length() - ".crc".length());
      }
      // timeline layout 2 (.hoodie/timeline/) or 1 (.hoodie/)
      if (new File(meta, "timeline/" + t + ".rollback.requested").exists()
          || new File(meta, t + ".rollback.requested").exists()) {
        continue;
      }
      while (f.exists() && System.currentTimeMillis() - f.lastModified() <= maxAge) {
        Thread.sleep(250);
      }
    }
  }
}
