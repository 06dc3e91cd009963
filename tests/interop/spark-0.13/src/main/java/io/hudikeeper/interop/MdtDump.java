package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericRecord;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hudi.avro.model.HoodieMetadataRecord;
import org.apache.hudi.common.model.HoodieLogFile;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.common.table.log.HoodieLogFormat;
import org.apache.hudi.common.table.log.block.HoodieCommandBlock;
import org.apache.hudi.common.table.log.block.HoodieDataBlock;
import org.apache.hudi.common.table.log.block.HoodieLogBlock;
import org.apache.hudi.common.util.ClosableIterator;

import java.io.File;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code mdt-dump}: the metadata table as Hudi 0.13.1 reads it, block by block: its active timeline, and
 * every log block of every log file of its {@code files} partition (block type, instant, command target)
 * with the records of each HFile data block ({@code key} = a partition path or {@code __all_partitions__},
 * and per file name its size or {@code DELETED}). The merged view skips blocks of instants the data
 * table never completed; this shows them all.
 */
final class MdtDump {
  private MdtDump() {
  }

  static int run(File dir) throws Exception {
    String base = Main.base(dir);
    Main.session(false);
    ObjectNode n = Main.JSON.createObjectNode();
    n.set("mdt_timeline", Main.JSON.valueToTree(Main.mdtInstants(base, dir)));
    n.set("files_partition", filesPartition(dir));
    Main.OUT.println(Main.JSON.writeValueAsString(n));
    return 0;
  }

  /**
   * Every log file of {@code .hoodie/metadata/files} (oldest name first), its blocks and their records;
   * a file that cannot be read gets an {@code error} field. Base files (HFiles of a compaction) are
   * listed under {@code base_files}, not read.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  static ObjectNode filesPartition(File dir) throws Exception {
    ObjectNode out = Main.JSON.createObjectNode();
    File files = new File(dir, ".hoodie/metadata/files");
    ArrayNode baseFiles = out.putArray("base_files");
    ArrayNode logs = out.putArray("log_files");
    File[] all = files.listFiles((d, name) -> !name.endsWith(".crc") && !name.startsWith(".hoodie_partition_metadata"));
    if (all == null) {
      out.put("error", "no folder " + files);
      return out;
    }
    Arrays.sort(all);
    FileSystem fs = new Path(Main.base(dir)).getFileSystem(Main.jsc().hadoopConfiguration());
    Schema schema = HoodieMetadataRecord.getClassSchema();
    for (File f : all) {
      if (!f.getName().contains(".log.")) {
        baseFiles.add(f.getName());
        continue;
      }
      ObjectNode lf = logs.addObject();
      lf.put("file", f.getName());
      lf.put("size", f.length());
      ArrayNode blocks = lf.putArray("blocks");
      try (HoodieLogFormat.Reader r = HoodieLogFormat.newReader(fs, new HoodieLogFile(new Path(f.toURI().toString())), schema)) {
        while (r.hasNext()) {
          HoodieLogBlock b = r.next();
          ObjectNode bo = blocks.addObject();
          bo.put("type", b.getBlockType().name());
          bo.put("instant", b.getLogBlockHeader().get(HoodieLogBlock.HeaderMetadataType.INSTANT_TIME));
          if (b instanceof HoodieCommandBlock) {
            bo.put("target_instant", b.getLogBlockHeader().get(HoodieLogBlock.HeaderMetadataType.TARGET_INSTANT_TIME));
            bo.put("command", String.valueOf(((HoodieCommandBlock) b).getType()));
          } else if (b instanceof HoodieDataBlock) {
            ObjectNode recs = bo.putObject("records");
            try (ClosableIterator<HoodieRecord<Object>> it =
                     ((HoodieDataBlock) b).<Object>getRecordIterator(HoodieRecord.HoodieRecordType.AVRO)) {
              while (it.hasNext()) {
                HoodieRecord<Object> rec = it.next();
                GenericRecord g = (GenericRecord) rec.getData();
                recs.set(String.valueOf(g.get("key")), fileEntries(g));
              }
            }
          }
        }
      } catch (Exception e) {
        lf.put("error", e + (e.getCause() == null ? "" : " caused by " + e.getCause()));
      }
    }
    return out;
  }

  /** A files-partition record: its type and, per file name, the size or "DELETED". */
  private static ObjectNode fileEntries(GenericRecord g) {
    ObjectNode o = Main.JSON.createObjectNode();
    o.put("type", String.valueOf(g.get("type")));
    Object fsm = g.get("filesystemMetadata");
    if (fsm instanceof Map<?, ?> m) {
      Map<String, String> sorted = new TreeMap<>();
      for (Map.Entry<?, ?> e : m.entrySet()) {
        GenericRecord info = (GenericRecord) e.getValue();
        boolean deleted = Boolean.TRUE.equals(info.get("isDeleted"));
        sorted.put(String.valueOf(e.getKey()), deleted ? "DELETED" : String.valueOf(info.get("size")));
      }
      o.set("files", Main.JSON.valueToTree(sorted));
    }
    return o;
  }
}
