package dev.tandem;

/**
 * What Tandem refuses or cannot do: a model it cannot load, a handheld it requires and cannot
 * reach, a frame that failed. Unchecked, as LiteRT's errors are; the message gives the reason
 * (and the handheld's address, where one is involved).
 */
public class TandemException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception with the reason.
   *
   * @param message why Tandem refused or failed
   */
  public TandemException(String message) {
    super(message);
  }
}
