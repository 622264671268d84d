package dev.tandem;

/**
 * What one frame did: whether the handheld ran part of it, why it ran on the watch otherwise,
 * its latency, the cut it ran at, and the full report as JSON. Returned by {@link
 * Interpreter#getLastReport()} and {@link FrameStream#take(java.util.Map)}.
 */
public final class FrameReport {
  private final long frame;
  private final boolean offloaded;
  private final String localReason;
  private final String fallback;
  private final String cut;
  private final double latencyMillis;
  private final double wearableMillis;
  private final double linkMillis;
  private final double handheldMillis;
  private final long upBytes;
  private final long downBytes;
  private final String json;

  /** Built by the native library. */
  FrameReport(
      long frame,
      boolean offloaded,
      String localReason,
      String fallback,
      String cut,
      double latencyMillis,
      double wearableMillis,
      double linkMillis,
      double handheldMillis,
      long upBytes,
      long downBytes,
      String json) {
    this.frame = frame;
    this.offloaded = offloaded;
    this.localReason = localReason;
    this.fallback = fallback;
    this.cut = cut;
    this.latencyMillis = latencyMillis;
    this.wearableMillis = wearableMillis;
    this.linkMillis = linkMillis;
    this.handheldMillis = handheldMillis;
    this.upBytes = upBytes;
    this.downBytes = downBytes;
    this.json = json;
  }

  /**
   * The frame's number in its session (from 1).
   *
   * @return the frame number
   */
  public long getFrame() {
    return frame;
  }

  /**
   * Whether the handheld answered this frame (it ran part or all of the model).
   *
   * @return true when offloaded
   */
  public boolean isOffloaded() {
    return offloaded;
  }

  /**
   * Why the frame ran on the watch: the planner's numbers, no handheld (and the error), the
   * handheld's refusal, the placement, or a fallback.
   *
   * @return the reason, or null when the frame was offloaded
   */
  public String getLocalReason() {
    return localReason;
  }

  /**
   * Why a frame sent to the handheld ran on the watch after all (link lost, refusal, deadline).
   *
   * @return the reason, or null when there was no fallback
   */
  public String getFallback() {
    return fallback;
  }

  /**
   * From the frame's start to its delivery.
   *
   * @return the latency in milliseconds
   */
  public double getLatencyMillis() {
    return latencyMillis;
  }

  /**
   * The watch's compute for this frame.
   *
   * @return milliseconds
   */
  public double getWearableMillis() {
    return wearableMillis;
  }

  /**
   * The link both ways and queueing: from sending to the answer, less the handheld's compute.
   *
   * @return milliseconds (0 when not offloaded)
   */
  public double getLinkMillis() {
    return linkMillis;
  }

  /**
   * The handheld's compute, as it reported.
   *
   * @return milliseconds (0 when not offloaded)
   */
  public double getHandheldMillis() {
    return handheldMillis;
  }

  /**
   * Bytes sent to the handheld.
   *
   * @return bytes up
   */
  public long getUpBytes() {
    return upBytes;
  }

  /**
   * Bytes received from the handheld.
   *
   * @return bytes down
   */
  public long getDownBytes() {
    return downBytes;
  }

  /**
   * The cut the frame ran under: which layers ran on the watch.
   *
   * @return the cut's key
   */
  public String getCut() {
    return cut;
  }

  /**
   * The whole report as one JSON object, with every field the Rust API reports (times, bytes,
   * model-based energy, engines).
   *
   * @return the report as JSON
   */
  public String toJson() {
    return json;
  }

  /**
   * The report as JSON.
   *
   * @return {@link #toJson()}
   */
  @Override
  public String toString() {
    return json;
  }
}
