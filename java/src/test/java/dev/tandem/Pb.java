package dev.tandem;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** A float ONNX TensorProto ({@code .pb}): dims (1), data_type (2), float_data (4), raw_data (9). */
final class Pb {
  private Pb() {}

  static Npy read(Path path) throws IOException {
    byte[] b = Files.readAllBytes(path);
    int[] pos = {0};
    List<Integer> dims = new ArrayList<>();
    int type = 1;
    byte[] raw = null;
    List<Float> floats = new ArrayList<>();
    while (pos[0] < b.length) {
      long key = varint(b, pos);
      int field = (int) (key >>> 3);
      int wire = (int) (key & 7);
      if (wire == 0) {
        long v = varint(b, pos);
        if (field == 1) {
          dims.add((int) v);
        } else if (field == 2) {
          type = (int) v;
        }
      } else if (wire == 2) {
        int len = (int) varint(b, pos);
        int end = pos[0] + len;
        if (field == 1) {
          while (pos[0] < end) {
            dims.add((int) varint(b, pos));
          }
        } else if (field == 9) {
          raw = java.util.Arrays.copyOfRange(b, pos[0], end);
        } else if (field == 4) {
          ByteBuffer f = ByteBuffer.wrap(b, pos[0], len).order(ByteOrder.LITTLE_ENDIAN);
          while (f.remaining() >= 4) {
            floats.add(f.getFloat());
          }
        }
        pos[0] = end;
      } else if (wire == 5) {
        if (field == 4) {
          floats.add(ByteBuffer.wrap(b, pos[0], 4).order(ByteOrder.LITTLE_ENDIAN).getFloat());
        }
        pos[0] += 4;
      } else if (wire == 1) {
        pos[0] += 8;
      } else {
        throw new IOException(path + ": wire type " + wire + " at byte " + pos[0]);
      }
    }
    if (type != 1) {
      throw new IOException(path + ": data type " + type + ", not float");
    }
    int[] shape = dims.stream().mapToInt(Integer::intValue).toArray();
    float[] v;
    if (raw != null) {
      v = new float[raw.length / 4];
      ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(v);
    } else {
      v = new float[floats.size()];
      for (int i = 0; i < v.length; i++) {
        v[i] = floats.get(i);
      }
    }
    return new Npy(shape, v);
  }

  private static long varint(byte[] b, int[] pos) {
    long v = 0;
    for (int shift = 0; ; shift += 7) {
      byte x = b[pos[0]++];
      v |= (long) (x & 0x7f) << shift;
      if ((x & 0x80) == 0) {
        return v;
      }
    }
  }
}
