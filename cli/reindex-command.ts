// `seedflow store reindex`: after a folder store was copied, restored or moved (every file then has a new inode,
// and so no checksum sidecar of its own), read each file's record once so that the next reads are cheap again,
// and list the files that no record vouches for. The store reads the same without it, only slower at first.
import { stat } from 'node:fs/promises'
import { localPaths } from '../infra/local-stack.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { FsArtifactStore, type ReindexReport } from '../store/fs-store.ts'
import { RunInputError } from './run-checkpoint.ts'

/** Files that no record vouches for: the store refuses to read them. */
export class UnverifiedFilesError extends Error {
  override name = 'UnverifiedFilesError'
  constructor(
    readonly root: string,
    readonly report: ReindexReport,
  ) {
    const first = report.unverified[0]
    super(
      `${report.unverified.length} file(s) in ${root} have no checksum record that matches their bytes; the first: ` +
        `${first?.key} (${first?.message}); restore them from the store's backup, or find the runs they belong ` +
        'to with `seedflow audit <run>`',
    )
  }
}

/** The summary `seedflow store reindex` prints. */
export function formatReindex(root: string, id: string, r: ReindexReport): string {
  const lines = [
    `store ${root} (id ${id})`,
    `  files read through their own checksum record: ${r.recorded}`,
    `  files given a record for their new inode (copied, restored or moved): ${r.adopted}`,
    ...(r.matched > 0
      ? [`  files that match a record but could not be given one (the store cannot be written): ${r.matched}`]
      : []),
    `  files no record vouches for: ${r.unverified.length}`,
    ...r.unverified.map((u) => `    ${u.key}: ${u.message}`),
  ]
  return `${lines.join('\n')}\n`
}

export async function reindexCommand(
  io: { out(text: string): void } = { out: (t) => process.stdout.write(t) },
  store: ArtifactStore = storeFromEnv(localPaths().artifacts),
): Promise<ReindexReport> {
  if (!(store instanceof FsArtifactStore))
    throw new RunInputError(
      `store reindex applies to a folder store; ${store.location} keeps each object's sha256 with the object`,
    )
  if (
    !(await stat(store.root).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  )
    throw new RunInputError(`no folder store at ${store.root}: set SEEDFLOW_ARTIFACTS_DIR to the folder of the store`)
  const report = await store.reindex()
  io.out(formatReindex(store.root, (await store.identity()).id, report))
  if (report.unverified.length > 0) throw new UnverifiedFilesError(store.root, report)
  return report
}
