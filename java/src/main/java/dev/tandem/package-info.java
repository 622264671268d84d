/**
 * Tandem's Java API: run an ONNX model on a watch, split with a paired phone.
 *
 * <p>Shaped like LiteRT's {@code org.tensorflow.lite.Interpreter}, so that an Android developer
 * changes an import and a few options, not a habit: {@link dev.tandem.Interpreter} with {@code
 * run} and {@code runForMultipleInputsOutputs}, {@link dev.tandem.Tensor} for the model's inputs
 * and outputs, {@link dev.tandem.Interpreter.Options} for the handheld, the keystore, the latency
 * hint and the placement; {@link dev.tandem.FrameReport} says where each frame ran and why, and
 * {@link dev.tandem.FrameStream} pipelines frames. The native side is {@code libtandem_jni.so},
 * loaded with {@code System.loadLibrary("tandem_jni")}.
 *
 * <p>Errors are as LiteRT raises them: {@link java.lang.IllegalArgumentException} for a wrong
 * shape, type or index, {@link java.lang.IllegalStateException} after {@code close()}, and the
 * unchecked {@link dev.tandem.TandemException} for what Tandem refuses or cannot do, with the
 * reason.
 */
package dev.tandem;
