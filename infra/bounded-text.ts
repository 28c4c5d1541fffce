// Bounded text for anything that leaves a process as a message: an activity's failure (Temporal's gRPC limit is
// 4 MB, and a failure that does not fit is never recorded: the attempt times out instead), a CLI error, a run's
// refusal. A cut is marked, so nobody mistakes a shortened message for the whole one. Pure: workflows import it.

/** Most characters of a message that leaves an activity, a workflow or a command. */
export const MESSAGE_LIMIT = 4000

/** `text` if it fits in `limit` characters, else its start and a marker that says how much was cut. */
export function bounded(text: string, limit = MESSAGE_LIMIT): string {
  if (text.length <= limit) return text
  const code = text.charCodeAt(limit - 1)
  const end = code >= 0xd800 && code <= 0xdbff ? limit - 1 : limit // never half a surrogate pair
  return `${text.slice(0, end)} … (${text.length - end} more characters cut)`
}

/** An error's message (or the text of a thrown non-error), bounded. */
export function boundedMessage(error: unknown, limit = MESSAGE_LIMIT): string {
  return bounded(error instanceof Error ? error.message || error.name : String(error), limit)
}
