package io.hudikeeper.interop;

import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

import java.io.IOException;
import java.util.regex.Pattern;

/**
 * file:// as Hadoop's default LocalFileSystem, except that creating (or renaming onto) the data
 * table's completed commit/deltacommit file of the instant named by system property
 * {@code interop.block.instant} prints {@code READY_TO_DIE <instant>} and blocks until the JVM is
 * killed. Used for the "-mdtdone" scenarios: by then Hudi has completed the metadata-table
 * deltacommit of that instant, but the data-table instant is still inflight.
 */
public class BlockingLocalFileSystem extends LocalFileSystem {
  private static Pattern target() {
    String t = System.getProperty("interop.block.instant");
    if (t == null || t.isEmpty()) {
      return null;
    }
    return Pattern.compile("^" + Pattern.quote(t) + "(_\\d+)?\\.(commit|deltacommit)$");
  }

  private static void maybeBlock(Path p) {
    Pattern pat = target();
    if (pat == null || p == null) {
      return;
    }
    if (!pat.matcher(p.getName()).matches()) {
      return;
    }
    // only the data table's timeline, not .hoodie/metadata/.hoodie/...
    String s = p.toUri().getPath();
    if (s.contains("/.hoodie/metadata/")) {
      return;
    }
    Main.readyToDie(System.getProperty("interop.block.instant"), "about to create " + s);
  }

  @Override
  public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                   short replication, long blockSize, Progressable progress) throws IOException {
    maybeBlock(f);
    return super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress);
  }

  @Override
  public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                               short replication, long blockSize, Progressable progress) throws IOException {
    maybeBlock(f);
    return super.createNonRecursive(f, permission, overwrite, bufferSize, replication, blockSize, progress);
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    maybeBlock(dst);
    return super.rename(src, dst);
  }
}
