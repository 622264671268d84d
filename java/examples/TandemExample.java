import dev.tandem.FrameReport;
import dev.tandem.FrameStream;
import dev.tandem.Interpreter;
import dev.tandem.Tensor;
import java.io.File;
import java.util.Arrays;

/**
 * Tandem's Java API in a few lines, as an Android app would call it: an MNIST-shaped classifier
 * (the zoo's, with generated weights: which digit wins is arbitrary, the point is that the watch
 * alone and the handheld give the same scores) on the watch alone, then on a paired handheld,
 * then a pipelined stream of frames.
 *
 * <pre>
 * java -Djava.library.path=target/debug -cp target/java/tandem.jar:CLASSES TandemExample \
 *     models/cache/zoo/mnist.onnx [HOST:PORT KEYS_DIR [LINK]]
 * </pre>
 */
public final class TandemExample {
  private TandemExample() {}

  /**
   * Runs the example.
   *
   * @param args the model, then optionally the handheld's address, the paired keystore and an
   *     emulated link profile
   */
  public static void main(String[] args) {
    File model = new File(args[0]);
    float[][][][] image = new float[1][1][28][28];
    for (int y = 4; y < 24; y++) {
      image[0][0][y][14] = 1f; // a vertical stroke: a "1", more or less
    }

    try (Interpreter watch = new Interpreter(model)) {
      Tensor in = watch.getInputTensor(0);
      Tensor out = watch.getOutputTensor(0);
      System.out.println("model: " + in + " -> " + out);
      float[][] scores = new float[1][10];
      watch.run(image, scores);
      print("watch alone", scores[0], watch.getLastReport());
    }
    if (args.length < 3) {
      return;
    }

    Interpreter.Options options =
        new Interpreter.Options()
            .setHandheld(args[1])
            .setKeysDir(args[2])
            .setLink(args.length > 3 ? args[3] : null)
            .setPlacement("handheld")
            .setRequireHandheld(true);
    try (Interpreter paired = new Interpreter(model, options)) {
      System.out.println("status: " + paired.getStatus());
      float[][] scores = new float[1][10];
      paired.run(image, scores);
      print("with the handheld", scores[0], paired.getLastReport());

      FrameStream stream = paired.stream();
      for (int i = 0; i < 8; i++) {
        stream.submit((Object) image);
      }
      double total = 0;
      int frames = 0;
      while (stream.pending() > 0) {
        total += stream.take(scores).getLatencyMillis();
        frames++;
      }
      System.out.printf("stream: %d frames, mean latency %.1f ms%n", frames, total / frames);
    }
  }

  private static void print(String where, float[] scores, FrameReport r) {
    int best = 0;
    for (int i = 1; i < scores.length; i++) {
      if (scores[i] > scores[best]) {
        best = i;
      }
    }
    System.out.printf(
        "%s: digit %d, offloaded %s, %s, %.1f ms, cut %s%n  scores %s%n",
        where,
        best,
        r.isOffloaded(),
        r.getLocalReason() == null ? "no local reason" : "local: " + r.getLocalReason(),
        r.getLatencyMillis(),
        r.getCut(),
        Arrays.toString(scores));
  }
}
