package io.hudikeeper.interop;

import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

/**
 * file:// as {@link NoForkLocalFileSystem}, except that deletes, or creates, of data files are held
 * once. Deletes: the first {@code delete} of a path outside {@code .hoodie/} (a base or log file, not
 * a timeline, marker, heartbeat or metadata-table file) writes the marker file {@code <F>.paused} and
 * then blocks, as does every other data-file delete that comes while it is held, until the release file
 * {@code <F>} exists (or, when {@code INTEROP_PAUSE_DELETES_SECONDS} is set, until that many seconds
 * have passed). After the release nothing blocks any more. {@code F} is the environment variable
 * {@code INTEROP_PAUSE_DELETES}. This holds a Hudi rollback (or restore) mid-way: its plan is on the
 * timeline, its rollback instant inflight, and none of the failed write's files is deleted yet.
 *
 * <p>Creates, the same with {@code INTEROP_PAUSE_CREATES} (and {@code INTEROP_PAUSE_CREATES_SECONDS}):
 * the first {@code create} of a data file (outside {@code .hoodie/}, not a
 * {@code .hoodie_partition_metadata} file) is held before the file exists. This holds a writer mid-write:
 * its instant inflight, its heartbeat beating, the data file's marker written (Hudi writes the marker
 * first), the data file not yet. Stopped there (SIGSTOP) and rolled back by someone else, then released,
 * the writer goes on as a zombie: it writes its data files after the rollback. The two kinds are held
 * independently, each once per JVM.
 *
 * <p>{@link Main#storageConf(boolean)} serves file:// with this class when either variable is set. The
 * marker holds one line: {@code pid=<JVM pid> path=<the held path>}; it is written to a side file and
 * renamed, so a reader sees it whole.
 */
public class PausingLocalFileSystem extends NoForkLocalFileSystem {
  static final String ENV = "INTEROP_PAUSE_DELETES";
  static final String ENV_CREATES = "INTEROP_PAUSE_CREATES";

  /** One kind of held operation, with its own state: each is held at most once per JVM. */
  private static final class Hold {
    final String env;
    final String label;
    /** 0: not paused yet; 1: holding; 2: released (never pauses again in this JVM). */
    int state;

    Hold(String env, String label) {
      this.env = env;
      this.label = label;
    }
  }

  private static final Hold DELETES = new Hold(ENV, "DELETE");
  private static final Hold CREATES = new Hold(ENV_CREATES, "CREATE");

  static boolean enabled() {
    return set(ENV) || set(ENV_CREATES);
  }

  private static boolean set(String env) {
    String f = System.getenv(env);
    return f != null && !f.isEmpty();
  }

  @Override
  public boolean delete(Path f, boolean recursive) throws IOException {
    if (f != null && isDataFile(f)) {
      hold(DELETES, f);
    }
    return super.delete(f, recursive);
  }

  @Override
  public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                   short replication, long blockSize, Progressable progress) throws IOException {
    if (f != null && isDataFile(f) && !f.getName().startsWith(".hoodie_partition_metadata")) {
      hold(CREATES, f);
    }
    return super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress);
  }

  @Override
  public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                               short replication, long blockSize, Progressable progress) throws IOException {
    if (f != null && isDataFile(f) && !f.getName().startsWith(".hoodie_partition_metadata")) {
      hold(CREATES, f);
    }
    return super.createNonRecursive(f, permission, overwrite, bufferSize, replication, blockSize, progress);
  }

  private static boolean isDataFile(Path p) {
    String s = p.toUri().getPath();
    return !s.contains("/.hoodie/") && !s.endsWith("/.hoodie");
  }

  private static void hold(Hold h, Path p) throws IOException {
    String spec = System.getenv(h.env);
    if (spec == null || spec.isEmpty()) {
      return;
    }
    File release = new File(spec);
    long deadline = Long.MAX_VALUE;
    String secs = System.getenv(h.env + "_SECONDS");
    if (secs != null && !secs.isEmpty()) {
      deadline = System.currentTimeMillis() + Long.parseLong(secs.trim()) * 1000L;
    }
    synchronized (h) {
      if (h.state == 2) {
        return;
      }
      if (h.state == 0) {
        h.state = 1;
        File marker = new File(spec + ".paused");
        File tmp = new File(spec + ".paused.tmp");
        String line = "pid=" + ProcessHandle.current().pid() + " path=" + p.toUri().getPath() + "\n";
        Files.write(tmp.toPath(), line.getBytes(StandardCharsets.UTF_8));
        Files.move(tmp.toPath(), marker.toPath(), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        System.err.println("PAUSED_" + h.label + " " + line.trim() + " (release: " + release + ")");
      }
      while (h.state == 1) {
        if (release.exists() || System.currentTimeMillis() >= deadline) {
          h.state = 2;
          System.err.println("RELEASED_" + h.label + "S "
              + (release.exists() ? "release file " + release : "after " + secs + " s"));
          h.notifyAll();
          break;
        }
        try {
          h.wait(100);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IOException("interrupted while holding the " + h.label.toLowerCase() + " of " + p, e);
        }
      }
    }
  }
}
