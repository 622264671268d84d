package dev.tandem;

import java.io.File;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs an ONNX or TFLite model on the watch, split with a paired handheld when that pays, with
 * the shape of LiteRT's {@code org.tensorflow.lite.Interpreter}.
 *
 * <pre>{@code
 * Interpreter.Options options = new Interpreter.Options()
 *     .setHandheld("192.168.1.20:7878")   // none: the watch alone
 *     .setLatencyHintMillis(50);
 * try (Interpreter interpreter = new Interpreter(new File("mnist.onnx"), options)) {
 *   float[][][][] input = new float[1][1][28][28];
 *   float[][] output = new float[1][10];
 *   interpreter.run(input, output);
 *   FrameReport report = interpreter.getLastReport();
 * }
 * }</pre>
 *
 * <p>Inputs and outputs are Java multi-dimensional primitive arrays of the tensor's shape and
 * type ({@code float} for {@link DataType#FLOAT32}, {@code int}, {@code long}, {@code byte},
 * {@code short}, {@code boolean}, {@code double}; see {@link DataType}), {@link
 * java.nio.ByteBuffer}s in native order, or typed buffers such as {@link java.nio.FloatBuffer}.
 * An input buffer is read from its position without moving it; an output buffer is written at
 * its position, which advances.
 *
 * <p>A {@code .tflite} file (recognized by its content, whatever its name) is translated to ONNX
 * when opened, and the translation cached by the digest of its bytes, so that later opens load
 * it without translating: the cache is {@code TANDEM_CACHE_DIR}, else {@code $XDG_CACHE_HOME/tandem}, else
 * {@code ~/.cache/tandem} (environment variables of the process). Without a writable one, each
 * open translates again. An op the translator cannot translate is refused by name ({@link
 * TandemException}).
 *
 * <p>The session opens in the constructor: it loads the model and, with a handheld set,
 * connects (encrypted with the handheld paired in the keystore) and waits for it to be ready;
 * without one ready, frames run on the watch and {@link FrameReport#getLocalReason()} says why.
 * An interpreter may be used from several threads; calls are serialized. {@link #close()} it
 * when done.
 */
public final class Interpreter implements AutoCloseable {
  private long handle;
  private final Tensor[] inputs;
  private final Tensor[] outputs;
  private FrameStream stream;

  /**
   * Opens the model at {@code model} on the watch alone.
   *
   * @param model an ONNX or TFLite model file
   * @throws IllegalArgumentException if {@code model} is null
   * @throws TandemException if the model cannot be read or loaded
   */
  public Interpreter(File model) {
    this(model, new Options());
  }

  /**
   * Opens the model at {@code model} with {@code options}.
   *
   * @param model an ONNX or TFLite model file
   * @param options the handheld, keystore, link, latency hint and placement
   * @throws IllegalArgumentException if {@code model} or {@code options} is null, or an option
   *     is invalid (an unknown placement or link)
   * @throws TandemException if the model cannot be loaded, or a required handheld is not ready
   *     (the message names its address and why)
   */
  public Interpreter(File model, Options options) {
    if (model == null) {
      throw new IllegalArgumentException("the model file is null");
    }
    if (options == null) {
      throw new IllegalArgumentException("the options are null");
    }
    String[] names = options.inputShapes.keySet().toArray(new String[0]);
    int[][] shapes = new int[names.length][];
    for (int i = 0; i < names.length; i++) {
      shapes[i] = options.inputShapes.get(names[i]);
    }
    handle =
        Native.open(
            model.getPath(),
            options.handheld,
            options.keysDir,
            options.link,
            options.placement,
            options.engine,
            options.latencyHintMillis,
            options.requireHandheld ? options.requireHandheldMillis / 1e3 : 0,
            options.readyTimeoutMillis / 1e3,
            names,
            shapes);
    try {
      inputs = tensors(false);
      outputs = tensors(true);
    } catch (RuntimeException e) {
      Native.close(handle);
      handle = 0;
      throw e;
    }
  }

  private Tensor[] tensors(boolean output) {
    int n = Native.tensorCount(handle, output);
    Tensor[] t = new Tensor[n];
    for (int i = 0; i < n; i++) {
      t[i] =
          new Tensor(
              Native.tensorName(handle, output, i),
              DataType.fromCode(Native.tensorType(handle, output, i)),
              Native.tensorShape(handle, output, i),
              i);
    }
    return t;
  }

  /**
   * Runs one frame of a model with one input, writing output 0 into {@code output}.
   *
   * @param input the input: an array of its shape and type, or a buffer
   * @param output where output 0 goes (an array of its shape and type, or a buffer), or null
   * @throws IllegalArgumentException if the model has more than one input, or a value has the
   *     wrong shape or type
   * @throws IllegalStateException if the interpreter is closed
   * @throws TandemException if the frame fails
   */
  public void run(Object input, Object output) {
    Map<Integer, Object> out = new HashMap<>();
    if (output != null) {
      out.put(0, output);
    }
    runForMultipleInputsOutputs(new Object[] {input}, out);
  }

  /**
   * Runs one frame: input {@code i} from {@code inputs[i]}; each output whose index is a key of
   * {@code outputs} is written into its value (the others are not copied).
   *
   * @param inputs one value per model input, in the model's order
   * @param outputs output index to the array or buffer it is written into
   * @throws IllegalArgumentException if there are not as many inputs as the model has, an index
   *     is out of range, or a value has the wrong shape or type
   * @throws IllegalStateException if the interpreter is closed
   * @throws TandemException if the frame fails
   */
  public synchronized void runForMultipleInputsOutputs(
      Object[] inputs, Map<Integer, Object> outputs) {
    checkOpen();
    byte[][] data = inputBytes(inputs);
    checkOutputs(outputs);
    for (int i = 0; i < data.length; i++) {
      Native.feed(handle, i, data[i]);
    }
    Native.run(handle);
    copyOutputs(outputs);
  }

  /** Every input's bytes, checked against its tensor. */
  byte[][] inputBytes(Object[] values) {
    if (values == null) {
      throw new IllegalArgumentException("the inputs are null");
    }
    if (values.length != inputs.length) {
      throw new IllegalArgumentException(
          "the model has " + inputs.length + " input(s), " + values.length + " were given");
    }
    byte[][] data = new byte[values.length][];
    for (int i = 0; i < values.length; i++) {
      data[i] = Values.toBytes(values[i], inputs[i], "input " + i);
    }
    return data;
  }

  /** Checks each output destination before anything runs. */
  void checkOutputs(Map<Integer, Object> dst) {
    if (dst == null) {
      throw new IllegalArgumentException("the outputs are null");
    }
    for (Map.Entry<Integer, Object> e : dst.entrySet()) {
      Tensor t = getOutputTensor(e.getKey() == null ? -1 : e.getKey());
      if (t.dataType() == DataType.UNSUPPORTED) {
        throw new IllegalArgumentException("output " + t + " has an element type Java cannot read");
      }
      Values.checkDestination(e.getValue(), t, "output " + e.getKey());
    }
  }

  /** Copies the current outputs named in {@code dst}. */
  void copyOutputs(Map<Integer, Object> dst) {
    for (Map.Entry<Integer, Object> e : dst.entrySet()) {
      if (e.getValue() == null) {
        continue;
      }
      int i = e.getKey();
      Values.copyOut(
          Native.output(handle, i),
          Native.outputShape(handle, i),
          outputs[i],
          e.getValue(),
          "output " + i);
    }
  }

  /**
   * The model's number of inputs.
   *
   * @return the input count
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized int getInputTensorCount() {
    checkOpen();
    return inputs.length;
  }

  /**
   * The model's number of outputs.
   *
   * @return the output count
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized int getOutputTensorCount() {
    checkOpen();
    return outputs.length;
  }

  /**
   * Input {@code index}: its name, type and shape.
   *
   * @param index the input's index, from 0
   * @return the input
   * @throws IllegalArgumentException if the index is out of range
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized Tensor getInputTensor(int index) {
    checkOpen();
    if (index < 0 || index >= inputs.length) {
      throw new IllegalArgumentException(
          "input index " + index + ": the model has " + inputs.length + " input(s)");
    }
    return inputs[index];
  }

  /**
   * Output {@code index}: its name, type and shape.
   *
   * @param index the output's index, from 0
   * @return the output
   * @throws IllegalArgumentException if the index is out of range
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized Tensor getOutputTensor(int index) {
    checkOpen();
    if (index < 0 || index >= outputs.length) {
      throw new IllegalArgumentException(
          "output index " + index + ": the model has " + outputs.length + " output(s)");
    }
    return outputs[index];
  }

  /**
   * The index of the input called {@code name}.
   *
   * @param name the input's name in the model
   * @return its index
   * @throws IllegalArgumentException if the model has no such input (the message lists them)
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized int getInputIndex(String name) {
    checkOpen();
    return indexOf(inputs, name, "input");
  }

  /**
   * The index of the output called {@code name}.
   *
   * @param name the output's name in the model
   * @return its index
   * @throws IllegalArgumentException if the model has no such output (the message lists them)
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized int getOutputIndex(String name) {
    checkOpen();
    return indexOf(outputs, name, "output");
  }

  private static int indexOf(Tensor[] tensors, String name, String what) {
    List<String> names = new ArrayList<>();
    for (Tensor t : tensors) {
      if (t.name().equals(name)) {
        return t.index();
      }
      names.add(t.name());
    }
    throw new IllegalArgumentException(
        "no " + what + " '" + name + "'; the model's " + what + "s are " + names);
  }

  /**
   * The last frame's report: where it ran, why, how long it took.
   *
   * @return the report, or null before the first frame
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized FrameReport getLastReport() {
    checkOpen();
    return Native.lastReport(handle);
  }

  /**
   * Where the session stands with its handheld, in words: {@code local only}, {@code
   * connecting}, {@code ready (pixel-8-pro)}, {@code refused: ...} or {@code unreachable: ...}.
   *
   * @return the session's status
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized String getStatus() {
    checkOpen();
    return Native.status(handle);
  }

  /**
   * Whether the handheld takes frames now.
   *
   * @return true when a handheld is ready
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized boolean isHandheldReady() {
    checkOpen();
    return Native.handheldReady(handle);
  }

  /**
   * The interpreter's pipelined stream: frames submitted, run with several in flight (the watch
   * runs a frame's first layers while the handheld and the link work on earlier ones), and taken
   * back in order. One stream per interpreter; it shares the interpreter's session.
   *
   * @return the stream
   * @throws IllegalStateException if the interpreter is closed
   */
  public synchronized FrameStream stream() {
    checkOpen();
    if (stream == null) {
      stream = new FrameStream(this);
    }
    return stream;
  }

  /** The native handle, checked open; callers hold this object's lock. */
  long handle() {
    checkOpen();
    return handle;
  }

  Tensor[] outputTensors() {
    return outputs;
  }

  private void checkOpen() {
    if (handle == 0) {
      throw new IllegalStateException("the interpreter is closed");
    }
  }

  /**
   * Closes the session: the connection to the handheld and the model. Closing again does
   * nothing; any other call afterwards throws {@link IllegalStateException}.
   */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      long h = handle;
      handle = 0;
      Native.close(h);
    }
  }

  /**
   * How an {@link Interpreter} runs, set by chaining: {@code new
   * Interpreter.Options().setHandheld("host:port").setLatencyHintMillis(30)}.
   */
  public static final class Options {
    private String handheld;
    private String keysDir;
    private String link;
    private String placement;
    private String engine;
    private double latencyHintMillis = Double.NaN;
    private boolean requireHandheld;
    private long requireHandheldMillis = 10_000;
    private long readyTimeoutMillis = 0;
    private final Map<String, int[]> inputShapes = new LinkedHashMap<>();

    /** Options for the watch alone, the planner deciding, the fastest frames. */
    public Options() {}

    /**
     * The handheld to split frames with ({@code tandem-handheld serve --listen}); none, the
     * default, runs everything on the watch.
     *
     * @param hostPort the handheld's address as {@code host:port}, or null for none
     * @return these options
     */
    public Options setHandheld(String hostPort) {
      this.handheld = hostPort;
      return this;
    }

    /**
     * The wearable's keystore ({@code tandem-wearable pair --keys DIR}); the default is {@code
     * ~/.config/tandem/wearable}. With the handheld paired there the link is encrypted and
     * authenticated; a keystore named here without it fails the open, never a plain link.
     *
     * @param dir the keystore's directory
     * @return these options
     */
    public Options setKeysDir(String dir) {
      this.keysDir = dir;
      return this;
    }

    /**
     * The latency hint: a negative value puts energy first, 0 asks for the fastest frames (the
     * default), a positive value for the least energy within that latency.
     *
     * @param millis the hint in milliseconds (finite)
     * @return these options
     * @throws IllegalArgumentException if {@code millis} is NaN or infinite
     */
    public Options setLatencyHintMillis(double millis) {
      if (Double.isNaN(millis) || Double.isInfinite(millis)) {
        throw new IllegalArgumentException(
            "latency hint " + millis + " ms is not a finite number");
      }
      this.latencyHintMillis = millis;
      return this;
    }

    /**
     * Where frames run when a handheld is set: {@code auto} (the planner, the default), {@code
     * wearable} or {@code handheld}.
     *
     * @param placement the placement's name
     * @return these options
     */
    public Options setPlacement(String placement) {
      this.placement = placement;
      return this;
    }

    /**
     * Whether the interpreter's constructor fails ({@link TandemException}, naming the handheld's
     * address) unless the handheld is ready within {@link #setRequireHandheldMillis(long)} (10 s
     * by default); connection errors are retried until then, a refused model fails at once. Off
     * (the default): without a handheld, frames run on the watch.
     *
     * @param require true to require the handheld
     * @return these options
     */
    public Options setRequireHandheld(boolean require) {
      this.requireHandheld = require;
      return this;
    }

    /**
     * How long a required handheld may take to be ready.
     *
     * @param millis the wait in milliseconds (positive)
     * @return these options
     * @throws IllegalArgumentException if {@code millis} is not positive
     */
    public Options setRequireHandheldMillis(long millis) {
      if (millis <= 0) {
        throw new IllegalArgumentException("the handheld's wait " + millis + " ms is not positive");
      }
      this.requireHandheldMillis = millis;
      return this;
    }

    /**
     * How long the constructor waits for a handheld that is not required (the wait also ends at
     * the first connection error); the default is 60 s.
     *
     * @param millis the wait in milliseconds (positive)
     * @return these options
     * @throws IllegalArgumentException if {@code millis} is not positive
     */
    public Options setReadyTimeoutMillis(long millis) {
      if (millis <= 0) {
        throw new IllegalArgumentException("the ready timeout " + millis + " ms is not positive");
      }
      this.readyTimeoutMillis = millis;
      return this;
    }

    /**
     * Emulates a link profile over the TCP connection to the handheld, both ways, as {@code
     * tandem-wearable run --link} does: {@code ble-1m}, {@code ble-2m}, {@code bt-classic},
     * {@code wifi-poor} or {@code wifi-good}. For tests and demos on one machine.
     *
     * @param profile the profile's name
     * @return these options
     */
    public Options setLink(String profile) {
      this.link = profile;
      return this;
    }

    /**
     * The engine the watch's layers run on: {@code tract} (the default), {@code onnxruntime}
     * (its library from {@code ORT_DYLIB_PATH}) or {@code auto} (the faster of the two).
     *
     * @param engine the engine's name
     * @return these options
     */
    public Options setEngine(String engine) {
      this.engine = engine;
      return this;
    }

    /**
     * The shape of an input whose dimensions the model leaves symbolic.
     *
     * @param name the input's name
     * @param shape its dimensions, each at least 1
     * @return these options
     * @throws IllegalArgumentException if {@code name} or {@code shape} is null
     */
    public Options setInputShape(String name, int[] shape) {
      if (name == null || shape == null) {
        throw new IllegalArgumentException("an input shape needs a name and a shape");
      }
      inputShapes.put(name, shape.clone());
      return this;
    }

    /**
     * The input shapes set so far.
     *
     * @return input name to shape, in the order set
     */
    public Map<String, int[]> getInputShapes() {
      return Collections.unmodifiableMap(inputShapes);
    }
  }
}
