package io.hudikeeper.interop;

import org.apache.hudi.client.HoodieJavaWriteClient;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.common.table.timeline.TimelineMetadataUtils;
import org.apache.hudi.table.action.rollback.RollbackUtils;
import org.apache.hudi.storage.StorageConfiguration;

import java.io.IOException;
import java.util.Properties;

/** API shim for Hudi 0.15.x (table version 6, timeline layout 1). */
public final class Compat {
  public static final String API = "v0";

  private Compat() {
  }

  public static HoodieTableMetaClient initTable(StorageConfiguration<?> conf, String base, Properties tableProps)
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
}
