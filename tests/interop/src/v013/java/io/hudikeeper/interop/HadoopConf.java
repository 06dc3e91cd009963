package io.hudikeeper.interop;

import org.apache.hadoop.conf.Configuration;

/**
 * Hudi 0.13 takes a Hadoop {@link Configuration} where 0.15+ take a {@code StorageConfiguration}; this one
 * is both: it is passed to Hudi as is, and {@link #unwrap()} serves the shared sources (TableDir) that
 * unwrap a StorageConfiguration.
 */
public final class HadoopConf extends Configuration {
  public HadoopConf() {
    super();
  }

  public Configuration unwrap() {
    return this;
  }
}
