package dev.tandem;

import java.io.File;
import java.io.IOException;
import java.lang.reflect.Array;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The Java API's tests, with a runner of their own (no JUnit: Maven Central is out of reach
 * here): every check throws on failure, every test runs, and the exit status is 1 if any failed.
 *
 * <p>System properties (set by {@code scripts/java.sh}): {@code tandem.wearable} (the {@code
 * tandem-wearable} binary, the reference), {@code tandem.mnist} (the zoo's MNIST), {@code
 * tandem.real} and {@code tandem.realInput} and {@code tandem.realShape} (a real model, its real
 * input as a TensorProto and its input shape {@code NAME=D1,D2,...}), {@code tandem.handheld}
 * (a paired {@code tandem-handheld serve}), {@code tandem.keys} (the wearable's keystore paired
 * with it), {@code tandem.link} (an emulated link profile), {@code tandem.work} (a scratch
 * directory); optionally {@code tandem.tflite}, {@code tandem.tfliteInput}, {@code
 * tandem.tfliteShape} for a TFLite model. {@code -Dtandem.only=NAME} runs the tests whose name
 * contains NAME (a comma-separated list: any of them).
 */
public final class InterpreterTest {
  interface Body {
    void run() throws Exception;
  }

  private static final Map<String, Body> TESTS = new LinkedHashMap<>();
  private static final Path WORK = Paths.get(prop("tandem.work", "target/java/work"));

  public static void main(String[] args) throws Exception {
    Files.createDirectories(WORK);
    register();
    String[] only = System.getProperty("tandem.only", "").split(",");
    List<String> failed = new ArrayList<>();
    int ran = 0;
    for (Map.Entry<String, Body> t : TESTS.entrySet()) {
      if (Arrays.stream(only).noneMatch(o -> t.getKey().contains(o.trim()))) {
        continue;
      }
      ran++;
      long start = System.nanoTime();
      try {
        t.getValue().run();
        System.out.printf("ok   %-58s %6.2f s%n", t.getKey(), (System.nanoTime() - start) / 1e9);
      } catch (Throwable e) {
        failed.add(t.getKey());
        System.out.printf("FAIL %-58s %6.2f s%n", t.getKey(), (System.nanoTime() - start) / 1e9);
        e.printStackTrace(System.out);
      }
    }
    System.out.println(
        (ran - failed.size()) + " passed, " + failed.size() + " failed" + (failed.isEmpty() ? "" : ": " + failed));
    System.exit(failed.isEmpty() && ran > 0 ? 0 : 1);
  }

  private static void register() {
    TESTS.put("mnist locally equals the CLI's outputs", InterpreterTest::mnistLocal);
    TESTS.put("mnist on the paired handheld over an emulated link equals the CLI's", InterpreterTest::mnistHandheld);
    TESTS.put("a real model locally equals the CLI's outputs", () -> real(false));
    TESTS.put("a real model on the paired handheld equals the CLI's", () -> real(true));
    TESTS.put("a real model as the planner places it over the link is within tolerance", InterpreterTest::realAuto);
    TESTS.put("buffers give the same outputs as arrays", InterpreterTest::buffers);
    TESTS.put("long, int and byte arrays and buffers feed and read integer tensors", InterpreterTest::integers);
    TESTS.put("tensors, indices and the report describe the model and the frame", InterpreterTest::describe);
    TESTS.put("a stream takes frames back in order, pipelined on the handheld", InterpreterTest::stream);
    TESTS.put("a wrong shape, type or index is an IllegalArgumentException", InterpreterTest::wrongArguments);
    TESTS.put("a dead required handheld is a TandemException naming it", InterpreterTest::deadHandheld);
    TESTS.put("use after close is an IllegalStateException", InterpreterTest::afterClose);
    TESTS.put("bad options and a bad model are refused with reasons", InterpreterTest::badOptions);
    TESTS.put("forged handles and nulls never crash the JVM", InterpreterTest::forged);
    TESTS.put("thousands of input shapes fit the JVM's local reference table", InterpreterTest::manyShapes);
    if (System.getProperty("tandem.tflite") != null) {
      TESTS.put("a translated TFLite model equals the CLI's outputs", InterpreterTest::tflite);
    }
  }

