package dev.tandem;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * A tiny ONNX model written byte by byte (protobuf), for the integer types no zoo model has:
 * inputs {@code a} int64 [2, 3] and {@code b} int32 [4]; outputs {@code twice} = a + a (int64),
 * {@code ints} = int32(a), {@code floats} = float(b), {@code bytes} = uint8(b). (Tandem takes no
 * uint8 or int8 inputs: its sessions make random inputs of f32, f64, i64, i32 and bool only.)
 */
final class Onnx {
  private Onnx() {}

  static final int FLOAT = 1;
  static final int UINT8 = 2;
  static final int INT32 = 6;
  static final int INT64 = 7;

  static byte[] integerModel() {
    return integerModel(INT32);
  }

  /** The same with input {@code b} of {@code bType}. */
  static byte[] integerModel(int bType) {
    Msg graph = new Msg()
        .msg(1, node("Add", new String[] {"a", "a"}, "twice", -1))
        .msg(1, node("Cast", new String[] {"a"}, "ints", INT32))
        .msg(1, node("Cast", new String[] {"b"}, "floats", FLOAT))
        .msg(1, node("Cast", new String[] {"b"}, "bytes", UINT8))
        .str(2, "integers")
        .msg(11, valueInfo("a", INT64, 2, 3))
        .msg(11, valueInfo("b", bType, 4))
        .msg(12, valueInfo("twice", INT64, 2, 3))
        .msg(12, valueInfo("ints", INT32, 2, 3))
        .msg(12, valueInfo("floats", FLOAT, 4))
        .msg(12, valueInfo("bytes", UINT8, 4));
    return new Msg()
        .varint(1, 7)
        .str(2, "dev.tandem tests")
        .msg(7, graph)
        .msg(8, new Msg().str(1, "").varint(2, 13))
        .bytes();
  }

  private static Msg node(String op, String[] inputs, String output, int castTo) {
    Msg n = new Msg();
    for (String i : inputs) {
      n.str(1, i);
    }
    n.str(2, output).str(3, output + "_node").str(4, op);
    if (castTo >= 0) {
      n.msg(5, new Msg().str(1, "to").varint(3, castTo).varint(20, 2));
    }
    return n;
  }

  private static Msg valueInfo(String name, int elemType, int... dims) {
    Msg shape = new Msg();
    for (int d : dims) {
      shape.msg(1, new Msg().varint(1, d));
    }
    Msg tensor = new Msg().varint(1, elemType).msg(2, shape);
    return new Msg().str(1, name).msg(2, new Msg().msg(1, tensor));
  }

  /** A protobuf message being written. */
  static final class Msg {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    private void raw(long v) {
      while ((v & ~0x7fL) != 0) {
        out.write((int) ((v & 0x7f) | 0x80));
        v >>>= 7;
      }
      out.write((int) v);
    }

    Msg varint(int field, long v) {
      raw((long) field << 3);
      raw(v);
      return this;
    }

    Msg bytes(int field, byte[] b) {
      raw(((long) field << 3) | 2);
      raw(b.length);
      out.write(b, 0, b.length);
      return this;
    }

    Msg str(int field, String s) {
      return bytes(field, s.getBytes(StandardCharsets.UTF_8));
    }

    Msg msg(int field, Msg m) {
      return bytes(field, m.bytes());
    }

    byte[] bytes() {
      return out.toByteArray();
    }
  }
}
