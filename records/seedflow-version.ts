import { readFileSync } from 'node:fs'

/** The version in package.json, recorded in run records and manifests. */
export const SEEDFLOW_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version
