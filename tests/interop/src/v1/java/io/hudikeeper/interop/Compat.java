package io.hudikeeper.interop;

import org.apache.hudi.client.HoodieJavaWriteClient;
import org.apache.hudi.common.table.HoodieTableMetaClient;
import org.apache.hudi.avro.model.HoodieRestoreMetadata;
import org.apache.hudi.avro.model.HoodieRollbackMetadata;
import org.apache.hudi.avro.model.HoodieSavepointMetadata;
import org.apache.hudi.avro.model.HoodieSavepointPartitionMetadata;
import org.apache.hudi.common.table.timeline.HoodieInstant;
import org.apache.hudi.table.action.rollback.RollbackUtils;
import org.apache.hudi.storage.StorageConfiguration;

import java.io.IOException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

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

  /**
   * Avro metadata of a completed instant. 1.1: the timeline's {@code <readMethod>(instant)};
   * 1.0: {@code TimelineMetadataUtils.<legacyDeserializer>(getInstantDetails(instant))}.
   */
  private static Object readInstantMetadata(HoodieTableMetaClient mc, HoodieInstant i, String readMethod,
                                            String legacyDeserializer) throws Exception {
    Object tl = mc.getActiveTimeline();
    try {
      return tl.getClass().getMethod(readMethod, HoodieInstant.class).invoke(tl, i);
    } catch (NoSuchMethodException e) {
      Object details = tl.getClass().getMethod("getInstantDetails", HoodieInstant.class).invoke(tl, i);
      byte[] bytes = (byte[]) ((org.apache.hudi.common.util.Option<?>) details).get();
      return Class.forName("org.apache.hudi.common.table.timeline.TimelineMetadataUtils")
          .getMethod(legacyDeserializer, byte[].class).invoke(null, (Object) bytes);
    }
  }

  /** A completed savepoint's HoodieSavepointMetadata: partition -> savepointDataFile (bare names). */
  static Map<String, List<String>> readSavepointFiles(HoodieTableMetaClient mc, HoodieInstant i) throws Exception {
    HoodieSavepointMetadata md = (HoodieSavepointMetadata) readInstantMetadata(mc, i, "readSavepointMetadata",
        "deserializeHoodieSavepointMetadata");
    Map<String, List<String>> out = new TreeMap<>();
    for (Map.Entry<String, HoodieSavepointPartitionMetadata> e : md.getPartitionMetadata().entrySet()) {
      out.put(e.getKey(), new ArrayList<>(e.getValue().getSavepointDataFile()));
    }
    return out;
  }

  /** A completed restore's HoodieRestoreMetadata: the instants it rolled back (instantsToRollback). */
  static List<String> readRestoreRolledBack(HoodieTableMetaClient mc, HoodieInstant i) throws Exception {
    HoodieRestoreMetadata md = (HoodieRestoreMetadata) readInstantMetadata(mc, i, "readRestoreMetadata",
        "deserializeHoodieRestoreMetadata");
    return new ArrayList<>(md.getInstantsToRollback());
  }
}
