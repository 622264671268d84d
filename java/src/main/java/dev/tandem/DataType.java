package dev.tandem;

/**
 * The element type of a model's tensor, and the Java type that holds it: {@code float} for
 * {@link #FLOAT32}, {@code int} for {@link #INT32}, {@code long} for {@link #INT64}, {@code
 * byte} for {@link #UINT8} and {@link #INT8}, {@code short} for {@link #INT16}, {@code boolean}
 * for {@link #BOOL} and {@code double} for {@link #FLOAT64}.
 */
public enum DataType {
  /** A type Java can neither feed nor read (strings, half floats, ...). */
  UNSUPPORTED(0, 0),
  /** 32-bit float: {@code float}. */
  FLOAT32(1, 4),
  /** 32-bit signed integer: {@code int}. */
  INT32(2, 4),
  /** 8-bit unsigned integer: {@code byte} (read as unsigned). */
  UINT8(3, 1),
  /** 64-bit signed integer: {@code long}. */
  INT64(4, 8),
  /** Boolean: {@code boolean}. */
  BOOL(5, 1),
  /** 16-bit signed integer: {@code short}. */
  INT16(6, 2),
  /** 8-bit signed integer: {@code byte}. */
  INT8(7, 1),
  /** 64-bit float: {@code double}. */
  FLOAT64(8, 8);

  private final int code;
  private final int byteSize;

  DataType(int code, int byteSize) {
    this.code = code;
    this.byteSize = byteSize;
  }

  /**
   * Bytes per element.
   *
   * @return the size of one element in bytes (0 for {@link #UNSUPPORTED})
   */
  public int byteSize() {
    return byteSize;
  }

  /** The type with the native library's code. */
  static DataType fromCode(int code) {
    for (DataType t : values()) {
      if (t.code == code) {
        return t;
      }
    }
    return UNSUPPORTED;
  }

  /** The Java primitive type holding this type's elements, or null. */
  Class<?> javaType() {
    switch (this) {
      case FLOAT32:
        return float.class;
      case INT32:
        return int.class;
      case UINT8:
      case INT8:
        return byte.class;
      case INT64:
        return long.class;
      case BOOL:
        return boolean.class;
      case INT16:
        return short.class;
      case FLOAT64:
        return double.class;
      default:
        return null;
    }
  }
}
