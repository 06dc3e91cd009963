package io.hudikeeper.interop;

import org.apache.hudi.common.config.LockConfiguration;
import org.apache.hudi.common.lock.LockProvider;
import org.apache.hudi.storage.StorageConfiguration;

import java.lang.reflect.Method;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

/**
 * {@code lock-cycles --base B --cycles N --hold-ms H --wait-ms W [--pause-ms P]}: takes the table lock of base
 * path B N times through Hudi's own lock provider class (the one INTEROP_LOCK selects, as a writer's
 * LockManager would: {@code tryLock(W ms)}), holds it H ms each time, releases it ({@code unlock()}), and
 * waits P ms before the next attempt. One line per event on stdout, times in epoch milliseconds of this
 * machine's clock:
 * <pre>
 *   TRYING &lt;ms before tryLock was called&gt;
 *   LOCKED &lt;ms after tryLock returned&gt; &lt;owner&gt; &lt;validUntil&gt;   (owner/validUntil: the lease, when the provider has one)
 *   RELEASING &lt;ms before unlock was called&gt;
 *   RELEASED &lt;ms after unlock returned&gt;
 *   NOT_LOCKED &lt;ms&gt;                                        (tryLock gave up after W ms)
 *   SUMMARY {"locked": n, "not_locked": m}
 * </pre>
 * A holder's true hold covers [LOCKED, RELEASING]. With a long H the process holds the lock until it is
 * killed (a crashed writer).
 */
final class LockCycles {
  private LockCycles() {
  }

  static int run(String base, int cycles, long holdMs, long waitMs, long pauseMs) throws Exception {
    Properties p = new Properties();
    Scenario.lockProps(p);
    p.setProperty("hoodie.base.path", base);
    String cls = p.getProperty("hoodie.write.lock.provider");
    StorageConfiguration<?> conf = Main.storageConf(false);
    LockProvider<?> lock = (LockProvider<?>) Class.forName(cls)
        .getConstructor(LockConfiguration.class, StorageConfiguration.class)
        .newInstance(new LockConfiguration(p), conf);
    int locked = 0;
    int notLocked = 0;
    for (int i = 0; i < cycles; i++) {
      Main.OUT.println("TRYING " + System.currentTimeMillis());
      Main.OUT.flush();
      if (!lock.tryLock(waitMs, TimeUnit.MILLISECONDS)) {
        Main.OUT.println("NOT_LOCKED " + System.currentTimeMillis());
        Main.OUT.flush();
        notLocked++;
      } else {
        long at = System.currentTimeMillis();
        Main.OUT.println("LOCKED " + at + " " + describe(lock.getLock()));
        Main.OUT.flush();
        locked++;
        Thread.sleep(holdMs);
        Main.OUT.println("RELEASING " + System.currentTimeMillis());
        Main.OUT.flush();
        lock.unlock();
        Main.OUT.println("RELEASED " + System.currentTimeMillis());
        Main.OUT.flush();
      }
      if (pauseMs > 0 && i + 1 < cycles) {
        Thread.sleep(pauseMs);
      }
    }
    lock.close();
    Main.OUT.println("SUMMARY {\"locked\": " + locked + ", \"not_locked\": " + notLocked + "}");
    return 0;
  }

  /** "owner validUntil" of a storage lock's lease (Hudi 1.x StorageLockFile), "- -" for other providers. */
  private static String describe(Object lease) {
    if (lease == null) {
      return "- -";
    }
    try {
      Method owner = lease.getClass().getMethod("getOwner");
      Method until = lease.getClass().getMethod("getValidUntilMs");
      return owner.invoke(lease) + " " + until.invoke(lease);
    } catch (ReflectiveOperationException e) {
      return "- -";
    }
  }
}
