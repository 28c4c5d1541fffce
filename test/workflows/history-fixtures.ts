import { fileURLToPath } from 'node:url'

/** Recorded from a real run: `SEEDFLOW_RECORD_HISTORIES=1 npm run test:integration -- register-run`. */
export const HISTORY_FIXTURE = fileURLToPath(new URL('../fixtures/histories/register-run.json', import.meta.url))

/** A committed history by name: `test/fixtures/histories/<name>.json`. */
export function historyFixture(name: string): string {
  return fileURLToPath(new URL(`../fixtures/histories/${name}.json`, import.meta.url))
}
