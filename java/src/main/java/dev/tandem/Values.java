package dev.tandem;

import java.lang.reflect.Array;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Java values to and from the native-order bytes the native library takes and gives:
 * multi-dimensional primitive arrays, {@link ByteBuffer}s in native order, and typed buffers.
 * Every shape, type and length is checked here, before anything is copied.
 */
final class Values {
  private Values() {}

  /** The bytes of {@code src} for tensor {@code t}; a wrong shape or type is refused. */
  static byte[] toBytes(Object src, Tensor t, String what) {
    if (src == null) {
      throw new IllegalArgumentException(what + " is null");
    }
    if (t.dataType() == DataType.UNSUPPORTED) {
      throw new IllegalArgumentException(what + " (" + t + ") has an element type Java cannot feed");
    }
    int n = t.numBytes();
    if (src instanceof Buffer) {
      ByteBuffer out = ByteBuffer.allocate(n).order(ByteOrder.nativeOrder());
      checkBuffer((Buffer) src, t, what, true);
      if (src instanceof ByteBuffer) {
        out.put(((ByteBuffer) src).duplicate());
      } else if (src instanceof FloatBuffer) {
        out.asFloatBuffer().put(((FloatBuffer) src).duplicate());
      } else if (src instanceof IntBuffer) {
        out.asIntBuffer().put(((IntBuffer) src).duplicate());
      } else if (src instanceof LongBuffer) {
        out.asLongBuffer().put(((LongBuffer) src).duplicate());
      } else if (src instanceof ShortBuffer) {
        out.asShortBuffer().put(((ShortBuffer) src).duplicate());
      } else if (src instanceof DoubleBuffer) {
        out.asDoubleBuffer().put(((DoubleBuffer) src).duplicate());
      }
      return out.array();
    }
    checkArray(src, t, what);
    ByteBuffer out = ByteBuffer.allocate(n).order(ByteOrder.nativeOrder());
    write(src, out);
    return out.array();
  }

  /** Checks that {@code dst} can take output {@code t} (its declared shape and type). */
  static void checkDestination(Object dst, Tensor t, String what) {
    if (dst instanceof Buffer) {
      checkBuffer((Buffer) dst, t, what, false);
    } else if (dst != null) {
      checkArray(dst, t, what);
    }
  }

  /** Copies an output's native-order {@code data} of {@code shape} into {@code dst}. */
  static void copyOut(byte[] data, int[] shape, Tensor t, Object dst, String what) {
    Tensor actual = new Tensor(t.name(), t.dataType(), shape, t.index());
    ByteBuffer src = ByteBuffer.wrap(data).order(ByteOrder.nativeOrder());
    if (dst instanceof Buffer) {
      checkBuffer((Buffer) dst, actual, what, false);
      if (dst instanceof ByteBuffer) {
        ((ByteBuffer) dst).put(src);
      } else if (dst instanceof FloatBuffer) {
        ((FloatBuffer) dst).put(src.asFloatBuffer());
      } else if (dst instanceof IntBuffer) {
        ((IntBuffer) dst).put(src.asIntBuffer());
      } else if (dst instanceof LongBuffer) {
        ((LongBuffer) dst).put(src.asLongBuffer());
      } else if (dst instanceof ShortBuffer) {
        ((ShortBuffer) dst).put(src.asShortBuffer());
      } else if (dst instanceof DoubleBuffer) {
        ((DoubleBuffer) dst).put(src.asDoubleBuffer());
      }
      return;
    }
    checkArray(dst, actual, what);
    read(src, dst);
  }

  /**
   * A buffer for {@code t}: a ByteBuffer in native order with room for its bytes, or a typed
   * buffer of its type with room for its elements (exactly, for inputs).
   */
  private static void checkBuffer(Buffer b, Tensor t, String what, boolean input) {
    long have;
    long want;
    if (b instanceof ByteBuffer) {
      ByteBuffer bb = (ByteBuffer) b;
      if (t.dataType().byteSize() > 1 && bb.order() != ByteOrder.nativeOrder()) {
        throw new IllegalArgumentException(
            what + ": a ByteBuffer must be in ByteOrder.nativeOrder() (" + ByteOrder.nativeOrder()
                + "), this one is " + bb.order());
      }
      have = bb.remaining();
      want = t.numBytes();
    } else {
      Class<?> type = bufferType(b);
      if (type == null || type != t.dataType().javaType()) {
        throw new IllegalArgumentException(
            what + " (" + t + ") cannot be a " + b.getClass().getSimpleName());
      }
      have = b.remaining();
      want = t.numElements();
    }
    if (input ? have != want : have < want) {
      throw new IllegalArgumentException(
          what + " (" + t + ") takes " + want + (b instanceof ByteBuffer ? " bytes" : " elements")
              + ", the buffer has " + have + " remaining");
    }
  }

