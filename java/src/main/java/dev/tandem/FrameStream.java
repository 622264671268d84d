package dev.tandem;

import java.util.HashMap;
import java.util.Map;

/**
 * An interpreter's pipelined stream: frames are submitted, run with several in flight, and taken
 * back in the order submitted. While the handheld and the link work on one frame, the watch
 * already runs the next frame's first layers.
 *
 * <pre>{@code
 * FrameStream stream = interpreter.stream();
 * for (float[][][][] frame : frames) {
 *   stream.submit(frame);
 * }
 * while (stream.pending() > 0) {
 *   FrameReport report = stream.take(output);
 *   // use output
 * }
 * }</pre>
 *
 * <p>Frames submitted since the last {@code take} run together, pipelined, when a {@code take}
 * finds no frame done. Each frame is taken once, in the order submitted. A frame that fails gets
 * its own {@link TandemException} at its {@code take}; the others go on. If the session itself
 * fails while running them, the frames it delivered are taken as usual and each one it did not
 * run raises its own {@link TandemException} (naming the failure) at its own {@code take}:
 * none is lost or taken twice. Obtained from {@link Interpreter#stream()}; its calls lock the
 * interpreter.
 */
public final class FrameStream {
  private final Interpreter interpreter;

  FrameStream(Interpreter interpreter) {
    this.interpreter = interpreter;
  }

  /**
   * Submits one frame: a value per model input, in the model's order.
   *
   * @param inputs the frame's inputs (arrays of their shapes and types, or buffers)
   * @throws IllegalArgumentException if there are not as many inputs as the model has, or one has
   *     the wrong shape or type
   * @throws IllegalStateException if the interpreter is closed
   */
  public void submit(Object... inputs) {
    synchronized (interpreter) {
      long h = interpreter.handle();
      byte[][] data = interpreter.inputBytes(inputs);
      for (int i = 0; i < data.length; i++) {
        Native.streamFeed(h, i, data[i]);
      }
      Native.streamSubmit(h);
    }
  }

  /**
   * Takes the oldest frame not yet taken, writing output 0 into {@code output}.
   *
   * @param output where output 0 goes (an array of its shape and type, or a buffer), or null
   * @return the frame's report
   * @throws IllegalArgumentException if {@code output} has the wrong shape or type
   * @throws IllegalStateException if the interpreter is closed or no frame is pending
   * @throws TandemException if this frame failed, or the session failed before running it
   */
  public FrameReport take(Object output) {
    Map<Integer, Object> out = new HashMap<>();
    if (output != null) {
      out.put(0, output);
    }
    return take(out);
  }

  /**
   * Takes the oldest frame not yet taken: each output whose index is a key of {@code outputs} is
   * written into its value.
   *
   * @param outputs output index to the array or buffer it is written into
   * @return the frame's report
   * @throws IllegalArgumentException if an index is out of range or a destination has the wrong
   *     shape or type
   * @throws IllegalStateException if the interpreter is closed or no frame is pending
   * @throws TandemException if this frame failed, or the session failed before running it
   */
  public FrameReport take(Map<Integer, Object> outputs) {
    synchronized (interpreter) {
      long h = interpreter.handle();
      interpreter.checkOutputs(outputs);
      FrameReport report = Native.streamTake(h);
      interpreter.copyOutputs(outputs);
      return report;
    }
  }

  /**
   * Frames submitted and not yet taken.
   *
   * @return how many
   * @throws IllegalStateException if the interpreter is closed
   */
  public int pending() {
    synchronized (interpreter) {
      return Native.streamPending(interpreter.handle());
    }
  }
}
