// Hyperparameter overrides from the command line: `--set stage2.lr=1e-4` (repeatable) and `--overrides file.json`
// ({ "stage2": { "lr": 1e-4 } }), the file first and every --set on top. The run validates the result against its
// configuration (seed/hyperparameters.ts) and rejects it with every bad field path.
import { readFile } from 'node:fs/promises'
import { deepMerge } from '../seed/hyperparameters.ts'
import { CliError } from './run-client.ts'

/** `a.b=value` → `{ a: { b: value } }`; the value as JSON when it parses (numbers, booleans), else as text. */
export function parseAssignment(text: string): Record<string, unknown> {
  const eq = text.indexOf('=')
  const path = eq < 0 ? '' : text.slice(0, eq).trim()
  if (!path || path.split('.').some((part) => part === ''))
    throw new CliError(`--set ${text}: expected path=value, e.g. stage2.lr=1e-4`)
  const raw = text.slice(eq + 1).trim()
  let value: unknown = raw
  try {
    value = JSON.parse(raw)
  } catch {
    // a bare word: an enum value such as `mean`
  }
  return path
    .split('.')
    .reverse()
    .reduce<unknown>((inner, key) => ({ [key]: inner }), value) as Record<string, unknown>
}

/** The overrides of `--overrides <file>` and `--set` (undefined when neither was given). */
export async function readOverrides(options: { set?: string[]; overrides?: string }): Promise<unknown> {
  let merged: unknown
  if (options.overrides) {
    let text: string
    try {
      text = await readFile(options.overrides, 'utf8')
    } catch (error) {
      throw new CliError(`cannot read the overrides file ${options.overrides}: ${(error as Error).message}`)
    }
    try {
      merged = JSON.parse(text)
    } catch (error) {
      throw new CliError(`${options.overrides} is not JSON: ${(error as Error).message}`)
    }
    if (typeof merged !== 'object' || merged === null || Array.isArray(merged))
      throw new CliError(`${options.overrides}: expected an object such as {"stage2": {"lr": 1e-4}}`)
  }
  for (const assignment of options.set ?? []) merged = deepMerge(merged ?? {}, parseAssignment(assignment))
  return merged
}
