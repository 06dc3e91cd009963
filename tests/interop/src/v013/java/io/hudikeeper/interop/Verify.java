package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.IndexedRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.hudi.client.HoodieJavaWriteClient;
import org.apache.hudi.client.WriteStatus;
import org.apache.hudi.client.common.HoodieJavaEngineContext;
import org.apache.hudi.common.config.HoodieMetadataConfig;
import org.apache.hudi.common.fs.FSUtils;
import org.apache.hudi.common.model.FileSlice;
import org.apache.hudi.common.model.HoodieFileGroup;
import org.apache.hudi.common.model.HoodieLogFile;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.common.model.HoodieRecordPayload;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.TableSchemaResolver;
import org.apache.hudi.common.table.log.HoodieMergedLogRecordScanner;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.table.timeline.HoodieTimeline;
import org.apache.hudi.common.table.view.FileSystemViewManager;
import org.apache.hudi.common.table.view.HoodieTableFileSystemView;
import org.apache.hudi.common.util.Option;
import org.apache.hudi.metadata.HoodieBackedTableMetadata;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.avro.AvroParquetReader;
import org.apache.parquet.hadoop.ParquetReader;

import java.io.File;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * Validator built on Hudi's own APIs. Runs on the given table directory (run.sh passes a scratch copy,
 * because the follow-up write mutates the table). Prints a JSON report; exit 0 iff every check passed.
 */
final class Verify {
  private final File dir;
  private final String base;
  private final ObjectNode report = Main.JSON.createObjectNode();
  private final ArrayNode checks = report.putArray("checks");
  private boolean ok = true;
  private final HadoopConf conf = Main.storageConf(false);
  /** Keys that readAll() found in more than one file slice (each one is a difference from the expected set). */
  private final List<String> duplicateKeys = new ArrayList<>();

  private Verify(File dir) {
    this.dir = dir;
    this.base = Main.base(dir);
  }

  static int run(File dir, File expect) throws Exception {
    Verify v = new Verify(dir);
    try {
      v.runAll(Main.JSON.readTree(expect));
    } catch (Throwable t) {
      v.check("no_exception", false, t.toString() + " at " + stack(t));
    }
    v.report.put("ok", v.ok);
    Main.OUT.println(Main.JSON.writeValueAsString(v.report));
    return v.ok ? 0 : 1;
  }

  private static String stack(Throwable t) {
    StringBuilder sb = new StringBuilder();
    Throwable c = t;
    while (c.getCause() != null) {
      c = c.getCause();
    }
    if (c != t) {
      sb.append("root cause ").append(c).append(" ");
    }
    StackTraceElement[] st = c.getStackTrace();
    for (int i = 0; i < Math.min(8, st.length); i++) {
      sb.append(st[i]).append(" | ");
    }
    return sb.toString();
  }

  private void check(String name, boolean pass, Object detail) {
    ObjectNode c = checks.addObject();
    c.put("check", name);
    c.put("ok", pass);
    if (detail != null) {
      c.set("detail", Main.JSON.valueToTree(detail));
    }
    ok &= pass;
  }

  private static String name(HoodieInstant i) {
    return Compat.instantTime(i) + "." + i.getAction() + "." + i.getState();
  }

