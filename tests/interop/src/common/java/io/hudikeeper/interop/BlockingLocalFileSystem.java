package io.hudikeeper.interop;

import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

import java.io.IOException;
import java.util.regex.Pattern;

/**
 * file:// as {@link NoForkLocalFileSystem}, except that creating (or renaming onto) the completed
 * commit/deltacommit file of the instant named by system property {@code interop.block.instant} prints
 * {@code READY_TO_DIE <instant>} and blocks until the JVM is killed. System property
 * {@code interop.block.table} picks the timeline:
 * <ul>
 *   <li>{@code data} (default): the data table's completed file ("-mdtdone"): by then Hudi has completed
 *   the metadata-table deltacommit of that instant, but the data-table instant is still inflight;</li>
 *   <li>{@code metadata}: the metadata table's completed deltacommit file ("-mdtinflight"): by then Hudi
 *   has written that deltacommit's requested and inflight files and its log blocks, but not completed
 *   it.</li>
 * </ul>
 */
public class BlockingLocalFileSystem extends NoForkLocalFileSystem {
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
    // only the chosen table's timeline: the data table's, or the metadata table's
    // (.hoodie/metadata/.hoodie/ in layout 1, .hoodie/metadata/.hoodie/timeline/ in layout 2)
    String s = p.toUri().getPath();
    boolean inMetadataTable = s.contains("/.hoodie/metadata/.hoodie/");
    boolean wantMetadataTable = "metadata".equals(System.getProperty("interop.block.table", "data"));
    if (s.contains("/.hoodie/metadata/") && !inMetadataTable) {
      return;
    }
    if (inMetadataTable != wantMetadataTable) {
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