  private static Class<?> bufferType(Buffer b) {
    if (b instanceof FloatBuffer) {
      return float.class;
    } else if (b instanceof IntBuffer) {
      return int.class;
    } else if (b instanceof LongBuffer) {
      return long.class;
    } else if (b instanceof ShortBuffer) {
      return short.class;
    } else if (b instanceof DoubleBuffer) {
      return double.class;
    }
    return null;
  }

  /**
   * An array for {@code t}: of its Java element type, with its shape exactly at every level (a
   * scalar is a one-element array).
   */
  private static void checkArray(Object a, Tensor t, String what) {
    Class<?> c = a.getClass();
    if (!c.isArray()) {
      throw new IllegalArgumentException(
          what + " (" + t + ") must be an array or a buffer, not a " + c.getName());
    }
    int rank = 0;
    Class<?> base = c;
    while (base.isArray()) {
      base = base.getComponentType();
      rank++;
    }
    Class<?> want = t.dataType().javaType();
    if (base != want) {
      throw new IllegalArgumentException(
          what + " (" + t + ") needs " + want + " values, not " + base.getName());
    }
    int[] shape = t.shapeRef();
    int[] expected = shape.length == 0 ? new int[] {1} : shape;
    if (rank != expected.length) {
      throw new IllegalArgumentException(
          what + " (" + t + ") has rank " + expected.length + ", the array " + rank);
    }
    List<Integer> path = new ArrayList<>();
    checkLevel(a, expected, 0, path, what, t);
  }

  private static void checkLevel(
      Object a, int[] shape, int level, List<Integer> path, String what, Tensor t) {
    if (a == null) {
      throw new IllegalArgumentException(what + ": the sub-array at " + path + " is null");
    }
    int len = Array.getLength(a);
    if (len != shape[level]) {
      throw new IllegalArgumentException(
          what + " (" + t + "): the array's shape differs, dimension " + level + " is " + len
              + (path.isEmpty() ? "" : " at " + path) + ", the tensor's " + shape[level]
              + " (shape " + Arrays.toString(shape) + ")");
    }
    if (level + 1 < shape.length) {
      for (int i = 0; i < len; i++) {
        path.add(i);
        checkLevel(Array.get(a, i), shape, level + 1, path, what, t);
        path.remove(path.size() - 1);
      }
    }
  }

  /** Writes a checked array's elements, row-major. */
  private static void write(Object a, ByteBuffer out) {
    if (a instanceof float[]) {
      for (float v : (float[]) a) {
        out.putFloat(v);
      }
    } else if (a instanceof int[]) {
      for (int v : (int[]) a) {
        out.putInt(v);
      }
    } else if (a instanceof long[]) {
      for (long v : (long[]) a) {
        out.putLong(v);
      }
    } else if (a instanceof byte[]) {
      out.put((byte[]) a);
    } else if (a instanceof short[]) {
      for (short v : (short[]) a) {
        out.putShort(v);
      }
    } else if (a instanceof double[]) {
      for (double v : (double[]) a) {
        out.putDouble(v);
      }
    } else if (a instanceof boolean[]) {
      for (boolean v : (boolean[]) a) {
        out.put((byte) (v ? 1 : 0));
      }
    } else {
      for (Object sub : (Object[]) a) {
        write(sub, out);
      }
    }
  }

  /** Reads a checked array's elements, row-major. */
  private static void read(ByteBuffer in, Object a) {
    if (a instanceof float[]) {
      float[] v = (float[]) a;
      for (int i = 0; i < v.length; i++) {
        v[i] = in.getFloat();
      }
    } else if (a instanceof int[]) {
      int[] v = (int[]) a;
      for (int i = 0; i < v.length; i++) {
        v[i] = in.getInt();
      }
    } else if (a instanceof long[]) {
      long[] v = (long[]) a;
      for (int i = 0; i < v.length; i++) {
        v[i] = in.getLong();
      }
    } else if (a instanceof byte[]) {
      in.get((byte[]) a);
    } else if (a instanceof short[]) {
      short[] v = (short[]) a;
      for (int i = 0; i < v.length; i++) {
        v[i] = in.getShort();
      }
    } else if (a instanceof double[]) {
      double[] v = (double[]) a;
      for (int i = 0; i < v.length; i++) {
        v[i] = in.getDouble();
      }
    } else if (a instanceof boolean[]) {
      boolean[] v = (boolean[]) a;
      for (int i = 0; i < v.length; i++) {
        v[i] = in.get() != 0;
      }
    } else {
      for (Object sub : (Object[]) a) {
        read(in, sub);
      }
    }
  }
}