  private void runAll(JsonNode expected) throws Exception {
    Scenario s = Scenario.load(dir);
    report.put("dir", dir.getAbsolutePath());
    report.put("hudi_version", Main.hudiVersion());
    report.put("scenario", s.name);
    String nativeReader = Main.nativeHFileReader();
    report.put("hfile_reader_requested", nativeReader == null ? "Hudi's default"
        : Main.HFILE_NATIVE_READER_KEY + "=" + nativeReader);
    report.put("hfile_reader_storage_conf", conf.unwrap().get(Main.HFILE_NATIVE_READER_KEY));
    HoodieTableMetaClient mc = Main.metaClient(conf, base);
    report.put("table_version", Main.tableVersion(mc));

    // 1. timeline loads; every instant listed
    var active = mc.reloadActiveTimeline();
    check("timeline_loads", true, active.getInstants().stream().map(Verify::name).collect(Collectors.toList()));

    // 2. rollback instants deserialize
    Set<String> rolledBack = new TreeSet<>();
    List<String> rbDetails = new ArrayList<>();
    boolean rbOk = true;
    for (HoodieInstant i : active.getRollbackTimeline().getInstants()) {
      try {
        if (i.isCompleted()) {
          RollbackInfo info = Compat.readRollbackMetadata(mc, i);
          rolledBack.addAll(info.commitsRolledBack());
          rbDetails.add(name(i) + " rolled back " + info.commitsRolledBack() + ", deleted " + info.deleted()
              + " files, failed deletes " + info.failedDeletes() + ", log files written " + info.logFilesWritten());
        } else {
          rbOk = false;
          rbDetails.add(name(i) + " is still pending; plan: " + Compat.readRollbackPlanSummary(mc, i));
        }
      } catch (Exception e) {
        rbOk = false;
        rbDetails.add(name(i) + ": cannot deserialize: " + e);
      }
    }
    check("rollback_metadata_deserializes", rbOk, rbDetails);
    Set<String> restoredAway = new TreeSet<>();

    // 2b. restore instants: completed ones deserialize, none is pending (a pending restore blocks writes)
    if (!active.getRestoreTimeline().empty()) {
      List<String> rsDetails = new ArrayList<>();
      boolean rsOk = true;
      for (HoodieInstant i : active.getRestoreTimeline().getInstants()) {
        if (!i.isCompleted()) {
          rsOk = false;
          rsDetails.add(name(i) + " is still pending");
          continue;
        }
        try {
          List<String> rb = Compat.readRestoreRolledBack(mc, i);
          restoredAway.addAll(rb);
          rsDetails.add(name(i) + " rolled back " + rb);
        } catch (Exception e) {
          rsOk = false;
          rsDetails.add(name(i) + ": cannot deserialize: " + e);
        }
      }
      check("restore_metadata_deserializes", rsOk, rsDetails);
    }

    // 3. no pending commit/deltacommit/replacecommit
    List<String> pendingWrites = mc.getCommitsTimeline().filterInflightsAndRequested().getInstants().stream()
        .map(Verify::name).collect(Collectors.toList());
    check("no_pending_writes", pendingWrites.isEmpty(), pendingWrites);

    // 4. heartbeats and markers of rolled-back instants are gone
    List<String> leftovers = new ArrayList<>();
    for (String t : rolledBack) {
      if (new File(dir, ".hoodie/.heartbeat/" + t).exists()) {
        leftovers.add(".hoodie/.heartbeat/" + t);
      }
      if (new File(dir, ".hoodie/.temp/" + t).exists()) {
        leftovers.add(".hoodie/.temp/" + t + "/");
      }
    }
    // a restore deletes the markers of the instants it rolls back, but never their heartbeats (observed
    // with 0.15.0 and 1.1.1, see observations/savepoint-restore.md): markers only
    for (String t : restoredAway) {
      if (new File(dir, ".hoodie/.temp/" + t).exists()) {
        leftovers.add(".hoodie/.temp/" + t + "/ (rolled back by a restore)");
      }
    }
    check("rolled_back_heartbeats_and_markers_removed", leftovers.isEmpty(), leftovers);

    // 5. data files on disk vs completed instants
    Set<String> completed = mc.getActiveTimeline().filterCompletedInstants().getInstants().stream()
        .map(Compat::instantTime).collect(Collectors.toCollection(TreeSet::new));
    int tv = Main.tableVersion(mc);
    Map<String, List<String>> disk = listDataFiles();
    List<String> uncommitted = new ArrayList<>();
    for (Map.Entry<String, List<String>> e : disk.entrySet()) {
      for (String f : e.getValue()) {
        String t = instantOfFile(f);
        boolean isLog = f.contains(".log.");
        // v6 log files are named by their base instant; rollback blocks legitimately stay in them
        if (isLog && tv < 8) {
          continue;
        }
        if (!completed.contains(t)) {
          uncommitted.add(relFile(e.getKey(), f) + " (instant " + t + ")");
        }
      }
    }
    check("no_uncommitted_data_files", uncommitted.isEmpty(), uncommitted);

    // 6. file-system view (listing) vs direct listing; 7. metadata-table view vs listing
    Map<String, Set<String>> fsView = viewFiles(mc, false, disk.keySet());
    Map<String, Set<String>> diskSets = new TreeMap<>();
    disk.forEach((k, v) -> diskSets.put(k, new TreeSet<>(v)));
    List<String> viewDiff = diffFileSets(fsView, diskSets, uncommitted);
    check("fs_view_equals_listing", viewDiff.isEmpty(), viewDiff.isEmpty() ? fsView : viewDiff);
    // A metadata table deleted as Hudi's deleteMetadataTable leaves it (a restore older than its
    // oldest compaction): the folder gone and both partition lists of hoodie.properties empty.
    // Readers then list the file system (FileSystemViewManager and HoodieTableMetadata.create fall
    // back), and the next writer builds it anew from a listing; step 9 writes and checks that.
    boolean mdtDeleted = s.mdt && mdtDeleted(mc);
    if (s.mdt) {
      Map<String, Set<String>> mdtView = viewFiles(mc, true, disk.keySet());
      List<String> mdtDiff = diffFileSets(mdtView, fsView, List.of());
      check("mdt_view_equals_fs_view", mdtDiff.isEmpty(), mdtDiff);
      if (mdtDeleted) {
        report.put("info_mdt_deleted", true);
      } else {
        // 7b. the metadata table's own partition and file lists; 7c. every record of its files partition
        checkMdtFileLists(mc, diskSets, false);
        checkMdtFilesPartitionRecords();
      }
    }

    // 8. records
    Map<String, ObjectNode> want = new TreeMap<>();
    expected.get("records").fields().forEachRemaining(e -> want.put(e.getKey(), (ObjectNode) e.getValue()));
    compareRecords("records_equal_expected", mc, want);

    // 9. follow-up: commits, clean, archive (and MDT compaction) still work on this table;
    // 10. the files of every completed savepoint survive the follow-up's clean
    List<Savepoint> savepoints = readSavepoints(mc, completed);
    Map<String, List<String>> diskBefore = listDataFiles();
    followUp(s, mc, want);
    if (!savepoints.isEmpty()) {
      checkSavepointFiles(savepoints, diskBefore);
    }
    if (mdtDeleted) {
      // 11. the follow-up's writer rebuilt the metadata table, and it lists what the disk holds
      HoodieTableMetaClient after = HoodieTableMetaClient.reload(mc);
      check("mdt_rebuilt_by_the_next_writer", !mdtDeleted(after), metadataPartitions(after));
      Map<String, Set<String>> now = new TreeMap<>();
      listDataFiles().forEach((k, v) -> now.put(k, new TreeSet<>(v)));
      checkMdtFileLists(after, now, true);
      checkMdtFilesPartitionRecords();
    }
  }

