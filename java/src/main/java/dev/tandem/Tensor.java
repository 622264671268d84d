package dev.tandem;

import java.util.Arrays;

/**
 * One input or output of the model, as LiteRT's {@code Tensor} describes it: its name, element
 * type and shape. Obtained from {@link Interpreter#getInputTensor(int)} and {@link
 * Interpreter#getOutputTensor(int)}.
 */
public final class Tensor {
  private final String name;
  private final DataType dataType;
  private final int[] shape;
  private final int index;

  Tensor(String name, DataType dataType, int[] shape, int index) {
    this.name = name;
    this.dataType = dataType;
    this.shape = shape;
    this.index = index;
  }

  /**
   * The tensor's name in the model.
   *
   * @return its name
   */
  public String name() {
    return name;
  }

  /**
   * The tensor's element type.
   *
   * @return its type
   */
  public DataType dataType() {
    return dataType;
  }

  /**
   * The tensor's shape (an empty array for a scalar).
   *
   * @return a copy of its dimensions
   */
  public int[] shape() {
    return shape.clone();
  }

  /**
   * The tensor's number of dimensions.
   *
   * @return its rank
   */
  public int numDimensions() {
    return shape.length;
  }

  /**
   * The tensor's element count: the product of its shape.
   *
   * @return how many elements it holds
   */
  public int numElements() {
    long n = 1;
    for (int d : shape) {
      n *= d;
    }
    return n > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) n;
  }

  /**
   * The tensor's size in bytes.
   *
   * @return its element count times its element size
   */
  public int numBytes() {
    long n = (long) numElements() * dataType.byteSize();
    return n > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) n;
  }

  /**
   * Its index among the model's inputs or outputs.
   *
   * @return the index
   */
  public int index() {
    return index;
  }

  /**
   * The tensor in words, as {@code name FLOAT32 [1, 28, 28, 1]}.
   *
   * @return a description
   */
  @Override
  public String toString() {
    return name + " " + dataType + " " + Arrays.toString(shape);
  }

  /** The shape itself, not a copy, for checks in this package. */
  int[] shapeRef() {
    return shape;
  }
}
