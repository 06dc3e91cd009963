// Registers a Hudi table in the Hive Metastore the way Hudi's Hive sync (HMS mode) does:
// java -cp '<jars>' Register.java thrift://HOST:PORT DB NAME BASE_PATH cow|mor [N]
// cow: one entry NAME (HoodieParquetInputFormat); mor: NAME_ro (HoodieParquetInputFormat) and
// NAME_rt (HoodieParquetRealtimeInputFormat), both at BASE_PATH. Also `parquet`: a table that is
// not Hudi's. The database is made when missing. With N: N tables NAME0… at BASE_PATH/NAME0…
// (scripts/bench-discover's metastore row).
import java.util.*;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.hadoop.hive.metastore.api.*;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;

public class Register {
  static Table entry(String db, String name, String path, String input, Boolean ro) {
    StorageDescriptor sd = new StorageDescriptor();
    sd.setCols(List.of(new FieldSchema("_hoodie_commit_time", "string", null), new FieldSchema("id", "bigint", null)));
    sd.setLocation(path);
    sd.setInputFormat(input);
    sd.setOutputFormat("org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat");
    SerDeInfo serde = new SerDeInfo();
    serde.setSerializationLib("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe");
    Map<String, String> sp = new HashMap<>();
    sp.put("path", path);
    if (ro != null) sp.put("hoodie.query.as.ro.table", ro.toString());
    serde.setParameters(sp);
    sd.setSerdeInfo(serde);
    Table t = new Table();
    t.setDbName(db);
    t.setTableName(name);
    t.setSd(sd);
    t.setTableType("EXTERNAL_TABLE");
    t.setPartitionKeys(new ArrayList<>());
    Map<String, String> p = new HashMap<>();
    p.put("EXTERNAL", "TRUE");
    p.put("last_commit_time_sync", "20240101000000000");
    p.put("spark.sql.sources.provider", input.contains("hudi") ? "hudi" : "parquet");
    t.setParameters(p);
    return t;
  }

  public static void main(String[] a) throws Exception {
    Configuration conf = MetastoreConf.newMetastoreConf();
    MetastoreConf.setVar(conf, MetastoreConf.ConfVars.THRIFT_URIS, a[0]);
    HiveMetaStoreClient c = new HiveMetaStoreClient(conf);
    String db = a[1], kind = a[4];
    int n = a.length > 5 ? Integer.parseInt(a[5]) : -1;
    try {
      c.getDatabase(db);
    } catch (NoSuchObjectException e) {
      Database d = new Database();
      d.setName(db);
      d.setLocationUri("file:///tmp/hudi-keeper-hms/" + db);
      c.createDatabase(d);
    }
    for (int i = 0; i < Math.max(n, 1); i++) {
      String name = n < 0 ? a[2] : a[2] + i, path = n < 0 ? a[3] : a[3] + "/" + name;
      register(c, db, name, path, kind);
    }
    c.close();
  }

  static void register(HiveMetaStoreClient c, String db, String name, String path, String kind) throws Exception {
    String ro = "org.apache.hudi.hadoop.HoodieParquetInputFormat";
    String rt = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat";
    switch (kind) {
      case "cow": c.createTable(entry(db, name, path, ro, null)); break;
      case "mor":
        c.createTable(entry(db, name + "_ro", path, ro, true));
        c.createTable(entry(db, name + "_rt", path, rt, false));
        break;
      default:
        c.createTable(entry(db, name, path, "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat", null));
    }
  }
}