  /** hoodie.properties' completed and inflight metadata partitions. */
  private static List<String> metadataPartitions(HoodieTableMetaClient mc) {
    org.apache.hudi.common.config.TypedProperties p = mc.getTableConfig().getProps();
    return List.of(p.getString("hoodie.table.metadata.partitions", ""),
        p.getString("hoodie.table.metadata.partitions.inflight", ""));
  }

  /** Whether the metadata table is deleted: no folder, no partition completed or inflight. */
  private boolean mdtDeleted(HoodieTableMetaClient mc) {
    return !new File(dir, ".hoodie/metadata").exists()
        && metadataPartitions(mc).stream().allMatch(String::isEmpty);
  }

  /** A completed savepoint: its instant, the files its metadata names, and which of them were on disk. */
  private record Savepoint(String instant, Map<String, List<String>> files, Set<String> presentBefore,
                           Set<String> absentAllowed, Set<String> absentNotAllowed) {
  }

  /**
   * Reads every completed savepoint of the active timeline and notes which of its files exist now. A
   * file may already be absent only if it was written by an instant after the savepoint that is no
   * longer completed (a restore to the savepoint deletes such files, e.g. v8/v9 MOR log files of later
   * deltacommits, which Hudi lists in the savepoint because it filters file slices by base instant only).
   */
  private List<Savepoint> readSavepoints(HoodieTableMetaClient mc, Set<String> completed) throws Exception {
    List<Savepoint> out = new ArrayList<>();
    for (HoodieInstant i : mc.reloadActiveTimeline().getSavePointTimeline().filterCompletedInstants()
        .getInstants()) {
      String t = Compat.instantTime(i);
      Map<String, List<String>> files = Compat.readSavepointFiles(mc, i);
      Set<String> present = new TreeSet<>();
      Set<String> allowed = new TreeSet<>();
      Set<String> notAllowed = new TreeSet<>();
      for (Map.Entry<String, List<String>> e : files.entrySet()) {
        for (String f : e.getValue()) {
          String rel = relFile(e.getKey(), f);
          String fileInstant = instantOfFile(f);
          if (new File(dir, rel).exists()) {
            present.add(rel);
          } else if (fileInstant.compareTo(t) > 0 && !completed.contains(fileInstant)) {
            allowed.add(rel);
          } else {
            notAllowed.add(rel);
          }
        }
      }
      out.add(new Savepoint(t, files, present, allowed, notAllowed));
    }
    return out;
  }

