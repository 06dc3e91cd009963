package io.hudikeeper.interop;

import org.apache.avro.file.DataFileReader;
import org.apache.avro.file.SeekableByteArrayInput;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

/** Prints a timeline file: Avro container files (plans, rollback metadata, v8+ commit metadata) as JSON-ish text. */
final class Dump {
  private Dump() {
  }

  static int run(File f) throws Exception {
    byte[] b = Files.readAllBytes(f.toPath());
    Main.OUT.println("# " + f + " (" + b.length + " bytes)");
    if (b.length >= 4 && b[0] == 'O' && b[1] == 'b' && b[2] == 'j' && b[3] == 1) {
      try (DataFileReader<GenericRecord> r = new DataFileReader<>(new SeekableByteArrayInput(b),
          new GenericDatumReader<>())) {
        Main.OUT.println("# avro schema: " + r.getSchema().getFullName());
        while (r.hasNext()) {
          Main.OUT.println(r.next());
        }
      }
    } else {
      Main.OUT.println(new String(b, StandardCharsets.UTF_8));
    }
    return 0;
  }
}
