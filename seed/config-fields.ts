// The run configuration's field types and bounds, shared by its schemas (seed/config.ts, seed/env-config.ts).
import { z } from 'zod'

/** Longest path of a file or folder in a run configuration (Linux's PATH_MAX). */
export const MAX_PATH_LENGTH = 4096
/** Longest name in a run configuration (an annotator's model name). */
export const MAX_NAME_LENGTH = 256
/** Longest URL in a run configuration (an annotator's endpoint). */
export const MAX_URL_LENGTH = 2048
/** An environment variable's name (the annotator's `apiKeyEnv`). */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Characters as zod counts them for a length bound: Unicode code points. */
export function codePoints(text: string): number {
  let n = text.length
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--
        i++
      }
    }
  }
  return n
}

/** The too-long message, without echoing the value (a refusal must stay small: it travels through gRPC). */
export const tooLong = (max: number) => ({
  abort: true,
  error: (issue: { input?: unknown }) =>
    `at most ${max} characters, got ${typeof issue.input === 'string' ? codePoints(issue.input) : 'more'}`,
})
export const boundedString = (max: number) => z.string().max(max, tooLong(max)).min(1)

export const int = (min = 0) => z.number().int().min(min)
export const positiveInt = () => z.number().int().positive()
export const probability = () => z.number().min(0).max(1)
/** No cap: a learning rate that diverges is caught where it does, by the update's non-finite loss check. */
export const lr = () => z.number().positive().finite()
export const coefficient = () => z.number().min(0).finite()
