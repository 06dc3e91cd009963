package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hudi.client.HoodieJavaWriteClient;
import org.apache.hudi.client.WriteStatus;
import org.apache.hudi.client.common.HoodieJavaEngineContext;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.storage.StorageConfiguration;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * Rollback benchmark of Hudi itself (for BENCHMARKS.md, not part of selftest/CI).
 * <pre>
 *   bench-fail     --dir D --files N --partitions P [--scenario S]   table + 1 completed commit + a failed
 *                                                                     write of ~N base files
 *   bench-rollback --dir D                                            time Hudi's rollbackFailedWrites() of it
 * </pre>
 * The table is scenario S's config, by default {@code cow-nomdt-direct} (COW, metadata table off, DIRECT
 * markers, OCC + LAZY failed-writes policy, 1 s heartbeat with 2 tolerable misses); S may be any plain
 * {@code <cow|mor>-<mdt|nomdt>-<direct|timeline>} scenario (on merge-on-read the inserts make base files
 * as well; with the metadata table the first commit initializes it and the failed write never reaches it). The failed write is an
 * {@code insert()} of {@link #RECORDS_PER_FILE} * N small records spread over P partitions, with
 * {@code hoodie.copyonwrite.insert.split.size=RECORDS_PER_FILE} (auto split off) so every insert bucket
 * becomes its own base file. Hudi assigns records to the buckets of a partition by a hash of the key,
 * so a bucket can stay empty: the number of files is about N (each bucket is empty with probability
 * about e^-8), and the exact count is measured.
 * <p>
 * Both commands take a local folder or an {@code s3a://bucket/key} base path ({@link TableDir}); the
 * side files ({@code scenario.json}, {@code expected-records.json}) sit in the base path either way.
 */
final class Bench {
  static final int RECORDS_PER_FILE = 8;
  static final String SCENARIO = "cow-nomdt-direct";

  private Bench() {
  }

  /** Writer overrides of the benchmark on top of the scenario's writeProps. */
  static Properties benchProps() {
    Properties p = new Properties();
    p.setProperty("hoodie.copyonwrite.insert.auto.split", "false");
    p.setProperty("hoodie.copyonwrite.insert.split.size", String.valueOf(RECORDS_PER_FILE));
    // no small-file routing: every insert goes to a new file group (CREATE marker, new base file)
    p.setProperty("hoodie.parquet.small.file.limit", "0");
    return p;
  }

  static String partition(int i, int partitions) {
    return String.format("p%05d", i % partitions);
  }

  static List<Data.Row> rows(int n, int partitions, int offset, long ts, String val) {
    List<Data.Row> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(new Data.Row(String.format("b%09d", offset + i), partition(i, partitions), ts, val, i));
    }
    return out;
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  static int fail(TableDir dir, int files, int partitions, String scenario) throws Exception {
    if (!scenario.matches("(cow|mor)-(mdt|nomdt)-(direct|timeline)")) {
      throw new IllegalArgumentException("bench-fail takes a plain <cow|mor>-<mdt|nomdt>-<direct|timeline> scenario, not "
          + scenario);
    }
    if (dir.holdsTable()) {
      throw new IOException(dir + " already holds a table");
    }
    dir.create();
    Scenario s = Scenario.parse(scenario);
    String base = dir.base;
    // permissions through java.nio instead of a forked process per created file (see NoForkLocalFileSystem)
    StorageConfiguration<Configuration> conf = Main.storageConf(NoForkLocalFileSystem.class);
    HoodieTableMetaClient mc = Compat.initTable(conf, base, s.tableProps());
    HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        Main.writeConfig(s, base, benchProps()));
    // one completed commit: one record (one base file) per partition
    String c1 = client.startCommit();
    List<Data.Row> c1Rows = rows(partitions, partitions, 0, 1, "c1");
    List<WriteStatus> ws = client.insert(Data.hoodieRecords(c1Rows), c1);
    if (!client.commit(c1, ws)) {
      throw new IllegalStateException("commit " + c1 + " failed");
    }
    mc = HoodieTableMetaClient.reload(mc);
    ObjectNode sj = s.toJson(Main.hudiVersion(), String.valueOf(Main.tableVersion(mc)));
    sj.putArray("completed_instants").add(c1);
    ObjectNode b = sj.putObject("bench");
    b.put("files_requested", files);
    b.put("partitions", partitions);
    b.put("records_per_insert_bucket", RECORDS_PER_FILE);
    b.put("records", (long) files * RECORDS_PER_FILE);
    b.set("writer_overrides", Main.JSON.valueToTree(benchProps()));
    dir.writeJson("scenario.json", sj);
    // what a reader must see once the failed write is rolled back (run.sh verify's default --expect)
    Map<String, Data.Row> expected = new TreeMap<>();
    for (Data.Row r : c1Rows) {
      expected.put(r.id(), r);
    }
    dir.writeJson("expected-records.json", Data.toJson(expected));

    String t = client.startCommit();
    Main.OUT.println("STARTED " + t);
    Main.OUT.flush();
    long t0 = System.nanoTime();
    List<HoodieRecord> recs = Data.hoodieRecords(rows(files * RECORDS_PER_FILE, partitions, partitions, 2, "FAILED"));
    ws = client.insert(recs, t);
    long written = 0;
    for (WriteStatus w : ws) {
      if (w.hasErrors()) {
        throw new IllegalStateException("write errors in " + t + ": " + w.getErrors());
      }
      written++;
    }
    System.err.println("bench-fail: insert of " + recs.size() + " records into " + written + " files took "
        + (System.nanoTime() - t0) / 1_000_000 + " ms");
    Main.readyToDie(t, "files=" + written);
    return 0;
  }

  /** Base files of instant t under the table (outside .hoodie): java.nio locally, one recursive listing otherwise. */
  static long countFiles(TableDir dir, StorageConfiguration<Configuration> conf, String t) throws IOException {
    if (dir.isLocal()) {
      return countFiles(dir.local, t);
    }
    String suffix = "_" + t + ".parquet";
    org.apache.hadoop.fs.Path root = new org.apache.hadoop.fs.Path(dir.base);
    FileSystem fs = root.getFileSystem(conf.unwrap());
    String prefix = fs.makeQualified(root).toString() + "/";
    long n = 0;
    RemoteIterator<LocatedFileStatus> it = fs.listFiles(root, true);
    while (it.hasNext()) {
      String p = it.next().getPath().toString();
      String rel = p.startsWith(prefix) ? p.substring(prefix.length()) : p;
      if (!rel.startsWith(".hoodie/") && p.endsWith(suffix)) {
        n++;
      }
    }
    return n;
  }

  /**
   * Local folder: {@link Main#waitForExpiredHeartbeats}. Object store: the same wait on the heartbeat
   * objects' modification times, with one more second of margin (moto's are whole seconds).
   */
  static void waitForExpiredHeartbeats(TableDir dir, StorageConfiguration<Configuration> conf) throws Exception {
    if (dir.isLocal()) {
      Main.waitForExpiredHeartbeats(new File(dir.local, ".hoodie/.heartbeat"));
      return;
    }
    long maxAge = (long) Scenario.HEARTBEAT_INTERVAL_MS * Scenario.HEARTBEAT_TOLERABLE_MISSES + 2500;
    org.apache.hadoop.fs.Path hb = new org.apache.hadoop.fs.Path(dir.base + "/.hoodie/.heartbeat");
    FileSystem fs = hb.getFileSystem(conf.unwrap());
    if (!fs.exists(hb)) {
      return;
    }
    long deadline = System.currentTimeMillis() + 120_000;
    for (FileStatus f : fs.listStatus(hb)) {
      while (System.currentTimeMillis() - f.getModificationTime() <= maxAge) {
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException("heartbeat " + f.getPath() + " did not expire within 120 s");
        }
        Thread.sleep(250);
      }
    }
  }

  /**
   * BENCH_PHASE_URL (set by scripts/bench-s3-rollback): GET {@code <url>/<phase>} so that a counting
   * proxy in front of the store can attribute the requests that follow to that phase. Unset: nothing.
   */
  static void phase(String name) {
    String url = System.getenv("BENCH_PHASE_URL");
    if (url == null || url.isEmpty()) {
      return;
    }
    try {
      HttpURLConnection c = (HttpURLConnection) URI.create(url.replaceAll("/+$", "") + "/" + name).toURL().openConnection();
      c.setConnectTimeout(5000);
      c.setReadTimeout(5000);
      int code = c.getResponseCode();
      c.getInputStream().readAllBytes();
      c.disconnect();
      if (code != 200) {
        throw new IOException("HTTP " + code);
      }
    } catch (IOException e) {
      throw new IllegalStateException("BENCH_PHASE_URL " + url + ": phase " + name + " not acknowledged", e);
    }
  }

  /** Base files of instant t under dir (outside .hoodie). */
  static long countFiles(File dir, String t) throws IOException {
    String suffix = "_" + t + ".parquet";
    long[] n = {0};
    Files.walkFileTree(dir.toPath(), new SimpleFileVisitor<>() {
      @Override
      public FileVisitResult preVisitDirectory(Path d, BasicFileAttributes a) {
        return d.getFileName().toString().equals(".hoodie") ? FileVisitResult.SKIP_SUBTREE : FileVisitResult.CONTINUE;
      }

      @Override
      public FileVisitResult visitFile(Path f, BasicFileAttributes a) {
        if (f.getFileName().toString().endsWith(suffix)) {
          n[0]++;
        }
        return FileVisitResult.CONTINUE;
      }
    });
    return n[0];
  }

  @SuppressWarnings({"rawtypes"})
  static int rollback(TableDir dir) throws Exception {
    if (!dir.exists("scenario.json")) {
      throw new IOException("no scenario.json in " + dir + " (make the table with run.sh bench-fail)");
    }
    JsonNode sj = Main.JSON.readTree(dir.read("scenario.json"));
    if (sj.get("failed_instant") == null) {
      throw new IOException("no failed_instant in " + dir + "/scenario.json (make the table with run.sh bench-fail)");
    }
    String t = sj.get("failed_instant").asText();
    Scenario s = Scenario.load(dir);
    String base = dir.base;
    // BENCH_FS=nofork: file:// without Hadoop's forked chmod / ls -ld (see NoForkLocalFileSystem)
    boolean noFork = "nofork".equals(System.getenv("BENCH_FS"));
    StorageConfiguration<Configuration> conf = Main.storageConf(noFork ? NoForkLocalFileSystem.class : null);
    long w0 = System.nanoTime();
    waitForExpiredHeartbeats(dir, conf);
    long hbWaitMs = (System.nanoTime() - w0) / 1_000_000;
    long before = countFiles(dir, conf, t);
    HoodieTableMetaClient mc = Main.metaClient(conf, base);
    List<String> pendingBefore = Main.pending(mc);
    boolean result;
    long rollbackMs;
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        Main.writeConfig(s, base, benchProps()))) {
      phase("hudi-rollback-call");
      long t0 = System.nanoTime();
      result = Compat.rollbackFailedWrites(client, mc);
      rollbackMs = (System.nanoTime() - t0) / 1_000_000;
      phase("hudi-jvm-after");
    }
    long jvmMs = System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime();
    long after = countFiles(dir, conf, t);
    List<String> pendingAfter = Main.pending(mc);
    ObjectNode n = Main.JSON.createObjectNode();
    n.put("files", before);
    n.put("rollback_ms", rollbackMs);
    n.put("hudi_version", Main.hudiVersion());
    n.put("table_version", Main.tableVersion(mc));
    JsonNode bench = sj.get("bench");
    if (bench != null && bench.get("partitions") != null) {
      n.put("partitions", bench.get("partitions").asInt());
    }
    if (dir.isLocal()) {
      n.put("local_fs", noFork ? "NoForkLocalFileSystem (BENCH_FS=nofork)" : "Hadoop LocalFileSystem (default)");
    } else {
      n.put("storage", "Hadoop S3AFileSystem (hadoop-aws 2.10.2) at " + base);
    }
    n.put("failed_instant", t);
    n.put("rollback_failed_writes_returned", result);
    n.put("files_after", after);
    n.set("pending_before", Main.JSON.valueToTree(pendingBefore));
    n.set("pending_after", Main.JSON.valueToTree(pendingAfter));
    n.put("heartbeat_wait_ms", hbWaitMs);
    n.put("jvm_uptime_ms_after_rollback", jvmMs);
    Main.OUT.println(Main.JSON.writeValueAsString(n));
    return after == 0 && pendingAfter.isEmpty() ? 0 : 1;
  }
}
