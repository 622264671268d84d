package dev.tandem;

/** The native functions of {@code libtandem_jni.so}; handles are numbers, never pointers. */
final class Native {
  static {
    System.loadLibrary("tandem_jni");
  }

  private Native() {}

  static native long open(
      String model,
      String handheld,
      String keys,
      String link,
      String placement,
      String engine,
      double hintMs,
      double requireSeconds,
      double readySeconds,
      String[] shapeNames,
      int[][] shapes);

  static native void close(long handle);

  static native int tensorCount(long handle, boolean output);

  static native String tensorName(long handle, boolean output, int index);

  static native int tensorType(long handle, boolean output, int index);

  static native int[] tensorShape(long handle, boolean output, int index);

  static native void feed(long handle, int index, byte[] data);

  static native FrameReport run(long handle);

  static native int[] outputShape(long handle, int index);

  static native byte[] output(long handle, int index);

  static native FrameReport lastReport(long handle);

  static native String status(long handle);

  static native boolean handheldReady(long handle);

  static native void streamFeed(long handle, int index, byte[] data);

  static native void streamSubmit(long handle);

  static native FrameReport streamTake(long handle);

  static native int streamPending(long handle);
}
