package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hudi.avro.model.HoodieRollbackMetadata;
import org.apache.hudi.avro.model.HoodieRollbackPartitionMetadata;
import org.apache.hudi.client.SparkRDDWriteClient;
import org.apache.hudi.client.WriteStatus;
import org.apache.hudi.client.common.HoodieSparkEngineContext;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.table.timeline.TimelineMetadataUtils;
import org.apache.hudi.config.HoodieWriteConfig;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * Entry point of the spark-0.13 module's JVMs: Hudi 0.13.1 writing, rolling back and reading tables
 * through Spark ({@code SparkRDDWriteClient}, Spark's {@code local[1]} master, no UI), so that the tables
 * are of table version 5 with a metadata table. Commands (driven by ../spark-0.13/run.sh):
 * <pre>
 *   info                            Hudi and Spark versions of this classpath (JSON)
 *   commits  --dir D --scenario S   create the table and run the completed commits (Data's 3 commits)
 *   fail     --dir D                one more write (Data's failed batch), stopped before it completes:
 *                                   prints READY_TO_DIE and blocks until the driver SIGKILLs the JVM
 *   scenario-set --dir D --json J   merge the top-level fields of J into D's scenario.json
 *   rollback --dir D                Hudi's own rollback of failed writes (LAZY: rollbackFailedWrites())
 *   verify   --dir D --expect F [--followup true|false]   read the table back with Hudi 0.13.1 (JSON report)
 *   mdt-dump --dir D                the metadata table: its timeline, and every log block of its files
 *                                   partition with the file entries each record holds (JSON)
 *   savepoint --dir D --instant T   Hudi's own savepoint of completed commit T (user "interop", comment
 *                                   "harness"; JSON summary)
 *   restore  --dir D --instant T [--mode savepoint|instant]   Hudi's own restore: restoreToSavepoint(T)
 *                                   (default) or restoreToInstant(T, true); JSON summary, exit 1 (and the
 *                                   exception on stderr) when Hudi refuses or fails
 * </pre>
 * Scenarios use the harness grammar (Scenario); this module makes {@code (cow|mor)-(mdt|nomdt)-direct}
 * with an optional {@code -mdtdone}, {@code -mdtinflight} or {@code -requested}.
 */
public final class Main {
  /** The real stdout, for results only; System.out goes to stderr (Spark and Hudi print there). */
  static final java.io.PrintStream OUT = System.out;
  static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
  /** The bundle this module runs (see pom.xml); its jar name carries the Hudi version. */
  static final String BUNDLE = "hudi-spark3.2-bundle_2.12";

  private static SparkSession spark;

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
      case "info" -> rc = info();
      case "commits" -> rc = commits(TableDir.of(req(opts, "dir")), Scenario.parse(req(opts, "scenario")));
      case "fail" -> rc = fail(TableDir.of(req(opts, "dir")));
      case "scenario-set" -> rc = scenarioSet(TableDir.of(req(opts, "dir")), req(opts, "json"));
      case "rollback" -> rc = rollback(new File(req(opts, "dir")));
      case "verify" -> rc = SparkVerify.run(new File(req(opts, "dir")), new File(req(opts, "expect")),
          Boolean.parseBoolean(opts.getOrDefault("followup", "true")));
      case "mdt-dump" -> rc = MdtDump.run(new File(req(opts, "dir")));
      case "savepoint" -> rc = savepoint(new File(req(opts, "dir")), req(opts, "instant"));
      case "restore" -> rc = restore(new File(req(opts, "dir")), req(opts, "instant"),
          opts.getOrDefault("mode", "savepoint"));
      default -> {
        usage();
        rc = 2;
      }
    }
    OUT.flush();
    if (spark != null) {
      spark.stop();
    }
    // Hudi and Spark leave non-daemon threads behind: exit explicitly.
    System.exit(rc);
  }

  private static void usage() {
    System.err.println("usage: Main info | commits --dir D --scenario S | fail --dir D | rollback --dir D"
        + " | scenario-set --dir D --json J | verify --dir D --expect F [--followup true|false] | mdt-dump --dir D"
        + " | savepoint --dir D --instant T | restore --dir D --instant T [--mode savepoint|instant]");
    System.exit(2);
  }

  private static String req(Map<String, String> o, String k) {
    String v = o.get(k);
    if (v == null) {
      usage();
    }
    return v;
  }

  /** The Hudi version, from the bundle's jar name on the classpath (e.g. 0.13.1). */
  public static String hudiVersion() {
    for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
      String n = new File(e).getName();
      if (n.startsWith(BUNDLE + "-") && n.endsWith(".jar")) {
        return n.substring(BUNDLE.length() + 1, n.length() - 4) + " (" + BUNDLE + ")";
      }
    }
    return "unknown";
  }

  static int info() throws Exception {
    ObjectNode n = JSON.createObjectNode();
    n.put("hudi_version", hudiVersion());
    n.put("spark_version", session(false).version());
    n.put("java_version", System.getProperty("java.version"));
    n.put("table_version_written", org.apache.hudi.common.table.HoodieTableVersion.current().versionCode());
    OUT.println(JSON.writeValueAsString(n));
    return 0;
  }

  /**
   * file:// served by {@link NoForkLocalFileSystem} (no forked chmod/ls per file: without Hadoop's
   * native library a loaded 2-core machine can otherwise miss the 1 s heartbeats), or by
   * {@link BlockingLocalFileSystem} for the writers of {@code -mdtdone}/{@code -mdtinflight}.
   */
  static HadoopConf storageConf(boolean blockingFs) {
    HadoopConf c = new HadoopConf();
    c.set("fs.file.impl", (blockingFs ? BlockingLocalFileSystem.class : NoForkLocalFileSystem.class).getName());
    c.setBoolean("fs.file.impl.disable.cache", true);
    return c;
  }

  /**
   * This JVM's Spark session (one per JVM): {@code local[1]}, no UI, Kryo with Hudi's registrator, Hudi's
   * SQL extension, and the harness's local file system for file:// (the same Hadoop settings as
   * {@link #storageConf}) in Spark's Hadoop configuration, which Hudi's engine context uses everywhere.
   */
  static SparkSession session(boolean blockingFs) {
    if (spark != null) {
      return spark;
    }
    String tmp = System.getProperty("java.io.tmpdir");
    SparkConf c = new SparkConf()
        .setMaster("local[1]")
        .setAppName("hudi-keeper-interop-spark013-" + System.getProperty("interop.role", "?"))
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1")
        .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .set("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .set("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .set("spark.sql.shuffle.partitions", "2")
        .set("spark.sql.warehouse.dir", new File(tmp, "interop-spark013-warehouse").getAbsolutePath());
    HadoopConf fs = storageConf(blockingFs);
    for (String k : new String[] {"fs.file.impl", "fs.file.impl.disable.cache"}) {
      c.set("spark.hadoop." + k, fs.get(k));
    }
    spark = SparkSession.builder().config(c).getOrCreate();
    return spark;
  }

  static JavaSparkContext jsc() {
    return JavaSparkContext.fromSparkContext(spark.sparkContext());
  }

  static HoodieSparkEngineContext engine() {
    return new HoodieSparkEngineContext(jsc());
  }

  /**
   * INTEROP_EXTRA_PROPS="k=v;k=v": writer properties that override the scenario's in every JVM (as in
   * ../run.sh).
   */
  static Properties extraProps() {
    Properties p = new Properties();
    for (String kv : System.getenv().getOrDefault("INTEROP_EXTRA_PROPS", "").split(";")) {
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
   * The harness's writer config (Scenario.writeProps: OCC, LAZY failed-writes policy, the traced
   * file-system lock, 1 s heartbeats with 2 tolerable misses, DIRECT markers without the embedded
   * timeline server, SIMPLE index, no auto-commit, metadata table per scenario), for Spark's client.
   */
  static HoodieWriteConfig writeConfig(Scenario s, String base, Properties extra) {
    Properties p = s.writeProps(s.timelineMarkers);
    if (extra != null) {
      p.putAll(extra);
    }
    p.putAll(extraProps());
    return HoodieWriteConfig.newBuilder().withPath(base).withSchema(Data.schemaJson()).forTable(Scenario.TABLE_NAME)
        .withProperties(p).build();
  }

  static String base(File dir) {
    return dir.getAbsoluteFile().toURI().toString().replaceAll("/$", "");
  }

  static HoodieTableMetaClient metaClient(String base) {
    return HoodieTableMetaClient.builder().setConf(jsc().hadoopConfiguration()).setBasePath(base)
        .setLoadActiveTimelineOnLoad(true).build();
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  static JavaRDD<HoodieRecord> rdd(List<Data.Row> rows) {
    return jsc().parallelize((List) Data.hoodieRecords(rows), 1);
  }

  static void checkWriteStatuses(String t, List<WriteStatus> ws) {
    for (WriteStatus w : ws) {
      if (w.hasErrors()) {
        throw new IllegalStateException("write errors in " + t + ": " + w.getErrors());
      }
    }
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  static int commits(TableDir dir, Scenario s) throws Exception {
    checkScenario(s);
    if (dir.holdsTable()) {
      throw new IOException(dir + " already holds a table");
    }
    dir.create();
    Data.use(s);
    String base = dir.base;
    session(false);
    HoodieTableMetaClient.withPropertyBuilder().fromProperties(s.tableProps()).initTable(jsc().hadoopConfiguration(), base);
    ArrayNode instants = JSON.createArrayNode();
    try (SparkRDDWriteClient client = new SparkRDDWriteClient<>(engine(), writeConfig(s, base, s.makingProps()))) {
      for (int c = 1; c <= Data.COMPLETED_COMMITS; c++) {
        String t = client.startCommit();
        JavaRDD<HoodieRecord> recs = rdd(Data.commitBatch(c));
        JavaRDD<WriteStatus> ws = c == 1 ? client.insert(recs, t) : client.upsert(recs, t);
        // the write runs here (Hudi persists the statuses; commit() reads them again)
        checkWriteStatuses(t, ws.collect());
        if (!client.commit(t, ws)) {
          throw new IllegalStateException("commit " + t + " failed");
        }
        instants.add(t);
      }
    }
    HoodieTableMetaClient mc = metaClient(base);
    ObjectNode sj = s.toJson(hudiVersion(), String.valueOf(mc.getTableConfig().getTableVersion().versionCode()));
    sj.put("engine", "spark");
    sj.put("spark_version", spark.version());
    sj.put("write_client", "SparkRDDWriteClient");
    sj.set("completed_instants", instants);
    dir.writeJson("scenario.json", sj);
    dir.writeJson("expected-records.json", Data.toJson(Data.expected()));
    for (int c = 1; c <= Data.COMPLETED_COMMITS; c++) {
      dir.writeJson("expected-records-" + instants.get(c - 1).asText() + ".json", Data.toJson(Data.expectedAfter(c)));
    }
    OUT.println(JSON.writeValueAsString(sj));
    return 0;
  }

  /** The scenarios this module makes (the others need the Java client's hooks or the timeline server). */
  static void checkScenario(Scenario s) {
    if (s.timelineMarkers || s.mdtCompact || s.appendMarkers || s.clusterFail
        || s.partitioning != Scenario.Partitioning.PLAIN) {
      throw new IllegalArgumentException("spark-0.13 makes (cow|mor)-(mdt|nomdt)-direct[-mdtdone|-mdtinflight|-requested]"
          + " only, not " + s.name);
    }
  }

  /**
   * The failed write: Data's failed batch upserted (k00-k02 and k09-k11 into existing file groups:
   * log files with APPEND markers on MOR, new base files on COW; k15-k17 into the new partition p3).
   * Default: the write runs (data files and markers written) and no commit follows. {@code -mdtdone}:
   * commit() completes the metadata table's deltacommit and blocks creating the data table's completed
   * file; {@code -mdtinflight}: it blocks creating the metadata table's completed deltacommit file;
   * {@code -requested}: nothing after startCommit(). Each prints READY_TO_DIE and blocks.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static int fail(TableDir dir) throws Exception {
    Scenario s = Scenario.load(dir);
    checkScenario(s);
    String base = dir.base;
    session(s.mdtDone || s.mdtInflight);
    SparkRDDWriteClient client = new SparkRDDWriteClient<>(engine(), writeConfig(s, base, s.makingProps()));
    String t = client.startCommit();
    OUT.println("STARTED " + t);
    OUT.flush();
    if (s.requestedOnly) {
      readyToDie(t, "requested only");
    }
    JavaRDD<WriteStatus> ws = client.upsert(rdd(Data.failedBatch()), t);
    List<WriteStatus> written = ws.collect();
    checkWriteStatuses(t, written);
    if (s.mdtDone || s.mdtInflight) {
      System.setProperty("interop.block.table", s.mdtInflight ? "metadata" : "data");
      System.setProperty("interop.block.instant", t);
      client.commit(t, ws); // blocks in BlockingLocalFileSystem
      throw new IllegalStateException("commit of " + t + " was expected to block");
    }
    List<String> files = new ArrayList<>();
    for (WriteStatus w : written) {
      files.add(w.getStat().getPath());
    }
    readyToDie(t, "wrote " + files);
    return 0;
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

  static int scenarioSet(TableDir dir, String json) throws Exception {
    ObjectNode sj = (ObjectNode) JSON.readTree(dir.read("scenario.json"));
    ((ObjectNode) JSON.readTree(json)).fields().forEachRemaining(e -> sj.set(e.getKey(), e.getValue()));
    dir.writeJson("scenario.json", sj);
    return 0;
  }

  static String name(HoodieInstant i) {
    return i.getTimestamp() + "." + i.getAction() + "." + i.getState();
  }

  static List<String> pending(HoodieTableMetaClient mc) {
    List<String> out = new ArrayList<>();
    for (HoodieInstant i : mc.reloadActiveTimeline().filterInflightsAndRequested().getInstants()) {
      out.add(name(i));
    }
    return out;
  }

  static List<String> instants(HoodieTableMetaClient mc) {
    List<String> out = new ArrayList<>();
    for (HoodieInstant i : mc.reloadActiveTimeline().getInstants()) {
      out.add(name(i));
    }
    return out;
  }

  /** The metadata table's active timeline, or null when the table has none. */
  static List<String> mdtInstants(String base, File dir) {
    if (!new File(dir, ".hoodie/metadata/.hoodie").isDirectory()) {
      return null;
    }
    return instants(metaClient(base + "/.hoodie/metadata"));
  }

  /** Hudi's own rollback of the failed write (the reference outcome), as ../run.sh rollback does it. */
  @SuppressWarnings({"rawtypes"})
  static int rollback(File dir) throws Exception {
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    session(false);
    waitForExpiredHeartbeats(new File(dir, ".hoodie/.heartbeat"));
    HoodieTableMetaClient mc = metaClient(base);
    ObjectNode n = JSON.createObjectNode();
    n.put("hudi_version", hudiVersion());
    n.put("spark_version", spark.version());
    n.set("pending_before", JSON.valueToTree(pending(mc)));
    n.set("mdt_timeline_before", JSON.valueToTree(mdtInstants(base, dir)));
    long t0 = System.currentTimeMillis();
    boolean result;
    try (SparkRDDWriteClient client = new SparkRDDWriteClient<>(engine(), writeConfig(s, base, null))) {
      result = client.rollbackFailedWrites();
    }
    n.put("rollback_ms", System.currentTimeMillis() - t0);
    n.put("rollback_failed_writes_returned", result);
    List<String> after = pending(mc);
    n.set("pending_after", JSON.valueToTree(after));
    ArrayNode rbs = n.putArray("rollbacks");
    for (HoodieInstant i : mc.reloadActiveTimeline().getRollbackTimeline().getInstants()) {
      ObjectNode r = rbs.addObject();
      r.put("instant", name(i));
      if (i.isCompleted()) {
        r.set("metadata", rollbackSummary(TimelineMetadataUtils.deserializeHoodieRollbackMetadata(
            mc.getActiveTimeline().getInstantDetails(i).get())));
      }
    }
    n.set("mdt_timeline_after", JSON.valueToTree(mdtInstants(base, dir)));
    OUT.println(JSON.writeValueAsString(n));
    return after.isEmpty() ? 0 : 1;
  }

  /** A completed rollback's metadata: what it rolled back, and per partition what it deleted and wrote. */
  static ObjectNode rollbackSummary(HoodieRollbackMetadata md) {
    ObjectNode o = JSON.createObjectNode();
    o.set("commits_rollback", JSON.valueToTree(md.getCommitsRollback()));
    o.put("total_files_deleted", md.getTotalFilesDeleted());
    ObjectNode parts = o.putObject("partitions");
    for (Map.Entry<String, HoodieRollbackPartitionMetadata> e : new TreeMap<>(md.getPartitionMetadata()).entrySet()) {
      ObjectNode p = parts.putObject(e.getKey());
      p.set("success_delete_files", JSON.valueToTree(e.getValue().getSuccessDeleteFiles()));
      p.set("failed_delete_files", JSON.valueToTree(e.getValue().getFailedDeleteFiles()));
      p.set("rollback_log_files", JSON.valueToTree(e.getValue().getRollbackLogFiles()));
    }
    return o;
  }

  /**
   * Waits until every heartbeat file is older than interval * tolerable misses (+ margin), except the
   * heartbeats of rollback instants (as ../src/v013's Main).
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
        t = t.substring(1, t.length() - ".crc".length());
      }
      if (new File(meta, t + ".rollback.requested").exists()) {
        continue;
      }
      while (f.exists() && System.currentTimeMillis() - f.lastModified() <= maxAge) {
        Thread.sleep(250);
      }
    }
  }

  /**
   * Hudi's own savepoint of completed commit {@code instant} ({@code savepoint(instant, "interop",
   * "harness")}), with the module's write config (metadata table on, OCC, the traced file-system lock).
   * Prints a JSON summary: the savepoint instant, its files per partition (from its metadata), timing, and
   * both timelines after.
   */
  @SuppressWarnings({"rawtypes"})
  static int savepoint(File dir, String instant) throws Exception {
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    session(false);
    ObjectNode n = JSON.createObjectNode();
    n.put("hudi_version", hudiVersion());
    n.put("spark_version", spark.version());
    n.set("mdt_timeline_before", JSON.valueToTree(mdtInstants(base, dir)));
    long t0 = System.currentTimeMillis();
    try (SparkRDDWriteClient client = new SparkRDDWriteClient<>(engine(), writeConfig(s, base, null))) {
      client.savepoint(instant, "interop", "harness");
    } catch (Exception e) {
      return failed("savepoint of " + instant, e);
    }
    n.put("savepoint_ms", System.currentTimeMillis() - t0);
    n.put("savepoint", instant);
    HoodieTableMetaClient mc = metaClient(base);
    ObjectNode files = n.putObject("savepointed_files");
    for (HoodieInstant i : mc.getActiveTimeline().getSavePointTimeline().getInstants()) {
      if (i.getTimestamp().equals(instant) && i.isCompleted()) {
        var md = TimelineMetadataUtils.deserializeHoodieSavepointMetadata(mc.getActiveTimeline().getInstantDetails(i).get());
        n.put("savepointed_by", md.getSavepointedBy());
        n.put("comments", md.getComments());
        for (var e : new TreeMap<>(md.getPartitionMetadata()).entrySet()) {
          List<String> names = new ArrayList<>(e.getValue().getSavepointDataFile());
          java.util.Collections.sort(names);
          files.set(e.getKey(), JSON.valueToTree(names));
        }
      }
    }
    n.set("active_timeline", JSON.valueToTree(instants(mc)));
    n.set("mdt_timeline_after", JSON.valueToTree(mdtInstants(base, dir)));
    OUT.println(JSON.writeValueAsString(n));
    return 0;
  }

  /**
   * Hudi's own restore with the module's write config (metadata table on, OCC, LAZY, the traced lock),
   * through SparkRDDWriteClient: {@code mode} savepoint: {@code restoreToSavepoint(instant)}; instant:
   * {@code restoreToInstant(instant, true)} (true = the write config's hoodie.metadata.enable). Waits for
   * expired heartbeats first, as {@link #rollback} does. Prints a JSON summary (the fields of ../run.sh
   * restore, plus both metadata-table timelines and the restore's metadata); on failure prints the
   * exception with its causes to stderr and returns 1.
   */
  @SuppressWarnings({"rawtypes"})
  static int restore(File dir, String instant, String mode) throws Exception {
    if (!mode.equals("savepoint") && !mode.equals("instant")) {
      throw new IllegalArgumentException("--mode must be savepoint or instant, got " + mode);
    }
    Scenario s = Scenario.load(dir);
    String base = base(dir);
    session(false);
    waitForExpiredHeartbeats(new File(dir, ".hoodie/.heartbeat"));
    HoodieWriteConfig cfg = writeConfig(s, base, null);
    HoodieTableMetaClient mc = metaClient(base);
    boolean mdtEnabled = cfg.isMetadataTableEnabled();
    boolean mdtAvailable = !mc.getTableConfig().getMetadataPartitions().isEmpty();
    List<String> restoresBefore = restoreInstants(mc);
    List<String> timelineBefore = instants(mc);
    List<String> mdtBefore = mdtInstants(base, dir);
    long t0 = System.currentTimeMillis();
    try (SparkRDDWriteClient client = new SparkRDDWriteClient<>(engine(), cfg)) {
      if (mode.equals("savepoint")) {
        client.restoreToSavepoint(instant);
      } else {
        client.restoreToInstant(instant, mdtEnabled);
      }
    } catch (Exception e) {
      return failed("restore to " + instant + " (" + mode + ")", e);
    }
    long ms = System.currentTimeMillis() - t0;
    mc = HoodieTableMetaClient.reload(mc);
    List<String> restoresAfter = restoreInstants(mc);
    List<String> newRestores = new ArrayList<>(restoresAfter);
    newRestores.removeAll(restoresBefore);
    ObjectNode n = JSON.createObjectNode();
    n.put("hudi_version", hudiVersion());
    n.put("spark_version", spark.version());
    n.put("table_version", mc.getTableConfig().getTableVersion().versionCode());
    n.put("mode", mode);
    n.put("restored_to", instant);
    n.put("metadata_table_enabled", mdtEnabled);
    n.put("metadata_table_available_before", mdtAvailable);
    n.set("restore_instants_new", JSON.valueToTree(newRestores));
    n.set("restore_instants", JSON.valueToTree(restoresAfter));
    n.put("restore_ms", ms);
    ArrayNode rolledBack = n.putArray("instants_rolled_back");
    ObjectNode childRollbacks = n.putObject("restore_metadata");
    for (HoodieInstant i : mc.getActiveTimeline().getRestoreTimeline().filterCompletedInstants().getInstants()) {
      if (!newRestores.contains(name(i))) {
        continue;
      }
      var md = TimelineMetadataUtils.deserializeHoodieRestoreMetadata(mc.getActiveTimeline().getInstantDetails(i).get());
      md.getInstantsToRollback().forEach(rolledBack::add);
      ObjectNode o = childRollbacks.putObject(i.getTimestamp());
      o.put("version", md.getVersion());
      o.put("start_restore_time", md.getStartRestoreTime());
      o.put("time_taken_ms", md.getTimeTakenInMillis());
      o.set("instants_to_rollback", JSON.valueToTree(md.getInstantsToRollback()));
      if (md.getRestoreInstantInfo() != null) {
        ArrayNode info = o.putArray("restore_instant_info");
        md.getRestoreInstantInfo().forEach(ii -> info.add(ii.getCommitTime() + "." + ii.getAction()));
      }
      ObjectNode per = o.putObject("rollbacks");
      for (var e : new TreeMap<>(md.getHoodieRestoreMetadata()).entrySet()) {
        ArrayNode a = per.putArray(e.getKey());
        for (HoodieRollbackMetadata rm : e.getValue()) {
          ObjectNode r = rollbackSummary(rm);
          r.put("start_rollback_time", rm.getStartRollbackTime());
          r.set("instants_rollback", JSON.valueToTree(rm.getInstantsRollback() == null ? List.of()
              : rm.getInstantsRollback().stream().map(x -> x.getCommitTime() + "." + x.getAction()).toList()));
          a.add(r);
        }
      }
    }
    n.set("active_timeline_before", JSON.valueToTree(timelineBefore));
    n.set("active_timeline", JSON.valueToTree(instants(mc)));
    n.set("pending", JSON.valueToTree(pending(mc)));
    n.set("mdt_timeline_before", JSON.valueToTree(mdtBefore));
    n.set("mdt_timeline_after", JSON.valueToTree(mdtInstants(base, dir)));
    OUT.println(JSON.writeValueAsString(n));
    return 0;
  }

  private static List<String> restoreInstants(HoodieTableMetaClient mc) {
    List<String> out = new ArrayList<>();
    for (HoodieInstant i : mc.reloadActiveTimeline().getRestoreTimeline().getInstants()) {
      out.add(name(i));
    }
    return out;
  }

  /** Prints what failed, the stack and a last line "<what> failed: <exception>" plus its causes; returns 1. */
  private static int failed(String what, Exception e) {
    StringBuilder msg = new StringBuilder(what + " failed: " + e);
    for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
      msg.append("\n  caused by: ").append(c);
    }
    e.printStackTrace(System.err);
    System.err.println(msg);
    System.err.flush();
    return 1;
  }
}
