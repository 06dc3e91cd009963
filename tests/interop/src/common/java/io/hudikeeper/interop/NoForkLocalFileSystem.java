package io.hudikeeper.interop;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * file:// as Hadoop's default LocalFileSystem (checksummed: the same files and .crc side files), except
 * that permissions are set and read with java.nio instead of child processes. Without Hadoop's native
 * library, RawLocalFileSystem forks {@code chmod} for every file it creates (and for its .crc), and
 * {@code ls -ld} for the permission of every FileStatus that something asks for, e.g. each entry of
 * {@code FileSystem.listFiles}, which Hudi uses to list markers. The harness's file system everywhere
 * (see {@code Main.storageConf}), except the benchmark's "stock" column ({@code bench-rollback} without
 * {@code BENCH_FS=nofork}).
 */
public class NoForkLocalFileSystem extends LocalFileSystem {
  public NoForkLocalFileSystem() {
    super(new Raw());
  }

  static final class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      String mode = permission.getUserAction().SYMBOL + permission.getGroupAction().SYMBOL
          + permission.getOtherAction().SYMBOL;
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), PosixFilePermissions.fromString(mode));
      } catch (UnsupportedOperationException e) {
        super.setPermission(p, permission);
      }
    }

    @Override
    public FileStatus[] listStatus(Path f) throws IOException {
      FileStatus[] in = super.listStatus(f);
      if (in == null) {
        return null;
      }
      FileStatus[] out = new FileStatus[in.length];
      for (int i = 0; i < in.length; i++) {
        out[i] = withNioPermission(in[i]);
      }
      return out;
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
      return withNioPermission(super.getFileStatus(f));
    }

    /** A plain FileStatus whose permission, owner and group come from java.nio (no `ls -ld`). */
    private FileStatus withNioPermission(FileStatus s) {
      try {
        PosixFileAttributes a = Files.readAttributes(pathToFile(s.getPath()).toPath(), PosixFileAttributes.class,
            LinkOption.NOFOLLOW_LINKS);
        FsPermission perm = FsPermission.valueOf((s.isDirectory() ? "d" : "-")
            + PosixFilePermissions.toString(a.permissions()));
        return new FileStatus(s.getLen(), s.isDirectory(), s.getReplication(), s.getBlockSize(),
            s.getModificationTime(), s.getAccessTime(), perm, a.owner().getName(), a.group().getName(), s.getPath());
      } catch (IOException | UnsupportedOperationException e) {
        return s; // gone meanwhile, or not POSIX: Hadoop's lazy status (forks if asked for the permission)
      }
    }
  }
}
