package io.hudikeeper.interop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

/**
 * Where a command's table is: a local folder ({@code --dir /tmp/t}, as before) or an object-store base
 * path ({@code --dir s3a://bucket/key}, Hadoop's S3A, see {@link Main#storageConf(Class)}). The harness's
 * side files ({@code scenario.json}, {@code expected-records*.json}) sit in the table's base path in
 * both cases: with java.io in a local folder (no Hadoop {@code .crc} side files, as before), through
 * Hadoop's file system of the base path otherwise. Hudi ignores files in the base path itself.
 */
final class TableDir {
  /** The base path Hudi is given ({@code file:/...} for a local folder). */
  final String base;
  /** The local folder, or null for an object-store base path. */
  final File local;

  private TableDir(String base, File local) {
    this.base = base;
    this.local = local;
  }

  /** A base path URI ({@code scheme://...}) or a local folder. */
  static TableDir of(String dirOrUri) {
    if (isUri(dirOrUri)) {
      return new TableDir(dirOrUri.replaceAll("/+$", ""), null);
    }
    File f = new File(dirOrUri);
    return new TableDir(Main.base(f), f);
  }

  static boolean isUri(String s) {
    return s.matches("^[A-Za-z][A-Za-z0-9+.-]*://.*");
  }

  boolean isLocal() {
    return local != null;
  }

  private Path path(String name) {
    return new Path(base + "/" + name);
  }

  private FileSystem fs() throws IOException {
    return path("").getFileSystem(Main.storageConf(false).unwrap());
  }

  /** Whether the base path already holds a table ({@code .hoodie}). */
  boolean holdsTable() throws IOException {
    if (isLocal()) {
      return local.exists() && new File(local, ".hoodie").exists();
    }
    return fs().exists(path(".hoodie"));
  }

  /** Creates the local folder (nothing to do on an object store). */
  void create() {
    if (isLocal()) {
      local.mkdirs();
    }
  }

  boolean exists(String name) throws IOException {
    return isLocal() ? new File(local, name).exists() : fs().exists(path(name));
  }

  byte[] read(String name) throws IOException {
    if (isLocal()) {
      return Files.readAllBytes(new File(local, name).toPath());
    }
    try (InputStream in = fs().open(path(name))) {
      return in.readAllBytes();
    }
  }

  void write(String name, byte[] bytes) throws IOException {
    if (isLocal()) {
      Files.write(new File(local, name).toPath(), bytes);
      return;
    }
    try (FSDataOutputStream out = fs().create(path(name), true)) {
      out.write(bytes);
    }
  }

  void writeJson(String name, Object value) throws IOException {
    write(name, Main.JSON.writeValueAsBytes(value));
  }

  @Override
  public String toString() {
    return isLocal() ? local.toString() : base;
  }

  /**
   * {@code copy-local --from <base-uri> --to <dir>}: every object under the base path into a new local
   * folder with the same relative names (folders as they are listed, empty ones left out), byte for
   * byte: the table as the store holds it, for tools that read a local copy (verify).
   */
  static int copyLocal(String from, File to) throws Exception {
    if (to.exists()) {
      throw new IOException(to + " already exists");
    }
    Configuration conf = Main.storageConf(false).unwrap();
    Path root = new Path(from.replaceAll("/+$", ""));
    FileSystem fs = root.getFileSystem(conf);
    int[] counts = new int[2];
    copyTree(fs, root, to, counts, true);
    Main.OUT.println("{\"files\": " + counts[0] + ", \"folders\": " + counts[1] + "}");
    return 0;
  }

  /** Copies dir into to; a folder is made only for the files under it (see below). */
  private static void copyTree(FileSystem fs, Path dir, File to, int[] counts, boolean top) throws IOException {
    FileStatus[] listed;
    try {
      listed = fs.listStatus(dir);
    } catch (FileNotFoundException e) {
      if (top) {
        throw e;
      }
      // A store that keeps real folders (SeaweedFS) lists an emptied folder as a common prefix,
      // which S3A then finds neither as an object nor as a prefix.
      return;
    }
    // An object store holds keys, not folders: a folder with no object below it (S3A's directory
    // markers, or the folders SeaweedFS keeps after their last object went) is no part of the
    // table, so the copy leaves it out. The base path itself is always made.
    if (top) {
      Files.createDirectories(to.toPath());
      counts[1]++;
    }
    for (FileStatus st : listed) {
      File target = new File(to, st.getPath().getName());
      if (st.isDirectory()) {
        copyTree(fs, st.getPath(), target, counts, false);
      } else {
        if (!to.isDirectory()) {
          Files.createDirectories(to.toPath());
          counts[1]++;
        }
        try (InputStream in = fs.open(st.getPath())) {
          Files.copy(in, target.toPath(), StandardCopyOption.REPLACE_EXISTING);
        }
        counts[0]++;
      }
    }
  }


}
