package io.hudikeeper.interop;

import org.apache.hudi.client.HoodieJavaWriteClient;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.avro.model.HoodieRollbackMetadata;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.table.action.rollback.RollbackUtils;
import org.apache.hudi.storage.StorageConfiguration;

import java.io.IOException;
import java.lang.reflect.Method;
import java.util.Properties;

/** API shim for Hudi 1.0.x / 1.1.x (table versions 8 / 9, timeline layout 2). */
public final class Compat {
  public static final String API = "v1";

  private Compat() {
  }

  public static HoodieTableMetaClient initTable(StorageConfiguration<?> conf, String base, Properties tableProps)
      throws IOException {
    return HoodieTableMetaClient.newTableBuilder().fromProperties(tableProps).initTable(conf, base);
  }

  /** 1.0: rollbackFailedWrites(); 1.1: rollbackFailedWrites(HoodieTableMetaClient). */
  @SuppressWarnings("rawtypes")
  public static boolean rollbackFailedWrites(HoodieJavaWriteClient client, HoodieTableMetaClient mc) {
    try {
      for (Method m : client.getClass().getMethods()) {
        if (m.getName().equals("rollbackFailedWrites")) {
          if (m.getParameterCount() == 1 && m.getParameterTypes()[0] == HoodieTableMetaClient.class) {
            return (Boolean) m.invoke(client, mc);
          }
        }
      }
      return (Boolean) client.getClass().getMethod("rollbackFailedWrites").invoke(client);
    } catch (ReflectiveOperationException e) {
      throw new RuntimeException(e);
    }
  }

  public static String instantTime(HoodieInstant i) {
    return i.requestedTime();
  }

  /** 1.1: timeline.readRollbackMetadata(i); 1.0: TimelineMetadataUtils over getInstantDetails(i). */
  static RollbackInfo readRollbackMetadata(HoodieTableMetaClient mc, HoodieInstant i) throws Exception {
    Object tl = mc.getActiveTimeline();
    HoodieRollbackMetadata md;
    try {
      md = (HoodieRollbackMetadata) tl.getClass().getMethod("readRollbackMetadata", HoodieInstant.class).invoke(tl, i);
    } catch (NoSuchMethodException e) {
      Object details = tl.getClass().getMethod("getInstantDetails", HoodieInstant.class).invoke(tl, i);
      byte[] bytes = (byte[]) ((org.apache.hudi.common.util.Option<?>) details).get();
      md = (HoodieRollbackMetadata) Class.forName("org.apache.hudi.common.table.timeline.TimelineMetadataUtils")
          .getMethod("deserializeHoodieRollbackMetadata", byte[].class).invoke(null, (Object) bytes);
    }
    return RollbackInfo.of(md);
  }

  static String readRollbackPlanSummary(HoodieTableMetaClient mc, HoodieInstant i) throws Exception {
    HoodieInstant requested = mc.getInstantGenerator().createNewInstant(HoodieInstant.State.REQUESTED, i.getAction(),
        i.requestedTime());
    return String.valueOf(RollbackUtils.getRollbackPlan(mc, requested));
  }

  public static String completionTime(HoodieInstant i) {
    return i.getCompletionTime();
  }
}
