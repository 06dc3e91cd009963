package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.hudi.common.config.TypedProperties;
import org.apache.hudi.common.model.DefaultHoodieRecordPayload;
import org.apache.hudi.common.model.HoodieAvroRecord;
import org.apache.hudi.common.model.HoodieKey;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.keygen.BaseKeyGenerator;
import org.apache.hudi.keygen.ComplexAvroKeyGenerator;
import org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator;
import org.apache.hudi.keygen.SimpleAvroKeyGenerator;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The deterministic record set. Keys k00..k17, logical partitions 0..2 (key index mod 3), whose
 * {@code part} values come from the table's {@link Scenario.Partitioning} (p0..p2 by default).
 * Completed commits: c1 inserts k00-k11; c2 upserts k00-k05 and inserts k12-k14; c3 upserts k03-k08.
 * The failed write upserts k00-k02, k09-k11 and inserts k15-k17 into new partition p3 (val "FAILED"), all of which a reader
 * must not see once the failed write is rolled back.
 */
public final class Data {
  public static final String SCHEMA_JSON = "{\"type\":\"record\",\"name\":\"interop_record\",\"namespace\":\"hudikeeper\","
      + "\"fields\":[{\"name\":\"id\",\"type\":\"string\"},{\"name\":\"part\",\"type\":\"string\"},"
      + "{\"name\":\"ts\",\"type\":\"long\"},{\"name\":\"val\",\"type\":\"string\"},{\"name\":\"n\",\"type\":\"int\"}]}";
  public static final Schema SCHEMA = new Schema.Parser().parse(SCHEMA_JSON);
  /** The schema with the second partition field {@code hr} (layouts with two partition fields). */
  public static final String SCHEMA_JSON_HR = SCHEMA_JSON.replace("]}",
      ",{\"name\":\"hr\",\"type\":\"string\"}]}");
  public static final int COMPLETED_COMMITS = 3;

  /** The partitioning of the table this JVM works on (set by {@link #use}; PLAIN until then). */
  private static Scenario.Partitioning partitioning = Scenario.Partitioning.PLAIN;
  /** Hudi's key generator for it (null for PLAIN, whose keys are built directly, as they always were). */
  private static BaseKeyGenerator keyGen;

  /** One logical row (what a reader must see). */
  public record Row(String id, String part, long ts, String val, int n) {
  }

  private Data() {
  }

  static String key(int i) {
    return String.format("k%02d", i);
  }

  /**
   * Makes {@code s}'s partitioning the one every row and record of this JVM uses. Non-PLAIN layouts
   * get their partition path from Hudi's own Avro key generator, configured with the scenario's write
   * properties (the partition fields, URL encoding and hive style).
   */
  public static void use(Scenario s) {
    partitioning = s.partitioning;
    if (partitioning == Scenario.Partitioning.PLAIN) {
      keyGen = null;
      return;
    }
    TypedProperties p = new TypedProperties();
    p.putAll(s.writeProps(false));
    keyGen = switch (partitioning) {
      case HIVE -> new ComplexAvroKeyGenerator(p);
      case NOPART -> new NonpartitionedAvroKeyGenerator(p);
      default -> new SimpleAvroKeyGenerator(p);
    };
    for (int i = 0; i < 4; i++) {
      String v = partitioning.value(i);
      if (!v.chars().allMatch(c -> c < 128) && !"UTF-8".equalsIgnoreCase(System.getProperty("sun.jnu.encoding"))) {
        // Java would write '?' for every non-ASCII letter of a file name
        throw new IllegalStateException("partition value " + v + " needs a UTF-8 locale for file names (sun.jnu.encoding="
            + System.getProperty("sun.jnu.encoding") + "); run.sh sets LC_ALL=C.UTF-8");
      }
    }
  }

  /** The schema the writers use: with {@code hr} when the layout has a second partition field. */
  public static String schemaJson() {
    return partitioning.secondField() == null ? SCHEMA_JSON : SCHEMA_JSON_HR;
  }

  /** The {@code part} value of logical partition {@code i} (0-3) of this JVM's layout. */
  public static String partValue(int i) {
    return partitioning.value(i);
  }