  // ---- helpers -------------------------------------------------------------------------------

  private static String prop(String name, String dflt) {
    return System.getProperty(name, dflt);
  }

  private static String need(String name) {
    String v = System.getProperty(name);
    if (v == null) {
      throw new IllegalStateException("set -D" + name);
    }
    return v;
  }

  static void check(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static <T extends Throwable> T expect(Class<T> type, Body body, String what) throws Exception {
    try {
      body.run();
    } catch (Throwable e) {
      if (type.isInstance(e)) {
        return type.cast(e);
      }
      throw new AssertionError(what + ": expected " + type.getSimpleName() + ", got " + e, e);
    }
    throw new AssertionError(what + ": expected " + type.getSimpleName() + ", nothing was thrown");
  }

  /** A deterministic input in [-1, 1), the same for every run with the same seed. */
  static float[] pseudoRandom(int n, long seed) {
    float[] v = new float[n];
    long x = seed * 6364136223846793005L + 1442695040888963407L;
    for (int i = 0; i < n; i++) {
      x = x * 6364136223846793005L + 1442695040888963407L;
      v[i] = ((x >>> 40) / (float) (1L << 24)) * 2 - 1;
    }
    return v;
  }

  /** A float array of {@code shape} holding {@code v} (row-major). */
  static Object shaped(int[] shape, float[] v) {
    Object a = Array.newInstance(float.class, shape);
    fill(a, v, new int[] {0});
    return a;
  }

  private static void fill(Object a, float[] v, int[] at) {
    if (a instanceof float[]) {
      float[] f = (float[]) a;
      System.arraycopy(v, at[0], f, 0, f.length);
      at[0] += f.length;
    } else {
      for (Object sub : (Object[]) a) {
        fill(sub, v, at);
      }
    }
  }

  static float[] flat(Object a) {
    List<Float> out = new ArrayList<>();
    flatten(a, out);
    float[] v = new float[out.size()];
    for (int i = 0; i < v.length; i++) {
      v[i] = out.get(i);
    }
    return v;
  }

  private static void flatten(Object a, List<Float> out) {
    if (a instanceof float[]) {
      for (float x : (float[]) a) {
        out.add(x);
      }
    } else {
      for (Object sub : (Object[]) a) {
        flatten(sub, out);
      }
    }
  }

  /** Max |a - b| over max(1, max |b|); and the shapes and lengths must agree. */
  static double relDiff(float[] a, float[] b) {
    check(a.length == b.length, "lengths " + a.length + " and " + b.length);
    double d = 0;
    double m = 1;
    for (int i = 0; i < a.length; i++) {
      d = Math.max(d, Math.abs(a[i] - b[i]));
      m = Math.max(m, Math.abs(b[i]));
    }
    return d / m;
  }

  /** Every output of {@code in}, by index, as fresh float arrays of the model's shapes. */
  static Map<Integer, Object> outputsOf(Interpreter in) {
    Map<Integer, Object> out = new HashMap<>();
    for (int i = 0; i < in.getOutputTensorCount(); i++) {
      out.put(i, Array.newInstance(float.class, in.getOutputTensor(i).shape()));
    }
    return out;
  }

  /** A tensor name as the CLI names its file: letters, digits, '.', '-', '_' kept, the rest '_'. */
  static String fileStem(String name) {
    StringBuilder s = new StringBuilder();
    for (char c : name.toCharArray()) {
      boolean keep = (c < 128 && Character.isLetterOrDigit(c)) || c == '.' || c == '-' || c == '_';
      s.append(keep ? c : '_');
    }
    return s.toString();
  }

  /**
   * The Rust CLI's outputs ({@code tandem-wearable run --save-outputs}) on the input saved as
   * {@code .npy}, by output name; {@code args} say where it runs.
   */
  static Map<String, Npy> cli(Path model, String input, Npy x, String shapeArg, List<String> outputs, String... args)
      throws IOException, InterruptedException {
    Path dir = Files.createTempDirectory(WORK, "cli");
    Path in = dir.resolve("input.npy");
    Npy.write(in, x.shape, x.values);
    List<String> cmd = new ArrayList<>();
    cmd.addAll(Arrays.asList(need("tandem.wearable"), "run", "--model", model.toString()));
    cmd.addAll(Arrays.asList("--input", input + "=" + in, "--save-outputs", dir.resolve("out").toString()));
    if (shapeArg != null) {
      cmd.addAll(Arrays.asList("--input-shape", shapeArg));
    }
    cmd.addAll(Arrays.asList(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Process p = pb.start();
    String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    check(p.waitFor(300, TimeUnit.SECONDS), "the CLI finished");
    check(p.exitValue() == 0, "the CLI failed: " + cmd + "\n" + text);
    Map<String, Npy> out = new LinkedHashMap<>();
    for (String name : outputs) {
      out.put(name, Npy.read(dir.resolve("out").resolve(fileStem(name) + ".npy")));
    }
    return out;
  }

  static List<String> outputNames(Interpreter in) {
    List<String> names = new ArrayList<>();
    for (int i = 0; i < in.getOutputTensorCount(); i++) {
      names.add(in.getOutputTensor(i).name());
    }
    return names;
  }

  static Interpreter.Options handheldOptions(String placement) {
    return new Interpreter.Options()
        .setHandheld(need("tandem.handheld"))
        .setKeysDir(need("tandem.keys"))
        .setLink(prop("tandem.link", "ble-2m"))
        .setPlacement(placement)
        .setRequireHandheld(true)
        .setRequireHandheldMillis(30_000);
  }

  static String[] cliHandheld(String placement) {
    return new String[] {
      "--connect", need("tandem.handheld"), "--keys", need("tandem.keys"), "--link", prop("tandem.link", "ble-2m"),
      "--placement", placement, "--require-handheld", "30"
    };
  }

  static final String[] CLI_LOCAL = {"--connect", "127.0.0.1:9", "--placement", "wearable"};

  /** Runs {@code x} through {@code in}, compares with the CLI's outputs at {@code tolerance}. */
  static FrameReport compare(Interpreter in, Path model, Npy x, String shapeArg, double tolerance, String... cliArgs)
      throws Exception {
    Tensor t = in.getInputTensor(0);
    check(Arrays.equals(t.shape(), x.shape), "input shape " + Arrays.toString(t.shape()) + " vs " + Arrays.toString(x.shape));
    Map<Integer, Object> out = outputsOf(in);
    in.runForMultipleInputsOutputs(new Object[] {shaped(x.shape, x.values)}, out);
    FrameReport report = in.getLastReport();
    Map<String, Npy> want = cli(model, t.name(), x, shapeArg, outputNames(in), cliArgs);
    for (int i = 0; i < in.getOutputTensorCount(); i++) {
      String name = in.getOutputTensor(i).name();
      Npy w = want.get(name);
      float[] got = flat(out.get(i));
      check(Arrays.equals(w.shape, in.getOutputTensor(i).shape()), name + ": shape " + Arrays.toString(w.shape));
      if (tolerance == 0) {
        check(Arrays.equals(got, w.values), name + ": Java's outputs differ from the CLI's (max rel diff " + relDiff(got, w.values) + ")");
      } else {
        double d = relDiff(got, w.values);
        check(d <= tolerance, name + ": Java's outputs differ from the CLI's by " + d);
      }
    }
    return report;
  }

  static Npy mnistInput(long seed) {
    return new Npy(new int[] {1, 1, 28, 28}, pseudoRandom(28 * 28, seed));
  }

  static int[] parseShape(String spec) {
    String[] dims = spec.substring(spec.indexOf('=') + 1).split(",");
    return Arrays.stream(dims).mapToInt(Integer::parseInt).toArray();
  }

  static Interpreter.Options withShape(Interpreter.Options o, String spec) {
    return o.setInputShape(spec.substring(0, spec.indexOf('=')), parseShape(spec));
  }

  // ---- tests ---------------------------------------------------------------------------------

  static void mnistLocal() throws Exception {
    Path model = Paths.get(need("tandem.mnist"));
    try (Interpreter in = new Interpreter(model.toFile())) {
      FrameReport r = compare(in, model, mnistInput(1), null, 0, CLI_LOCAL);
      check(!r.isOffloaded(), "ran locally");
      check("placement: wearable only".equals(r.getLocalReason()), "reason: " + r.getLocalReason());
      check("local only".equals(in.getStatus()), "status: " + in.getStatus());
    }
  }

  static void mnistHandheld() throws Exception {
    Path model = Paths.get(need("tandem.mnist"));
    try (Interpreter in = new Interpreter(model.toFile(), handheldOptions("handheld"))) {
      check(in.isHandheldReady(), "the handheld is ready: " + in.getStatus());
      check(in.getStatus().startsWith("ready"), "status: " + in.getStatus());
      FrameReport r = compare(in, model, mnistInput(2), null, 0, cliHandheld("handheld"));
      check(r.isOffloaded(), "offloaded: " + r.toJson());
      check(r.getLocalReason() == null, "no local reason: " + r.getLocalReason());
      check(r.getUpBytes() > 0 && r.getDownBytes() > 0, "bytes both ways: " + r.toJson());
      check(r.getLatencyMillis() > 0 && r.getHandheldMillis() > 0, "times: " + r.toJson());
    }
  }

  static void real(boolean handheld) throws Exception {
    Path model = Paths.get(need("tandem.real"));
    String shape = need("tandem.realShape");
    Npy x = Pb.read(Paths.get(need("tandem.realInput")));
    Interpreter.Options o = withShape(handheld ? handheldOptions("handheld") : new Interpreter.Options(), shape);
    try (Interpreter in = new Interpreter(model.toFile(), o)) {
      FrameReport r = compare(in, model, x, shape, 0, handheld ? cliHandheld("handheld") : CLI_LOCAL);
      check(r.isOffloaded() == handheld, "offloaded " + handheld + ": " + r.toJson());
    }
  }

  static void realAuto() throws Exception {
    Path model = Paths.get(need("tandem.real"));
    String shape = need("tandem.realShape");
    Npy x = Pb.read(Paths.get(need("tandem.realInput")));
    Interpreter.Options o = withShape(handheldOptions("auto"), shape).setLatencyHintMillis(0);
    try (Interpreter in = new Interpreter(model.toFile(), o)) {
      FrameReport r = compare(in, model, x, shape, 1e-5, CLI_LOCAL);
      check(r.getCut() != null && !r.getCut().isEmpty(), "a cut: " + r.toJson());
      System.out.println("     planner on " + prop("tandem.link", "ble-2m") + ": offloaded " + r.isOffloaded()
          + ", cut " + r.getCut() + ", reason " + r.getLocalReason());
    }
  }

  static void buffers() throws Exception {
    Path model = Paths.get(need("tandem.mnist"));
    try (Interpreter in = new Interpreter(model.toFile())) {
      Npy x = mnistInput(3);
      float[][] arrayOut = new float[1][10];
      in.run(shaped(x.shape, x.values), arrayOut);
      ByteBuffer direct = ByteBuffer.allocateDirect(4 * 784).order(ByteOrder.nativeOrder());
      direct.asFloatBuffer().put(x.values);
      FloatBuffer out = FloatBuffer.allocate(10);
      in.run(direct, out);
      check(direct.position() == 0, "an input buffer's position stays");
      check(out.position() == 10, "an output buffer's position advances");
      check(Arrays.equals(out.array(), arrayOut[0]), "a direct ByteBuffer in, a FloatBuffer out: the same outputs");
      FloatBuffer fin = FloatBuffer.wrap(x.values);
      ByteBuffer bout = ByteBuffer.allocateDirect(40).order(ByteOrder.nativeOrder());
      in.run(fin, bout);
      bout.flip();
      float[] b = new float[10];
      bout.asFloatBuffer().get(b);
      check(Arrays.equals(b, arrayOut[0]), "a FloatBuffer in, a direct ByteBuffer out: the same outputs");
    }
  }

  static void integers() throws Exception {
    Path model = WORK.resolve("integers.onnx");
    Files.write(model, Onnx.integerModel());
    try (Interpreter in = new Interpreter(model.toFile())) {
      check(in.getInputTensor(0).dataType() == DataType.INT64, "a: " + in.getInputTensor(0));
      check(in.getInputTensor(1).dataType() == DataType.INT32, "b: " + in.getInputTensor(1));
      int twice = in.getOutputIndex("twice");
      int ints = in.getOutputIndex("ints");
      int floats = in.getOutputIndex("floats");
      int bytes = in.getOutputIndex("bytes");
      check(in.getOutputTensor(ints).dataType() == DataType.INT32, "ints: " + in.getOutputTensor(ints));
      check(in.getOutputTensor(bytes).dataType() == DataType.UINT8, "bytes: " + in.getOutputTensor(bytes));
      long[][] a = {{1, -2, 3}, {1L << 40, 0, -7}};
      int[] b = {0, 1, 200, 255};
      Map<Integer, Object> out = new HashMap<>();
      long[][] twiceOut = new long[2][3];
      int[][] intsOut = new int[2][3];
      float[] floatsOut = new float[4];
      byte[] bytesOut = new byte[4];
      out.put(twice, twiceOut);
      out.put(ints, intsOut);
      out.put(floats, floatsOut);
      out.put(bytes, bytesOut);
      in.runForMultipleInputsOutputs(new Object[] {a, b}, out);
      check(Arrays.deepEquals(twiceOut, new long[][] {{2, -4, 6}, {1L << 41, 0, -14}}), Arrays.deepToString(twiceOut));
      check(Arrays.equals(intsOut[0], new int[] {1, -2, 3}) && intsOut[1][2] == -7, Arrays.deepToString(intsOut));
      check(Arrays.equals(floatsOut, new float[] {0, 1, 200, 255}), Arrays.toString(floatsOut));
      check(Arrays.equals(bytesOut, new byte[] {0, 1, (byte) 200, (byte) 255}), Arrays.toString(bytesOut));
      // The same through buffers: a LongBuffer and an IntBuffer in, a direct ByteBuffer out.
      java.nio.LongBuffer la = java.nio.LongBuffer.wrap(new long[] {1, -2, 3, 1L << 40, 0, -7});
      ByteBuffer twiceBuf = ByteBuffer.allocateDirect(48).order(ByteOrder.nativeOrder());
      out.put(twice, twiceBuf);
      in.runForMultipleInputsOutputs(new Object[] {la, java.nio.IntBuffer.wrap(b)}, out);
      twiceBuf.flip();
      check(twiceBuf.asLongBuffer().get(3) == 1L << 41, "a LongBuffer in, a ByteBuffer out");
      expect(IllegalArgumentException.class,
          () -> in.runForMultipleInputsOutputs(new Object[] {new int[2][3], b}, new HashMap<>()), "ints for longs");
      expect(IllegalArgumentException.class,
          () -> in.runForMultipleInputsOutputs(new Object[] {a, new short[4]}, new HashMap<>()), "shorts for ints");
      Map<Integer, Object> wrong = new HashMap<>();
      wrong.put(ints, new long[2][3]);
      expect(IllegalArgumentException.class, () -> in.runForMultipleInputsOutputs(new Object[] {a, b}, wrong),
          "longs for an int32 output");
    }
    // A uint8 input is one Tandem's sessions do not take: refused, saying so.
    Path u8 = WORK.resolve("uint8-input.onnx");
    Files.write(u8, Onnx.integerModel(Onnx.UINT8));
    TandemException e = expect(TandemException.class, () -> new Interpreter(u8.toFile()), "a uint8 input");
    check(e.getMessage().contains("'b'") && e.getMessage().contains("U8"), e.getMessage());
  }

  static void describe() throws Exception {
    Path model = Paths.get(need("tandem.mnist"));
    try (Interpreter in = new Interpreter(model.toFile())) {
      check(in.getInputTensorCount() == 1 && in.getOutputTensorCount() == 1, "one input, one output");
      Tensor x = in.getInputTensor(0);
      check(x.dataType() == DataType.FLOAT32, "float input: " + x);
      check(Arrays.equals(x.shape(), new int[] {1, 1, 28, 28}), "input shape: " + x);
      check(x.numElements() == 784 && x.numBytes() == 3136, "sizes: " + x);
      check(in.getInputIndex(x.name()) == 0, "input index by name");
      Tensor y = in.getOutputTensor(0);
      check(in.getOutputIndex(y.name()) == 0, "output index by name");
      check(Arrays.equals(y.shape(), new int[] {1, 10}), "output shape: " + y);
      int[] s = x.shape();
      s[0] = 7;
      check(x.shape()[0] == 1, "shape() is a copy");
      check(in.getLastReport() == null, "no report before a frame");
      in.run(shaped(x.shape(), pseudoRandom(784, 4)), new float[1][10]);
      FrameReport r = in.getLastReport();
      check(r != null && r.getFrame() == 1, "frame 1");
      check(r.toJson().startsWith("{") && r.toJson().contains("\"offloaded\":false"), r.toJson());
      check(r.getWearableMillis() > 0 && r.getLatencyMillis() > 0, r.toJson());
      check(r.getFallback() == null, "no fallback");
    }
  }

  /**
   * Thousands of input shapes cross JNI in one call: each is read in a local frame of its own, or
   * the JVM's local reference table overflows (ART aborts; {@code -Xcheck:jni} warns, and the
   * runners fail on the warning). The names are none of the model's, so the open refuses them.
   */
  static void manyShapes() throws Exception {
    Interpreter.Options options = new Interpreter.Options();
    for (int i = 0; i < 5000; i++) {
      options.setInputShape("not_an_input_" + i, new int[] {1, 1, 28, 28});
    }
    TandemException e = expect(TandemException.class,
        () -> new Interpreter(new File(need("tandem.mnist")), options), "shapes of no input");
    check(e.getMessage().contains("unknown input 'not_an_input_"), e.getMessage());
  }

  static void stream() throws Exception {
    Path model = Paths.get(need("tandem.mnist"));
    int frames = 6;
    float[][] want = new float[frames][10];
    try (Interpreter local = new Interpreter(model.toFile())) {
      for (int f = 0; f < frames; f++) {
        float[][] out = new float[1][10];
        local.run(shaped(new int[] {1, 1, 28, 28}, pseudoRandom(784, 100 + f)), out);
        want[f] = out[0];
      }
    }
    try (Interpreter in = new Interpreter(model.toFile(), handheldOptions("handheld"))) {
      FrameStream s = in.stream();
      check(in.stream() == s, "one stream per interpreter");
      expect(IllegalStateException.class, () -> s.take(new float[1][10]), "take with nothing submitted");
      for (int f = 0; f < frames; f++) {
        s.submit(shaped(new int[] {1, 1, 28, 28}, pseudoRandom(784, 100 + f)));
      }
      check(s.pending() == frames, "pending: " + s.pending());
      long last = 0;
      for (int f = 0; f < frames; f++) {
        float[][] out = new float[1][10];
        FrameReport r = s.take(out);
        check(r.getFrame() > last, "frames in order");
        last = r.getFrame();
        check(r.isOffloaded(), "offloaded: " + r.toJson());
        check(Arrays.equals(out[0], want[f]), "frame " + f + " equals its local run");
      }
      check(s.pending() == 0, "none pending");
      expect(IllegalArgumentException.class, () -> s.submit(new float[3]), "a wrong frame");
    }
  }

  static void wrongArguments() throws Exception {
    Path model = Paths.get(need("tandem.mnist"));
    try (Interpreter in = new Interpreter(model.toFile())) {
      float[][] out = new float[1][10];
      IllegalArgumentException e =
          expect(IllegalArgumentException.class, () -> in.run(new float[1][28][28], out), "rank 3 for rank 4");
      check(e.getMessage().contains("rank 4"), e.getMessage());
      e = expect(IllegalArgumentException.class, () -> in.run(new float[1][1][28][27], out), "27 for 28");
      check(e.getMessage().contains("dimension 3 is 27"), e.getMessage());
      float[][][][] ragged = new float[1][1][28][28];
      ragged[0][0][5] = new float[3];
      expect(IllegalArgumentException.class, () -> in.run(ragged, out), "a ragged array");
      ragged[0][0][5] = null;
      expect(IllegalArgumentException.class, () -> in.run(ragged, out), "a null row");
      e = expect(IllegalArgumentException.class, () -> in.run(new int[1][1][28][28], out), "ints for floats");
      check(e.getMessage().contains("float"), e.getMessage());
      float[][][][] x = new float[1][1][28][28];
      expect(IllegalArgumentException.class, () -> in.run(x, new float[1][9]), "an output of 9");
      expect(IllegalArgumentException.class, () -> in.run(x, new long[1][10]), "longs for floats");
      expect(IllegalArgumentException.class, () -> in.run(x, FloatBuffer.allocate(9)), "a short output buffer");
      expect(IllegalArgumentException.class, () -> in.run(FloatBuffer.allocate(783), out), "a short input buffer");
      expect(IllegalArgumentException.class, () -> in.run(ByteBuffer.allocate(3136).order(
          ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN), out),
          "a ByteBuffer not in native order");
      expect(IllegalArgumentException.class, () -> in.run(null, out), "a null input");
      expect(IllegalArgumentException.class, () -> in.run("pixels", out), "a string");
      expect(IllegalArgumentException.class,
          () -> in.runForMultipleInputsOutputs(new Object[] {x, x}, new HashMap<>()), "two inputs for one");
      Map<Integer, Object> bad = new HashMap<>();
      bad.put(3, out);
      expect(IllegalArgumentException.class, () -> in.runForMultipleInputsOutputs(new Object[] {x}, bad), "output 3");
      expect(IllegalArgumentException.class, () -> in.getInputTensor(1), "input 1");
      expect(IllegalArgumentException.class, () -> in.getOutputTensor(-1), "output -1");
      e = expect(IllegalArgumentException.class, () -> in.getInputIndex("nope"), "an unknown input");
      check(e.getMessage().contains("'nope'"), e.getMessage());
      expect(IllegalArgumentException.class, () -> in.getOutputIndex("nope"), "an unknown output");
      check(in.getLastReport() == null, "nothing ran after all those");
      in.run(x, out);
      check(in.getLastReport() != null, "it still runs");
    }
  }

  static void deadHandheld() throws Exception {
    String addr;
    try (ServerSocket s = new ServerSocket(0)) {
      addr = "127.0.0.1:" + s.getLocalPort();
    }
    Path model = Paths.get(need("tandem.mnist"));
    Interpreter.Options o = new Interpreter.Options()
        .setHandheld(addr)
        .setKeysDir(need("tandem.keys"))
        .setRequireHandheld(true)
        .setRequireHandheldMillis(1500);
    TandemException e = expect(TandemException.class, () -> new Interpreter(model.toFile(), o), "a dead handheld");
    check(e.getMessage().contains(addr), "the message names " + addr + ": " + e.getMessage());
    System.out.println("     " + e);
    // Not required: frames run on the watch, saying why.
    Interpreter.Options lenient = new Interpreter.Options().setHandheld(addr).setKeysDir(need("tandem.keys"));
    try (Interpreter in = new Interpreter(model.toFile(), lenient)) {
      in.run(new float[1][1][28][28], new float[1][10]);
      FrameReport r = in.getLastReport();
      check(!r.isOffloaded() && r.getLocalReason() != null && r.getLocalReason().startsWith("no handheld"),
          "runs here, saying why: " + r.getLocalReason());
      check(in.getStatus().startsWith("unreachable"), in.getStatus());
    }
  }

  static void afterClose() throws Exception {
    Interpreter in = new Interpreter(new File(need("tandem.mnist")));
    FrameStream s = in.stream();
    in.close();
    in.close();
    float[][][][] x = new float[1][1][28][28];
    expect(IllegalStateException.class, () -> in.run(x, new float[1][10]), "run");
    expect(IllegalStateException.class, () -> in.getInputTensor(0), "getInputTensor");
    expect(IllegalStateException.class, in::getInputTensorCount, "getInputTensorCount");
    expect(IllegalStateException.class, in::getLastReport, "getLastReport");
    expect(IllegalStateException.class, in::getStatus, "getStatus");
    expect(IllegalStateException.class, () -> in.getOutputIndex("x"), "getOutputIndex");
    expect(IllegalStateException.class, () -> s.submit((Object) x), "stream submit");
    expect(IllegalStateException.class, s::pending, "stream pending");
  }

  static void badOptions() throws Exception {
    File mnist = new File(need("tandem.mnist"));
    IllegalArgumentException e = expect(IllegalArgumentException.class,
        () -> new Interpreter(mnist, new Interpreter.Options().setHandheld("127.0.0.1:9").setPlacement("sideways")),
        "a placement");
    check(e.getMessage().contains("sideways"), e.getMessage());
    e = expect(IllegalArgumentException.class,
        () -> new Interpreter(mnist, new Interpreter.Options().setHandheld("127.0.0.1:9").setLink("carrier-pigeon")),
        "a link");
    check(e.getMessage().contains("carrier-pigeon"), e.getMessage());
    expect(IllegalArgumentException.class, () -> new Interpreter.Options().setLatencyHintMillis(Double.NaN), "NaN");
    expect(IllegalArgumentException.class, () -> new Interpreter(null), "a null file");
    TandemException t = expect(TandemException.class, () -> new Interpreter(new File("/no/such/model.onnx")), "a missing file");
    check(t.getMessage().contains("/no/such/model.onnx"), t.getMessage());
    Path junk = WORK.resolve("junk.onnx");
    Files.write(junk, new byte[] {1, 2, 3, 4, 5});
    expect(TandemException.class, () -> new Interpreter(junk.toFile()), "not a model");
    Path empty = Files.createTempDirectory(WORK, "empty-keys");
    t = expect(TandemException.class,
        () -> new Interpreter(mnist, new Interpreter.Options().setHandheld(need("tandem.handheld")).setKeysDir(empty.toString())),
        "a keystore with no paired handheld");
    check(t.getMessage().contains("no paired handheld"), t.getMessage());
  }

  static void forged() throws Exception {
    expect(IllegalStateException.class, () -> Native.feed(987654321L, 0, new byte[4]), "feed on a forged handle");
    expect(IllegalStateException.class, () -> Native.run(-1), "run on a forged handle");
    expect(IllegalStateException.class, () -> Native.output(0, 0), "output on handle 0");
    Native.close(424242);
    expect(IllegalArgumentException.class,
        () -> Native.open(null, null, null, null, null, null, Double.NaN, 0, 0, null, null), "a null model");
    expect(IllegalArgumentException.class,
        () -> Native.open(need("tandem.mnist"), null, null, null, null, null, Double.NaN, 0, 0,
            new String[] {"x"}, new int[][] {null}), "a null shape");
    expect(IllegalArgumentException.class,
        () -> Native.open(need("tandem.mnist"), "127.0.0.1:9", null, null, null, null, Double.NaN,
            Double.POSITIVE_INFINITY, 0, null, null), "an endless wait");
    expect(IllegalArgumentException.class,
        () -> Native.open(need("tandem.mnist"), null, null, null, null, null, Double.POSITIVE_INFINITY, 0, 0,
            null, null), "an infinite hint");
    try (Interpreter in = new Interpreter(new File(need("tandem.mnist")))) {
      long h = in.handle();
      expect(IllegalArgumentException.class, () -> Native.feed(h, 0, null), "null data");
      expect(IllegalArgumentException.class, () -> Native.feed(h, 0, new byte[5]), "5 bytes for 3136");
      expect(IllegalArgumentException.class, () -> Native.feed(h, 7, new byte[3136]), "input 7");
      expect(IllegalArgumentException.class, () -> Native.feed(h, Integer.MIN_VALUE, new byte[0]), "input MIN_VALUE");
      expect(IllegalStateException.class, () -> Native.output(h, 0), "output before any run");
      expect(IllegalArgumentException.class, () -> Native.tensorShape(h, true, 99), "output 99");
      expect(IllegalStateException.class, () -> Native.streamTake(h), "take before a submit");
      expect(IllegalArgumentException.class, () -> Native.streamSubmit(h), "a frame without its input");
    }
  }

  static void tflite() throws Exception {
    Path model = Paths.get(need("tandem.tflite"));
    String shape = System.getProperty("tandem.tfliteShape");
    Npy x = Npy.read(Paths.get(need("tandem.tfliteInput")));
    Interpreter.Options o = shape == null ? new Interpreter.Options() : withShape(new Interpreter.Options(), shape);
    try (Interpreter in = new Interpreter(model.toFile(), o)) {
      compare(in, model, x, shape, 0, CLI_LOCAL);
    }
    try (Interpreter in = new Interpreter(model.toFile(), shape == null ? handheldOptions("handheld") : withShape(handheldOptions("handheld"), shape))) {
      FrameReport r = compare(in, model, x, shape, 0, cliHandheld("handheld"));
      check(r.isOffloaded(), "offloaded: " + r.toJson());
    }
  }
}
