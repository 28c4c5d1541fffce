/** A GGUF file or tensor that seedflow cannot read: the message names the file or tensor and what is wrong. */
export class GgufError extends Error {
  override name = 'GgufError'
}
