package io.hudikeeper.interop;

import org.apache.hadoop.fs.Path;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

/**
 * file:// as {@link NoForkLocalFileSystem}, except that deletes of data files are held once: the first
 * {@code delete} of a path outside {@code .hoodie/} (a base or log file, not a timeline, marker,
 * heartbeat or metadata-table file) writes the marker file {@code <F>.paused} and then blocks, as does
 * every other data-file delete that comes while it is held, until the release file {@code <F>} exists
 * (or, when {@code INTEROP_PAUSE_DELETES_SECONDS} is set, until that many seconds have passed). After
 * the release nothing blocks any more. {@code F} is the environment variable
 * {@code INTEROP_PAUSE_DELETES}; {@link Main#storageConf(boolean)} serves file:// with this class when
 * it is set. This holds a Hudi rollback (or restore) mid-way: its plan is on the timeline, its rollback
 * instant inflight, and none of the failed write's files is deleted yet.
 *
 * <p>The marker holds one line: {@code pid=<JVM pid> path=<the held path>}; it is written to a side file
 * and renamed, so a reader sees it whole.
 */
public class PausingLocalFileSystem extends NoForkLocalFileSystem {
  static final String ENV = "INTEROP_PAUSE_DELETES";
  static final String ENV_SECONDS = "INTEROP_PAUSE_DELETES_SECONDS";

  private static final Object LOCK = new Object();
  /** 0: not paused yet; 1: holding deletes; 2: released (never pauses again in this JVM). */
  private static int state;

  static boolean enabled() {
    String f = System.getenv(ENV);
    return f != null && !f.isEmpty();
  }

  @Override
  public boolean delete(Path f, boolean recursive) throws IOException {
    if (f != null && isDataFile(f)) {
      hold(f);
    }
    return super.delete(f, recursive);
  }

  private static boolean isDataFile(Path p) {
    String s = p.toUri().getPath();
    return !s.contains("/.hoodie/") && !s.endsWith("/.hoodie");
  }

  private static void hold(Path p) throws IOException {
    String spec = System.getenv(ENV);
    if (spec == null || spec.isEmpty()) {
      return;
    }
    File release = new File(spec);
    long deadline = Long.MAX_VALUE;
    String secs = System.getenv(ENV_SECONDS);
    if (secs != null && !secs.isEmpty()) {
      deadline = System.currentTimeMillis() + Long.parseLong(secs.trim()) * 1000L;
    }
    synchronized (LOCK) {
      if (state == 2) {
        return;
      }
      if (state == 0) {
        state = 1;
        File marker = new File(spec + ".paused");
        File tmp = new File(spec + ".paused.tmp");
        String line = "pid=" + ProcessHandle.current().pid() + " path=" + p.toUri().getPath() + "\n";
        Files.write(tmp.toPath(), line.getBytes(StandardCharsets.UTF_8));
        Files.move(tmp.toPath(), marker.toPath(), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        System.err.println("PAUSED_DELETE " + line.trim() + " (release: " + release + ")");
      }
      while (state == 1) {
        if (release.exists() || System.currentTimeMillis() >= deadline) {
          state = 2;
          System.err.println("RELEASED_DELETES " + (release.exists() ? "release file " + release : "after " + secs + " s"));
          LOCK.notifyAll();
          break;
        }
        try {
          LOCK.wait(100);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IOException("interrupted while holding the delete of " + p, e);
        }
      }
    }
  }
}
