package io.hudikeeper.interop;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;

import java.io.File;
import java.io.IOException;
import java.util.Locale;

/**
 * Hudi's own view of the active timeline of a table (and of its metadata table), as JSON:
 * <pre>
 * {"table_version": N,
 *  "instants": [{"requested_time": T, "action": A, "state": "requested|inflight|completed",
 *                "completion_time": C or null}, ...],
 *  "metadata_table": {"table_version": N, "instants": [...]} or null}
 * </pre>
 * Instants are listed in the order {@code getActiveTimeline().getInstants()} returns them.
 * Read-only: only a meta client is built (no write client), so no upgrade, rollback, heartbeat or
 * lock happens. {@code completion_time} is null in 0.x (no completion times) and for pending instants.
 */
final class Timeline {
  private Timeline() {
  }

  static int run(File dir) throws Exception {
    if (!new File(dir, ".hoodie/hoodie.properties").isFile()) {
      throw new IOException("not a Hudi table (no .hoodie/hoodie.properties): " + dir);
    }
    HadoopConf conf = Main.storageConf(false);
    ObjectNode root = describe(conf, Main.base(dir));
    File mdt = new File(dir, ".hoodie/metadata");
    if (mdt.exists()) {
      root.set("metadata_table", describe(conf, Main.base(mdt)));
    } else {
      root.putNull("metadata_table");
    }
    Main.OUT.println(Main.JSON.writeValueAsString(root));
    return 0;
  }

  private static ObjectNode describe(HadoopConf conf, String base) {
    // setLoadActiveTimelineOnLoad(false): the timeline is loaded once, below
    HoodieTableMetaClient mc = HoodieTableMetaClient.builder().setConf(conf).setBasePath(base)
        .setLoadActiveTimelineOnLoad(false).build();
    ObjectNode n = Main.JSON.createObjectNode();
    n.put("table_version", Main.tableVersion(mc));
    ArrayNode arr = n.putArray("instants");
    for (HoodieInstant i : mc.getActiveTimeline().getInstants()) {
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
    }
    return n;
  }
}
