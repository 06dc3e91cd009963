package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.file.DataFileReader;
import org.apache.avro.file.SeekableByteArrayInput;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.storage.StorageConfiguration;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * Hudi's own view of the ARCHIVED timeline of a table, as JSON:
 * <pre>
 * {"table_version": N,
 *  "instants": [{"requested_time": T, "action": A, "state": "requested|inflight|completed",
 *                "completion_time": C or null, "rolled_back": [..] or null}, ...]}
 * </pre>
 * Instants as {@code metaClient.getArchivedTimeline().getInstants()} lists them (0.x: one entry per
 * archived state file; 1.x: completed instants only). {@code rolled_back} is given for completed
 * rollbacks and restores, from the details Hudi's archived timeline loads
 * ({@code loadCompletedInstantDetailsInMemory}): 0.x hands out the archived record as JSON text, 1.x
 * the completed file's Avro bytes. A rollback's {@code commitsRollback}; a restore's
 * {@code instantsToRollback} and every child rollback's {@code commitsRollback}. Read-only.
 */
final class Archived {
  private Archived() {
  }

  static int run(File dir) throws Exception {
    if (!new File(dir, ".hoodie/hoodie.properties").isFile()) {
      throw new IOException("not a Hudi table (no .hoodie/hoodie.properties): " + dir);
    }
    StorageConfiguration<?> conf = Main.storageConf(false);
    HoodieTableMetaClient mc = HoodieTableMetaClient.builder().setConf(conf).setBasePath(Main.base(dir))
        .setLoadActiveTimelineOnLoad(false).build();
    Object archived = mc.getArchivedTimeline();
    archived.getClass().getMethod("loadCompletedInstantDetailsInMemory").invoke(archived);
    ObjectNode root = Main.JSON.createObjectNode();
    root.put("table_version", Main.tableVersion(mc));
    ArrayNode arr = root.putArray("instants");
    @SuppressWarnings("unchecked")
    java.util.List<HoodieInstant> instants = (java.util.List<HoodieInstant>) archived.getClass()
        .getMethod("getInstants").invoke(archived);
    for (HoodieInstant i : instants) {
      ObjectNode o = arr.addObject();
      o.put("requested_time", Compat.instantTime(i));
      o.put("action", i.getAction());
      o.put("state", i.getState().name().toLowerCase(Locale.ROOT));
      String c = Compat.completionTime(i);
      if (c == null) {
        o.putNull("completion_time");
      } else {
        o.put("completion_time", c);
      }
      boolean undo = i.getAction().equals("rollback") || i.getAction().equals("restore");
      if (undo && i.isCompleted()) {
        Object details = archived.getClass().getMethod("getInstantDetails", HoodieInstant.class)
            .invoke(archived, i);
        byte[] bytes = (byte[]) ((org.apache.hudi.common.util.Option<?>) details).orElse(null);
        ArrayNode rb = o.putArray("rolled_back");
        if (bytes != null) {
          for (String t : rolledBack(bytes)) {
            rb.add(t);
          }
        }
      } else {
        o.putNull("rolled_back");
      }
    }
    Main.OUT.println(Main.JSON.writeValueAsString(root));
    return 0;
  }

  /** The rolled-back instants of a rollback or restore's details: Avro container (1.x) or JSON (0.x). */
  private static TreeSet<String> rolledBack(byte[] bytes) throws IOException {
    TreeSet<String> out = new TreeSet<>();
    if (bytes.length >= 4 && bytes[0] == 'O' && bytes[1] == 'b' && bytes[2] == 'j' && bytes[3] == 1) {
      try (DataFileReader<GenericRecord> r = new DataFileReader<>(new SeekableByteArrayInput(bytes),
          new GenericDatumReader<>())) {
        GenericRecord rec = r.next();
        addAvro(rec, out);
      }
    } else {
      addJson(Main.JSON.readTree(new String(bytes, StandardCharsets.UTF_8)), out);
    }
    return out;
  }

  private static void addAvro(GenericRecord rec, TreeSet<String> out) {
    if (rec.getSchema().getField("commitsRollback") != null && rec.get("commitsRollback") != null) {
      for (Object t : (Iterable<?>) rec.get("commitsRollback")) {
        out.add(t.toString());
      }
    }
    if (rec.getSchema().getField("instantsToRollback") != null && rec.get("instantsToRollback") != null) {
      for (Object t : (Iterable<?>) rec.get("instantsToRollback")) {
        out.add(t.toString());
      }
    }
    if (rec.getSchema().getField("hoodieRestoreMetadata") != null && rec.get("hoodieRestoreMetadata") != null) {
      for (Object list : ((Map<?, ?>) rec.get("hoodieRestoreMetadata")).values()) {
        for (Object child : (Iterable<?>) list) {
          if (child instanceof GenericRecord) {
            addAvro((GenericRecord) child, out);
          }
        }
      }
    }
  }

  private static void addJson(JsonNode n, TreeSet<String> out) {
    for (String f : new String[] {"commitsRollback", "instantsToRollback"}) {
      if (n.has(f) && n.get(f).isArray()) {
        n.get(f).forEach(t -> out.add(t.asText()));
      }
    }
    JsonNode children = n.get("hoodieRestoreMetadata");
    if (children != null && children.isObject()) {
      children.forEach(list -> list.forEach(child -> addJson(child, out)));
    }
  }
}
