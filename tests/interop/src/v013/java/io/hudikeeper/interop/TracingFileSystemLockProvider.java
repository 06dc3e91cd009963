package io.hudikeeper.interop;

import org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider;
import org.apache.hudi.common.config.LockConfiguration;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Hudi's FileSystemBasedLockProvider, unchanged on disk, that also appends every lock acquire and
 * release (with the Hudi call site and the lock file's content) to the file named by environment
 * variable INTEROP_LOCK_LOG. This is how the README's lock observations were made.
 */
public class TracingFileSystemLockProvider extends FileSystemBasedLockProvider {
  private final String role;

  public TracingFileSystemLockProvider(LockConfiguration lockConfiguration, org.apache.hadoop.conf.Configuration conf) {
    super(lockConfiguration, conf);
    this.role = System.getProperty("interop.role", "?");
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) {
    boolean ok = super.tryLock(time, unit);
    String content = null;
    if (ok) {
      content = readLockFile();
    }
    trace("tryLock=" + ok, content);
    return ok;
  }

  @Override
  public void unlock() {
    trace("unlock", readLockFile());
    super.unlock();
  }

  private String readLockFile() {
    try {
      String p = getLock();
      Path path = Paths.get(p.startsWith("file:") ? java.net.URI.create(p).getPath() : p);
      return new String(Files.readAllBytes(path), StandardCharsets.UTF_8);
    } catch (Exception e) {
      return "<unreadable: " + e + ">";
    }
  }

  private static String callSite() {
    List<String> frames = new ArrayList<>();
    for (StackTraceElement e : new Throwable().getStackTrace()) {
      String c = e.getClassName();
      if (!c.startsWith("org.apache.hudi") || c.contains(".transaction.") || c.contains("LockManager")
          || c.endsWith("TracingFileSystemLockProvider")) {
        continue;
      }
      frames.add(c.substring(c.lastIndexOf('.') + 1) + "." + e.getMethodName());
      if (frames.size() == 4) {
        break;
      }
    }
    return String.join(" <- ", frames);
  }

  private void trace(String what, String content) {
    String f = System.getenv("INTEROP_LOCK_LOG");
    if (f == null || f.isEmpty()) {
      return;
    }
    synchronized (TracingFileSystemLockProvider.class) {
      try (PrintWriter w = new PrintWriter(new FileWriter(f, StandardCharsets.UTF_8, true))) {
        w.println(System.currentTimeMillis() + " [" + role + "] " + what + " lock=" + getLock() + " at " + callSite());
        if (content != null) {
          w.println("    lock file content: " + content.replace("\n", "\\n"));
        }
      } catch (IOException e) {
        // tracing only
      }
    }
  }
}