  static String part(int i) {
    return partValue(i % 3);
  }

  static List<Row> rows(int from, int to, long ts, String val) {
    List<Row> out = new ArrayList<>();
    for (int i = from; i <= to; i++) {
      out.add(new Row(key(i), part(i), ts, val, i * 10 + (int) ts));
    }
    return out;
  }

  /** Batch of completed commit number c (1-based). */
  public static List<Row> commitBatch(int c) {
    List<Row> b = new ArrayList<>();
    switch (c) {
      case 1 -> b.addAll(rows(0, 11, 1, "c1"));
      case 2 -> {
        b.addAll(rows(0, 5, 2, "c2"));
        b.addAll(rows(12, 14, 2, "c2"));
      }
      case 3 -> b.addAll(rows(3, 8, 3, "c3"));
      default -> throw new IllegalArgumentException("commit " + c);
    }
    return b;
  }

  /** Batch of the write that gets killed. */
  public static List<Row> failedBatch() {
    List<Row> b = new ArrayList<>();
    b.addAll(rows(0, 2, 4, "FAILED"));
    b.addAll(rows(9, 11, 4, "FAILED"));
    // new keys go to a partition the completed commits never wrote: new file groups (CREATE markers)
    // and a new partition directory, while the updates above go to existing file groups
    for (Row r : rows(15, 17, 4, "FAILED")) {
      b.add(new Row(r.id(), partValue(3), r.ts(), r.val(), r.n()));
    }
    return b;
  }

  /** The state after the completed commits, by key. */
  public static Map<String, Row> expected() {
    return expectedAfter(COMPLETED_COMMITS);
  }

  /**
   * The state after completed commit number {@code c} (1-based), by key: what a reader must see once
   * the table is restored to that commit. Every key's latest row wins: each commit's {@code ts} is
   * higher than the previous commits'.
   */
  public static Map<String, Row> expectedAfter(int c) {
    if (c < 1 || c > COMPLETED_COMMITS) {
      throw new IllegalArgumentException("commit " + c);
    }
    Map<String, Row> m = new TreeMap<>();
    for (int i = 1; i <= c; i++) {
      for (Row r : commitBatch(i)) {
        m.put(r.id(), r);
      }
    }
    return m;
  }

  private static Schema schemaHr;

  public static GenericRecord avro(Row r) {
    String second = partitioning.secondField();
    if (second != null && schemaHr == null) {
      schemaHr = new Schema.Parser().parse(SCHEMA_JSON_HR);
    }
    GenericRecord g = new GenericData.Record(second == null ? SCHEMA : schemaHr);
    g.put("id", r.id());
    g.put("part", r.part());
    g.put("ts", r.ts());
    g.put("val", r.val());
    g.put("n", r.n());
    if (second != null) {
      g.put(second, partitioning.secondValue(r.part()));
    }
    return g;
  }

  /**
   * Hudi records of {@code rows}. The key comes from Hudi's key generator of the layout (so the
   * partition path is Hudi's own: URL-encoded, hive-style, multi-level or empty), except for PLAIN.
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  public static List<HoodieRecord> hoodieRecords(List<Row> rows) {
    List<HoodieRecord> out = new ArrayList<>();
    for (Row r : rows) {
      GenericRecord g = avro(r);
      HoodieKey key = keyGen == null ? new HoodieKey(r.id(), r.part()) : keyGen.getKey(g);
      out.add(new HoodieAvroRecord(key, new DefaultHoodieRecordPayload(g, r.ts())));
    }
    return out;
  }

  public static ObjectNode toJson(Map<String, Row> rows) {
    ObjectMapper om = new ObjectMapper();
    ObjectNode root = om.createObjectNode();
    root.put("record_key_field", "id");
    root.put("partition_field", "part");
    ObjectNode recs = root.putObject("records");
    for (Row r : rows.values()) {
      ObjectNode o = recs.putObject(r.id());
      o.put("id", r.id());
      o.put("part", r.part());
      o.put("ts", r.ts());
      o.put("val", r.val());
      o.put("n", r.n());
    }
    return root;
  }
}
