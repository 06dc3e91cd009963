package io.hudikeeper.interop;

import org.apache.hudi.avro.model.HoodieClusteringPlan;
import org.apache.hudi.client.WriteStatus;
import org.apache.hudi.client.clustering.run.strategy.JavaSortAndSizeExecutionStrategy;
import org.apache.hudi.common.data.HoodieData;
import org.apache.hudi.common.engine.HoodieEngineContext;
import org.apache.hudi.common.schema.HoodieSchema;
import org.apache.hudi.config.HoodieWriteConfig;
import org.apache.hudi.table.HoodieTable;
import org.apache.hudi.table.action.HoodieWriteMetadata;

import java.util.ArrayList;
import java.util.List;

/**
 * The clustering execution strategy of the {@code -clusterfail} scenarios (Hudi 1.2 module only: its
 * {@code performClustering} takes 1.2's {@code HoodieSchema}): Hudi's own Java sort-and-size strategy
 * writes the clustered base files (markers and files, the instant inflight), then the JVM prints
 * {@code READY_TO_DIE <instant> ...} and blocks until the driver kills it, before Hudi commits the
 * clustering (no lock taken, no metadata-table write).
 */
public class DyingClusteringStrategy<T> extends JavaSortAndSizeExecutionStrategy<T> {
  public DyingClusteringStrategy(HoodieTable table, HoodieEngineContext engineContext, HoodieWriteConfig writeConfig) {
    super(table, engineContext, writeConfig);
  }

  @Override
  public HoodieWriteMetadata<HoodieData<WriteStatus>> performClustering(
      HoodieClusteringPlan clusteringPlan, HoodieSchema schema, String instantTime) {
    HoodieWriteMetadata<HoodieData<WriteStatus>> written = super.performClustering(clusteringPlan, schema, instantTime);
    List<String> files = new ArrayList<>();
    for (WriteStatus w : written.getWriteStatuses().collectAsList()) {
      files.add(w.getStat().getPath());
    }
    Main.readyToDie(instantTime, "clustering wrote " + files);
    return written;
  }
}