  private void checkSavepointFiles(List<Savepoint> savepoints, Map<String, List<String>> diskBefore)
      throws Exception {
    Map<String, List<String>> diskAfter = listDataFiles();
    int removedByFollowUp = 0;
    for (Map.Entry<String, List<String>> e : diskBefore.entrySet()) {
      for (String f : e.getValue()) {
        if (!diskAfter.getOrDefault(e.getKey(), List.of()).contains(f)) {
          removedByFollowUp++;
        }
      }
    }
    boolean pass = true;
    List<Object> details = new ArrayList<>();
    for (Savepoint sp : savepoints) {
      List<String> missing = new ArrayList<>();
      for (String rel : sp.presentBefore()) {
        if (!new File(dir, rel).exists()) {
          missing.add(rel);
        }
      }
      pass &= missing.isEmpty() && sp.absentNotAllowed().isEmpty();
      Map<String, Object> d = new java.util.LinkedHashMap<>();
      d.put("savepoint", sp.instant());
      d.put("files_named", sp.files().values().stream().mapToInt(List::size).sum());
      d.put("partitions", sp.files().keySet());
      d.put("present_before_followup", sp.presentBefore().size());
      d.put("missing_after_clean", missing);
      d.put("missing_before_followup", sp.absentNotAllowed());
      d.put("absent_written_after_savepoint_and_rolled_back", sp.absentAllowed());
      details.add(d);
    }
    Map<String, Object> d = new java.util.LinkedHashMap<>();
    d.put("data_files_removed_by_followup_clean", removedByFollowUp);
    details.add(d);
    check("savepoint_files_retained", pass, details);
  }

  private void compareRecords(String checkName, HoodieTableMetaClient mc, Map<String, ObjectNode> want)
      throws Exception {
    mc = HoodieTableMetaClient.reload(mc);
    Map<String, GenericRecord> got = readAll(mc);
    List<String> diffs = new ArrayList<>();
    for (Map.Entry<String, ObjectNode> e : want.entrySet()) {
      GenericRecord r = got.get(e.getKey());
      if (r == null) {
        diffs.add("missing " + e.getKey());
        continue;
      }
      for (String f : List.of("part", "ts", "val", "n")) {
        String w = e.getValue().get(f).asText();
        String g = String.valueOf(r.get(f));
        if (!w.equals(g)) {
          diffs.add(e.getKey() + "." + f + ": want " + w + " got " + g);
        }
      }
    }
    for (String k : got.keySet()) {
      if (!want.containsKey(k)) {
        diffs.add("unexpected record " + k + " " + got.get(k).get("val"));
      }
    }
    diffs.addAll(duplicateKeys);
    check(checkName, diffs.isEmpty(), diffs.isEmpty() ? (got.size() + " records") : diffs);
  }

  /**
   * partition -> data file names (parquet base files and log files), from a direct listing. A partition
   * is a folder holding {@code .hoodie_partition_metadata}, at any depth (multi-level layouts), keyed by
   * its path relative to the base path, which is Hudi's partition path (the folder names as they are on
   * disk: URL-encoded values stay encoded); the base path itself is partition "" (non-partitioned tables).
   */
  private Map<String, List<String>> listDataFiles() throws Exception {
    Map<String, List<String>> out = new TreeMap<>();
    listPartitions(dir, "", out);
    return out;
  }

  private static void listPartitions(File d, String rel, Map<String, List<String>> out) {
    File[] entries = d.listFiles();
    if (entries == null) {
      return;
    }
    if (new File(d, ".hoodie_partition_metadata").exists()) {
      List<String> files = new ArrayList<>();
      for (File f : entries) {
        String n = f.getName();
        if (f.isFile() && (n.endsWith(".parquet") || (n.contains(".log.") && !n.endsWith(".crc")))) {
          files.add(n);
        }
      }
      files.sort(null);
      out.put(rel, files);
    }
    for (File f : entries) {
      // .hoodie (and any other dot folder) holds no partitions
      if (f.isDirectory() && !f.getName().startsWith(".")) {
        listPartitions(f, rel.isEmpty() ? f.getName() : rel + "/" + f.getName(), out);
      }
    }
  }

  /** {@code <partition>/<file>}, or the bare file name in the base path. */
  static String relFile(String partition, String file) {
    return partition.isEmpty() ? file : partition + "/" + file;
  }

  /** Commit time of a base file, or the instant in a log file name (base instant in v6, delta commit in v8+). */
  static String instantOfFile(String name) {
    if (name.contains(".log.")) {
      String n = name.startsWith(".") ? name.substring(1) : name;
      int us = n.indexOf('_');
      return n.substring(us + 1, n.indexOf(".log."));
    }
    return FSUtils.getCommitTime(name);
  }

