package dev.tandem;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** NumPy {@code .npy} files of little-endian float32 arrays, C order: what the CLI reads and writes. */
final class Npy {
  final int[] shape;
  final float[] values;

  Npy(int[] shape, float[] values) {
    this.shape = shape;
    this.values = values;
  }

  static Npy read(Path path) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(path)).order(ByteOrder.LITTLE_ENDIAN);
    byte[] magic = new byte[6];
    b.get(magic);
    if (magic[0] != (byte) 0x93 || !new String(magic, 1, 5, StandardCharsets.US_ASCII).equals("NUMPY")) {
      throw new IOException(path + " is not a .npy file");
    }
    int major = b.get();
    b.get();
    int headerLen = major == 1 ? (b.getShort() & 0xffff) : b.getInt();
    byte[] h = new byte[headerLen];
    b.get(h);
    String header = new String(h, StandardCharsets.ISO_8859_1);
    if (!header.contains("'descr': '<f4'") || header.contains("'fortran_order': True")) {
      throw new IOException(path + ": not little-endian float32 in C order: " + header.trim());
    }
    Matcher m = Pattern.compile("'shape': \\(([^)]*)\\)").matcher(header);
    if (!m.find()) {
      throw new IOException(path + ": no shape in " + header.trim());
    }
    String[] parts = m.group(1).split(",");
    int rank = 0;
    for (String p : parts) {
      if (!p.trim().isEmpty()) {
        rank++;
      }
    }
    int[] shape = new int[rank];
    int n = 1;
    int k = 0;
    for (String p : parts) {
      if (!p.trim().isEmpty()) {
        shape[k] = Integer.parseInt(p.trim());
        n *= shape[k++];
      }
    }
    float[] v = new float[n];
    b.asFloatBuffer().get(v);
    return new Npy(shape, v);
  }

  static void write(Path path, int[] shape, float[] values) throws IOException {
    StringBuilder s = new StringBuilder();
    for (int d : shape) {
      s.append(d).append(", ");
    }
    String dims = shape.length == 1 ? shape[0] + "," : s.length() > 0 ? s.substring(0, s.length() - 2) : "";
    String header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    int total = 10 + header.length() + 1;
    int pad = (64 - total % 64) % 64;
    StringBuilder hb = new StringBuilder(header);
    for (int i = 0; i < pad; i++) {
      hb.append(' ');
    }
    hb.append('\n');
    byte[] hbytes = hb.toString().getBytes(StandardCharsets.ISO_8859_1);
    ByteBuffer out = ByteBuffer.allocate(10 + hbytes.length + 4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    out.put((byte) 0x93).put("NUMPY".getBytes(StandardCharsets.US_ASCII)).put((byte) 1).put((byte) 0);
    out.putShort((short) hbytes.length).put(hbytes);
    out.asFloatBuffer().put(values);
    Files.write(path, out.array());
  }
}
