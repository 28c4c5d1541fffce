import { fileURLToPath } from 'node:url'

/** A committed history by name: `test/fixtures/histories/<name>.json` (`SEEDFLOW_RECORD_HISTORIES=1 npm run test:integration -- seed-run` records them). */
export function historyFixture(name: string): string {
  return fileURLToPath(new URL(`../fixtures/histories/${name}.json`, import.meta.url))
}