  private Map<String, Set<String>> viewFiles(HoodieTableMetaClient mc, boolean useMdt, Set<String> partitions)
      throws Exception {
    Map<String, Set<String>> out = new TreeMap<>();
    HoodieMetadataConfig mdc = HoodieMetadataConfig.newBuilder().enable(useMdt).build();
    HoodieTableFileSystemView view = FileSystemViewManager.createInMemoryFileSystemView(
        new HoodieJavaEngineContext(conf), HoodieTableMetaClient.reload(mc), mdc);
    try {
      for (String p : partitions) {
        Set<String> files = new TreeSet<>();
        for (HoodieFileGroup fg : view.getAllFileGroups(p).collect(Collectors.toList())) {
          for (FileSlice fs : fg.getAllFileSlices().collect(Collectors.toList())) {
            fs.getBaseFile().ifPresent(b -> files.add(b.getFileName()));
            fs.getLogFiles().forEach(l -> files.add(l.getFileName()));
          }
        }
        out.put(p, files);
      }
    } finally {
      view.close();
    }
    return out;
  }

  /**
   * {@code mdt_partitions_and_files_equal_listing}: HoodieBackedTableMetadata's getAllPartitionPaths()
   * must be the partitions on disk (a partition a failed write created, p3, included: its folder stays
   * after a rollback), and getAllFilesInPartition() of each must be exactly the data files on disk.
   * Unlike the file-system view, this sees files the view would hide (e.g. of an instant the timeline
   * no longer has) and partitions no listing asked for.
   */
  private void checkMdtFileLists(HoodieTableMetaClient mc, Map<String, Set<String>> disk,
      boolean afterFollowUp) throws Exception {
    List<String> diffs = new ArrayList<>();
    List<String> emptyWithoutFolder = new ArrayList<>();
    Map<String, Integer> counts = new TreeMap<>();
    HoodieMetadataConfig mdc = HoodieMetadataConfig.newBuilder().enable(true).build();
    File spillDir = Files.createTempDirectory("interop-mdt-spill").toFile();
    try (HoodieBackedTableMetadata md = new HoodieBackedTableMetadata(new HoodieJavaEngineContext(conf),
        mdc, base, spillDir.getAbsolutePath())) {
      Set<String> mdtParts = new TreeSet<>(md.getAllPartitionPaths());
      for (String p : mdtParts) {
        if (!disk.containsKey(p)) {
          // After the follow-up: its clean deletes a partition folder left without data files (p3,
          // whose only write was undone), while the metadata table keeps the partition, with no
          // files. Hudi 1.1.1 does so on a table it restored itself (seen on its own restore's
          // copy), so that is not a difference of the table under test.
          Path path = p.isEmpty() ? new Path(base) : new Path(base, p);
          if (afterFollowUp && md.getAllFilesInPartition(path).length == 0) {
            emptyWithoutFolder.add(p);
          } else {
            diffs.add("partition only in the metadata table: '" + p + "'");
          }
        }
      }
      if (afterFollowUp) {
        report.set("info_mdt_partitions_without_files_or_folder_after_followup",
            Main.JSON.valueToTree(emptyWithoutFolder));
      }
      // A partition folder without data files (p3 after the rollback of the write that created it)
      // is not a partition for the metadata table: Hudi 0.15's own rollback leaves it out too.
      List<String> emptyFolders = new ArrayList<>();
      for (Map.Entry<String, Set<String>> e : disk.entrySet()) {
        if (e.getValue().isEmpty()) {
          emptyFolders.add(e.getKey());
        } else if (!mdtParts.contains(e.getKey())) {
          diffs.add("partition with data files only in the listing: '" + e.getKey() + "'");
        }
      }
      report.set("info_partition_folders_without_data_files", Main.JSON.valueToTree(emptyFolders));
      report.set("info_mdt_partitions", Main.JSON.valueToTree(mdtParts));
      Set<String> all = new TreeSet<>(mdtParts);
      all.addAll(disk.keySet());
      for (String p : all) {
        Path path = p.isEmpty() ? new Path(base) : new Path(base, p);
        Set<String> files = new TreeSet<>();
        for (org.apache.hadoop.fs.FileStatus i : md.getAllFilesInPartition(path)) {
          files.add(i.getPath().getName());
        }
        counts.put(p, files.size());
        Set<String> want = disk.getOrDefault(p, Set.of());
        for (String f : files) {
          if (!want.contains(f)) {
            diffs.add("only in the metadata table: " + relFile(p, f));
          }
        }
        for (String f : want) {
          if (!files.contains(f)) {
            diffs.add("only in the listing: " + relFile(p, f));
          }
        }
      }
    }
    check("mdt_partitions_and_files_equal_listing", diffs.isEmpty(), diffs.isEmpty() ? counts : diffs);
  }

