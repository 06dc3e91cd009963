package io.hudikeeper.interop;

import org.apache.hudi.avro.model.HoodieRollbackMetadata;
import org.apache.hudi.avro.model.HoodieRollbackPartitionMetadata;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Summary of a deserialized HoodieRollbackMetadata. */
record RollbackInfo(List<String> commitsRolledBack, int deleted, int failedDeletes, List<String> logFilesWritten) {
  static RollbackInfo of(HoodieRollbackMetadata m) {
    int del = 0;
    int failed = 0;
    List<String> logs = new ArrayList<>();
    for (Map.Entry<String, HoodieRollbackPartitionMetadata> e : m.getPartitionMetadata().entrySet()) {
      HoodieRollbackPartitionMetadata p = e.getValue();
      del += p.getSuccessDeleteFiles() == null ? 0 : p.getSuccessDeleteFiles().size();
      failed += p.getFailedDeleteFiles() == null ? 0 : p.getFailedDeleteFiles().size();
      if (p.getRollbackLogFiles() != null) {
        logs.addAll(p.getRollbackLogFiles().keySet());
      }
    }
    return new RollbackInfo(new ArrayList<>(m.getCommitsRollback()), del, failed, logs);
  }
}
