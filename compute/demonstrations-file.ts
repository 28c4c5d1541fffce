// Demonstrations from a file (`warmstart.demonstrationsFile`): one JSON object a line, `{prompt, response}`, for an
// environment without an expert. Every line is checked; a bad one is refused with its line number and field.
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { z } from 'zod'
import { CorePhaseError } from './policy.ts'

const LINE = z.strictObject({ prompt: z.string().min(1), response: z.string().min(1) })

export interface FileDemonstration {
  prompt: string
  response: string
}

/** The file's demonstrations and its sha256 (what the warm-start records as its input). */
export async function readDemonstrationsFile(path: string): Promise<{ demos: FileDemonstration[]; sha256: string }> {
  let bytes: Buffer
  try {
    bytes = await readFile(path)
  } catch (error) {
    throw new CorePhaseError(`warmstart.demonstrationsFile ${path}: ${(error as Error).message}`)
  }
  const demos: FileDemonstration[] = []
  const lines = bytes.toString('utf8').split('\n')
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') continue
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      throw new CorePhaseError(`warmstart.demonstrationsFile ${path}, line ${i + 1}: not JSON`)
    }
    const parsed = LINE.safeParse(value)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new CorePhaseError(
        `warmstart.demonstrationsFile ${path}, line ${i + 1}: ${issue?.path.join('.') || '(line)'}: ${issue?.message}` +
          ' (each line is {"prompt": "…", "response": "…"})',
      )
    }
    demos.push(parsed.data)
  }
  if (demos.length === 0) throw new CorePhaseError(`warmstart.demonstrationsFile ${path}: no demonstrations`)
  return { demos, sha256: createHash('sha256').update(bytes).digest('hex') }
}