  /**
   * {@code mdt_files_partition_records_readable}: every log block of every log file of the metadata
   * table's files partition is read with Hudi's log reader, and every record of each HFile data block
   * is decoded (the merged view skips blocks of rolled-back instants; this reads them all). The HFile
   * reader Hudi used is reported: the value HoodieLogFileReader gave the block (field
   * hFileReaderConfig, 0.15/1.0) and the class HoodieFileReaderFactory.getContentReader returns for it.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  private void checkMdtFilesPartitionRecords() throws Exception {
    File files = new File(dir, ".hoodie/metadata/files");
    List<String> details = new ArrayList<>();
    Set<String> readers = new TreeSet<>();
    boolean pass = true;
    int records = 0;
    int hfileBlocks = 0;
    File[] logs = files.listFiles((d, n) -> n.contains(".log.") && !n.endsWith(".crc"));
    if (logs == null || logs.length == 0) {
      check("mdt_files_partition_records_readable", false, "no log file in " + files);
      return;
    }
    java.util.Arrays.sort(logs);
    org.apache.hadoop.fs.FileSystem storage = Main.metaClient(conf, base + "/.hoodie/metadata").getFs();
    Schema schema = org.apache.hudi.avro.model.HoodieMetadataRecord.getClassSchema();
    for (File f : logs) {
      List<String> blocks = new ArrayList<>();
      try (org.apache.hudi.common.table.log.HoodieLogFormat.Reader r =
               org.apache.hudi.common.table.log.HoodieLogFormat.newReader(storage,
                   new HoodieLogFile(new Path(f.toURI().toString())), schema)) {
        while (r.hasNext()) {
          org.apache.hudi.common.table.log.block.HoodieLogBlock b = r.next();
          String kind = b.getBlockType().name();
          if (b instanceof org.apache.hudi.common.table.log.block.HoodieHFileDataBlock) {
            hfileBlocks++;
            int n = 0;
            try (org.apache.hudi.common.util.ClosableIterator<HoodieRecord<Object>> it =
                     ((org.apache.hudi.common.table.log.block.HoodieDataBlock) b)
                         .<Object>getRecordIterator(HoodieRecord.HoodieRecordType.AVRO)) {
              while (it.hasNext()) {
                HoodieRecord<Object> rec = it.next();
                if (rec.getData() == null) {
                  throw new IllegalStateException("record without data in " + f.getName());
                }
                n++;
              }
            }
            records += n;
            kind += "(" + n + " records)";
            // after the read: the block's content is loaded by then
            readers.add(HFILE_READER_013);
          } else if (b instanceof org.apache.hudi.common.table.log.block.HoodieCommandBlock) {
            kind += "(target " + b.getLogBlockHeader()
                .get(org.apache.hudi.common.table.log.block.HoodieLogBlock.HeaderMetadataType.TARGET_INSTANT_TIME) + ")";
          }
          blocks.add(kind);
        }
      } catch (Exception e) {
        pass = false;
        blocks.add("cannot read: " + e + (e.getCause() == null ? "" : " caused by " + e.getCause()));
      }
      details.add(f.getName() + ": " + blocks);
    }
    details.add(hfileBlocks + " HFile data blocks, " + records + " records, HFile reader " + readers);
    report.set("hfile_reader_used", Main.JSON.valueToTree(readers));
    check("mdt_files_partition_records_readable", pass, details);
  }

  /**
   * Hudi 0.13 reads metadata-table HFile blocks with its HBase-based HoodieHFileReader only (no native
   * reader, no _hoodie.hfile.use.native.reader).
   */
  static final String HFILE_READER_013 = "hbase (HoodieHFileReader; Hudi 0.13 has no other)";

  private static List<String> diffFileSets(Map<String, Set<String>> a, Map<String, Set<String>> b,
                                           List<String> ignore) {
    List<String> d = new ArrayList<>();
    Set<String> parts = new TreeSet<>(a.keySet());
    parts.addAll(b.keySet());
    for (String p : parts) {
      Set<String> x = a.getOrDefault(p, Set.of());
      Set<String> y = b.getOrDefault(p, Set.of());
      for (String f : x) {
        if (!y.contains(f)) {
          d.add("only in view: " + relFile(p, f));
        }
      }
      for (String f : y) {
        if (!x.contains(f) && ignore.stream().noneMatch(i -> i.startsWith(relFile(p, f)))) {
          d.add("only in listing: " + relFile(p, f));
        }
      }
    }
    return d;
  }

