package io.hudikeeper.interop;

import java.io.File;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.hudi.common.config.TypedProperties;
import org.apache.hudi.common.model.HoodieRecord;
import org.apache.hudi.common.util.Option;
import org.apache.hudi.common.util.collection.ClosableIterator;
import org.apache.hudi.storage.HoodieStorage;
import org.apache.hudi.storage.HoodieStorageUtils;
import org.apache.hudi.storage.StorageConfiguration;
import org.apache.hudi.storage.StoragePath;

/**
 * {@code run.sh hfile-read <key> <file> [--native]}: reads a standalone HFile (e.g. one hudi-keeper
 * wrote) with Hudi's own Avro HFile reader and prints its records as one JSON object:
 * {@code {"reader": <class>, "schema_name": ..., "scan": [<Avro JSON>...], "lookup": {<key>: <Avro JSON>}}}:
 * a full scan ({@code getIndexedRecordIterator}), then point lookups of the keys it found
 * ({@code getRecordsByKeysIterator}), so both the data blocks and the root index are exercised.
 * ({@code getRecordKeyIterator} is not used: 0.15's HBase-based one fails with NotSeekedException and
 * its native one returns no keys, even on Hudi's own files.)
 *
 * <p>Readers: Hudi 0.x without {@code --native}: the HBase-based {@code HoodieHBaseAvroHFileReader}
 * (0.15's default); with {@code --native}: {@code HoodieNativeAvroHFileReader} (hudi-io's reader).
 * Hudi 1.x has only the native reader. Version differences go through reflection.
 */
final class HFileRead {
  private HFileRead() {}

  /** {@code HFileRead <file> [--native]} (started by run.sh, not through Main). */
  public static void main(String[] args) throws Exception {
    if (args.length < 1 || args.length > 2 || (args.length == 2 && !args[1].equals("--native"))) {
      System.err.println("usage: HFileRead <hfile> [--native]");
      System.exit(2);
    }
    System.exit(run(args[0], args.length == 2));
  }

  static int run(String file, boolean nativeReader) throws Exception {
    StorageConfiguration<Configuration> conf = Main.storageConf(false);
    StoragePath path = new StoragePath(new File(file).getAbsoluteFile().toURI().toString());
    HoodieStorage storage = HoodieStorageUtils.getStorage(path, conf);
    Object reader = open(conf, storage, path, nativeReader);
    try {
      // Avro's Schema before 1.2, HoodieSchema in 1.2
      Schema schema = SchemaCompat.avro(reader.getClass().getMethod("getSchema").invoke(reader));
      ObjectNode out = Main.JSON.createObjectNode();
      out.put("reader", reader.getClass().getName());
      out.put("schema_name", schema.getFullName());
      // Full scan. The readers put the row key in the record's "key" field.
      List<String> keys = new ArrayList<>();
      ArrayNode scan = out.putArray("scan");
      try (ClosableIterator<?> it =
               (ClosableIterator<?>) SchemaCompat.call(reader, "getIndexedRecordIterator", schema, schema)) {
        while (it.hasNext()) {
          GenericRecord r = (GenericRecord) it.next();
          keys.add(String.valueOf(r.get("key")));
          scan.add(Main.JSON.readTree(r.toString()));
        }
      }
      // Point lookups of every key (through the root index).
      ObjectNode records = out.putObject("lookup");
      try (ClosableIterator<?> it =
               (ClosableIterator<?>) SchemaCompat.call(reader, "getRecordsByKeysIterator", keys, schema)) {
        while (it.hasNext()) {
          // the HoodieRecord carries no HoodieKey here; the key is in the record
          GenericRecord r = (GenericRecord) ((HoodieRecord<?>) it.next()).getData();
          // GenericData's toString is JSON
          records.set(String.valueOf(r.get("key")), Main.JSON.readTree(r.toString()));
        }
      }
      Main.OUT.println(Main.JSON.writeValueAsString(out));
    } finally {
      ((AutoCloseable) reader).close();
    }
    return 0;
  }

  private static Object open(StorageConfiguration<Configuration> conf, HoodieStorage storage, StoragePath path,
      boolean nativeReader) throws Exception {
    if (!nativeReader) {
      Class<?> hbase;
      try {
        hbase = Class.forName("org.apache.hudi.io.hadoop.HoodieHBaseAvroHFileReader");
      } catch (ClassNotFoundException e) {
        throw new IllegalArgumentException("this Hudi version has no HBase-based HFile reader; use --native");
      }
      return hbase.getConstructor(StorageConfiguration.class, StoragePath.class, Option.class)
          .newInstance(conf, path, Option.empty());
    }
    Class<?> nat = Class.forName("org.apache.hudi.io.storage.HoodieNativeAvroHFileReader");
    try {
      // 0.15: (HoodieStorage, StoragePath, Option<Schema>)
      return nat.getConstructor(HoodieStorage.class, StoragePath.class, Option.class)
          .newInstance(storage, path, Option.empty());
    } catch (NoSuchMethodException e) {
      // 1.x: builder with an HFileReaderFactory
      Class<?> factoryClass = Class.forName("org.apache.hudi.io.storage.HFileReaderFactory");
      Object fb = factoryClass.getMethod("builder").invoke(null);
      fb.getClass().getMethod("withStorage", HoodieStorage.class).invoke(fb, storage);
      fb.getClass().getMethod("withProps", TypedProperties.class).invoke(fb, new TypedProperties());
      fb.getClass().getMethod("withPath", StoragePath.class).invoke(fb, path);
      Object factory = fb.getClass().getMethod("build").invoke(fb);
      Object b = nat.getMethod("builder").invoke(null);
      b.getClass().getMethod("readerFactory", factoryClass).invoke(b, factory);
      b.getClass().getMethod("path", StoragePath.class).invoke(b, path);
      b.getClass().getMethod("schema", Option.class).invoke(b, Option.empty());
      return b.getClass().getMethod("build").invoke(b);
    }
  }
}
