package io.hudikeeper.interop;

import org.apache.hudi.avro.model.HoodieSavepointMetadata;
import org.apache.hudi.avro.model.HoodieSavepointPartitionMetadata;
import org.apache.hudi.client.HoodieJavaWriteClient;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.table.timeline.TimelineMetadataUtils;
import org.apache.hudi.table.action.rollback.RollbackUtils;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/** API shim for Hudi 0.13.x (table version 5, timeline layout 1; Hadoop Configuration, no storage abstraction). */
public final class Compat {
  public static final String API = "v013";

  private Compat() {
  }

  public static HoodieTableMetaClient initTable(HadoopConf conf, String base, Properties tableProps)
      throws IOException {
    return HoodieTableMetaClient.withPropertyBuilder().fromProperties(tableProps).initTable(conf, base);
  }

  @SuppressWarnings("rawtypes")
  public static boolean rollbackFailedWrites(HoodieJavaWriteClient client, HoodieTableMetaClient mc) {
    return client.rollbackFailedWrites();
  }

  public static String instantTime(HoodieInstant i) {
    return i.getTimestamp();
  }

  static RollbackInfo readRollbackMetadata(HoodieTableMetaClient mc, HoodieInstant i) throws IOException {
    return RollbackInfo.of(TimelineMetadataUtils.deserializeHoodieRollbackMetadata(
        mc.getActiveTimeline().getInstantDetails(i).get()));
  }

  static String readRollbackPlanSummary(HoodieTableMetaClient mc, HoodieInstant i) throws IOException {
    HoodieInstant requested = new HoodieInstant(HoodieInstant.State.REQUESTED, i.getAction(), i.getTimestamp());
    return String.valueOf(RollbackUtils.getRollbackPlan(mc, requested));
  }

  public static String completionTime(HoodieInstant i) {
    return null;
  }

  /** A completed savepoint's HoodieSavepointMetadata: partition -> savepointDataFile (bare names). */
  static Map<String, List<String>> readSavepointFiles(HoodieTableMetaClient mc, HoodieInstant i) throws IOException {
    HoodieSavepointMetadata md = TimelineMetadataUtils.deserializeHoodieSavepointMetadata(
        mc.getActiveTimeline().getInstantDetails(i).get());
    Map<String, List<String>> out = new TreeMap<>();
    for (Map.Entry<String, HoodieSavepointPartitionMetadata> e : md.getPartitionMetadata().entrySet()) {
      out.put(e.getKey(), new ArrayList<>(e.getValue().getSavepointDataFile()));
    }
    return out;
  }

  /** A completed restore's HoodieRestoreMetadata: the instants it rolled back (instantsToRollback). */
  static List<String> readRestoreRolledBack(HoodieTableMetaClient mc, HoodieInstant i) throws IOException {
    return new ArrayList<>(TimelineMetadataUtils.deserializeHoodieRestoreMetadata(
        mc.getActiveTimeline().getInstantDetails(i).get()).getInstantsToRollback());
  }
}