  /**
   * Latest merged records of every file slice, by their {@code id}: parquet-avro for base files, Hudi's
   * log scanner for logs (merged per file slice by record key).
   */
  private Map<String, GenericRecord> readAll(HoodieTableMetaClient mc) throws Exception {
    Map<String, GenericRecord> out = new TreeMap<>();
    duplicateKeys.clear();
    Schema schema = SchemaCompat.tableAvroSchema(new TableSchemaResolver(mc));
    HoodieTimeline done = mc.getCommitsTimeline().filterCompletedInstants();
    if (done.empty()) {
      return out;
    }
    String latest = Compat.instantTime(done.lastInstant().get());
    HoodieMetadataConfig mdc = HoodieMetadataConfig.newBuilder().enable(false).build();
    HoodieTableFileSystemView view = FileSystemViewManager.createInMemoryFileSystemView(
        new HoodieJavaEngineContext(conf), mc, mdc);
    try {
      for (String p : listDataFiles().keySet()) {
        for (FileSlice fs : view.getLatestMergedFileSlicesBeforeOrOn(p, latest).collect(Collectors.toList())) {
          Map<String, GenericRecord> slice = new TreeMap<>();
          if (fs.getBaseFile().isPresent()) {
            Path path = new Path(fs.getBaseFile().get().getPath());
            try (ParquetReader<GenericRecord> r = AvroParquetReader.<GenericRecord>builder(path)
                .withConf(conf.unwrap()).build()) {
              GenericRecord g;
              while ((g = r.read()) != null) {
                slice.put(String.valueOf(g.get("_hoodie_record_key")), g);
              }
            }
          }
          // the view lists log files newest first; the scanner wants them oldest first
          List<String> logs = fs.getLogFiles().sorted(HoodieLogFile.getLogFileComparator())
              .map(l -> l.getPath().toString()).collect(Collectors.toList());
          if (!logs.isEmpty()) {
            mergeLogs(mc, schema, latest, logs, slice);
          }
          // by the id field: a key generator may encode the record key (ComplexKeyGenerator: "id:k00")
          for (GenericRecord g : slice.values()) {
            String id = String.valueOf(g.get("id"));
            if (out.containsKey(id)) {
              duplicateKeys.add("duplicate record " + id + " (in more than one file group; partition " + p + ")");
            }
            out.put(id, g);
          }
        }
      }
    } finally {
      view.close();
    }
    return out;
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  private void mergeLogs(HoodieTableMetaClient mc, Schema schema, String latest, List<String> logs,
                         Map<String, GenericRecord> slice) throws Exception {
    File spill = Files.createTempDirectory("interop-spill").toFile();
    // withReaderSchema takes Avro's Schema before 1.2 and HoodieSchema in 1.2
    HoodieMergedLogRecordScanner.Builder builder = (HoodieMergedLogRecordScanner.Builder) SchemaCompat.call(
        HoodieMergedLogRecordScanner.newBuilder(), "withReaderSchema", schema);
    try (HoodieMergedLogRecordScanner scanner = builder
        .withFileSystem(mc.getFs())
        .withBasePath(base)
        .withLogFilePaths(logs)
        .withLatestInstantTime(latest)
        .withReverseReader(false)
        // as 0.13's compactor and Spark readers read (hoodie.compaction.lazy.block.read, default true):
        // eagerly, a data block of a new instant merges the ones before it, and a later rollback
        // command block cannot undo them (two failed writes in a row, once the instants they
        // wrote are older than the active timeline)
        .withReadBlocksLazily(true)
        .withBufferSize(1 << 20)
        .withMaxMemorySizeInBytes(64L << 20)
        .withSpillableMapBasePath(spill.getAbsolutePath())
        // 0.13 has no default merger: the Avro payload merger, as 0.13's readers configure it
        .withRecordMerger(new org.apache.hudi.common.model.HoodieAvroRecordMerger())
        .build()) {
      Map<String, HoodieRecord> recs = scanner.getRecords();
      for (Map.Entry<String, HoodieRecord> e : recs.entrySet()) {
        Object data = e.getValue().getData();
        IndexedRecord ir = null;
        if (data instanceof HoodieRecordPayload) {
          Option<IndexedRecord> o = ((HoodieRecordPayload) data).getInsertValue(schema);
          ir = o.isPresent() ? o.get() : null;
        } else if (data instanceof IndexedRecord) {
          ir = (IndexedRecord) data;
        }
        if (ir == null) {
          slice.remove(e.getKey());
          continue;
        }
        GenericRecord g = (GenericRecord) ir;
        GenericRecord old = slice.get(e.getKey());
        // event-time ordering on ts; a tie goes to the later (log) write
        if (old == null || ((Number) g.get("ts")).longValue() >= ((Number) old.get("ts")).longValue()) {
          slice.put(e.getKey(), g);
        }
      }
    }
  }

  @SuppressWarnings({"rawtypes", "unchecked"})
  private void followUp(Scenario s, HoodieTableMetaClient mc, Map<String, ObjectNode> want) throws Exception {
    Properties extra = new Properties();
    extra.setProperty("hoodie.keep.min.commits", "2");
    extra.setProperty("hoodie.keep.max.commits", "3");
    extra.setProperty("hoodie.cleaner.commits.retained", "1");
    // 1.0.1 reads only the new key (with the old one alone it keeps its default of 10 and never cleans here)
    extra.setProperty("hoodie.clean.commits.retained", "1");
    extra.setProperty("hoodie.clean.automatic", "true");
    extra.setProperty("hoodie.archive.automatic", "true");
    extra.setProperty("hoodie.metadata.compact.max.delta.commits", "2");
    extra.setProperty("hoodie.metadata.keep.min.commits", "2");
    extra.setProperty("hoodie.metadata.keep.max.commits", "3");
    // Hudi 0.13.1's Java client cannot compact (HoodieJavaTableServiceClient.compact throws
    // HoodieNotSupportedException): the 0.13 follow-up appends deltacommits without compaction
    extra.setProperty("hoodie.compact.inline", "false");
    extra.setProperty("hoodie.compact.inline.max.delta.commits", "2");
    // Hudi 0.15's Java MOR upsert merges inserts into a small base file while ignoring that file
    // slice's log files (the logged updates are lost, seen without any rollback involved); keep
    // follow-up inserts out of existing file groups.
    extra.setProperty("hoodie.parquet.small.file.limit", "0");
    List<String> steps = new ArrayList<>();
    Map<String, ObjectNode> want2 = new TreeMap<>(want);
    try (HoodieJavaWriteClient client = new HoodieJavaWriteClient<>(new HoodieJavaEngineContext(conf),
        Main.writeConfig(s, base, extra))) {
      for (int c = 0; c < 4; c++) {
        String t = client.startCommit();
        List<Data.Row> rows = new ArrayList<>();
        rows.add(new Data.Row(String.format("v%02d", c), Data.partValue(c % 3), 10 + c, "verify", 1000 + c));
        rows.add(new Data.Row(Data.key(c), Data.part(c), 10 + c, "verify", 2000 + c)); // update
        List<WriteStatus> ws = Main.upsert(client, s.mor, Data.hoodieRecords(rows), t);
        boolean committed = client.commit(t, ws);
        steps.add("commit " + t + " -> " + committed);
        for (Data.Row r : rows) {
          want2.put(r.id(), (ObjectNode) Data.toJson(Map.of(r.id(), r)).get("records").get(r.id()));
        }
      }
      org.apache.hudi.avro.model.HoodieCleanMetadata cleaned = client.clean();
      steps.add("clean" + (cleaned == null ? " (nothing to clean)" : ": " + cleaned.getTotalFilesDeleted()
          + " files deleted"));
      client.archive();
      steps.add("archive");
    }
    mc = HoodieTableMetaClient.reload(mc);
    List<String> archived = mc.getArchivedTimeline().reload().getInstants().stream().map(Verify::name)
        .collect(Collectors.toList());
    steps.add("archived: " + archived);
    steps.add("active: " + mc.getActiveTimeline().getInstants().stream().map(Verify::name)
        .collect(Collectors.toList()));
    if (s.mdt) {
      HoodieTableMetaClient mdt = Main.metaClient(conf, base + "/.hoodie/metadata");
      steps.add("mdt active: " + mdt.getActiveTimeline().getInstants().stream().map(Verify::name)
          .collect(Collectors.toList()));
    }
    check("followup_commits_clean_archive", true, steps);
    compareRecords("records_after_followup", mc, want2);
    // the rollback instants should have been archived
    // Informational: 0.15 archives rollback (and clean) instants only when more than keep.max.commits
    // of that action exist, so a single rollback stays active there.
    List<String> activeRollbacks = mc.getActiveTimeline().getRollbackTimeline().getInstants().stream()
        .map(Verify::name).collect(Collectors.toList());
    List<String> archivedRollbacks = archived.stream().filter(n -> n.contains(".rollback."))
        .collect(Collectors.toList());
    report.set("info_rollbacks_still_active_after_archival", Main.JSON.valueToTree(activeRollbacks));
    report.set("info_rollbacks_archived", Main.JSON.valueToTree(archivedRollbacks));
  }
}
