// `seedflow audit <run>`: every artifact hash and lineage link of a run, read from the store the run used (the
// local folder by default, S3 through SEEDFLOW_S3_* as the other commands), without a Temporal server.

import { localPaths } from '../infra/local-stack.ts'
import { type AuditProblem, type AuditReport, auditRun, UnknownRunError } from '../records/audit.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { InvalidRunIdError } from '../store/keys.ts'
import { RunInputError } from './run-checkpoint.ts'

export class AuditFailedError extends Error {
  override name = 'AuditFailedError'
  constructor(readonly report: AuditReport) {
    const first = report.broken[0] as AuditProblem
    const hashes =
      first.expected !== undefined || first.actual !== undefined
        ? ` (expected sha256 ${first.expected ?? '-'}, actual ${first.actual ?? '-'})`
        : ''
    super(
      `audit of run ${report.runId} failed: ${report.broken.length} broken; the first: ${first.kind} ${first.key}` +
        `${hashes}, referenced by ${first.manifest}: ${first.message}`,
    )
  }
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = n
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`
}

/** The summary `seedflow audit` prints. */
export function formatAudit(r: AuditReport): string {
  const lines = [
    `audit of run ${r.runId} (${r.location})`,
    `  config sha256 ${r.configSha256}; seedflow ${r.seedflowVersions.join(', ') || '?'}`,
    `  manifests: ${r.manifests.phase} phase, ${r.manifests.iteration} iteration, ${r.manifests.retention} retention`,
    `  hyperparameter changes: ${r.hyperparameterChanges.length}`,
    ...r.hyperparameterChanges.map(
      (c) =>
        `    #${c.seq} ${c.source} at iteration ${c.iteration} (${c.phase}): ${JSON.stringify(c.overrides)} → config ${c.configSha256}`,
    ),
    `  artifacts checked: ${r.artifacts} (${formatBytes(r.bytes)} re-hashed), lineage links: ${r.links}`,
    `  pruned: ${r.pruned.length} (${formatBytes(r.pruned.reduce((n, p) => n + p.bytes, 0))}) by retention`,
    ...r.pruned.map((p) => `    ${p.key}: ${p.pruned.reason}`),
    ...(r.unexplainedConfigHashes.length > 0
      ? [
          `  warning: phase manifests with config hashes that neither run.json nor a hyperparameter change records: ${r.unexplainedConfigHashes.join(', ')}`,
        ]
      : []),
    `  broken: ${r.broken.length}`,
    ...r.broken.map((p) => `    ${p.kind} ${p.key} (in ${p.manifest}): ${p.message}`),
  ]
  return `${lines.join('\n')}\n`
}

export async function auditCommand(
  runId: string,
  io: { out(text: string): void } = { out: (t) => process.stdout.write(t) },
  store: ArtifactStore = storeFromEnv(localPaths().artifacts),
): Promise<AuditReport> {
  let report: AuditReport
  try {
    report = await auditRun(store, runId)
  } catch (error) {
    if (error instanceof UnknownRunError || error instanceof InvalidRunIdError)
      throw new RunInputError((error as Error).message)
    throw error
  }
  io.out(formatAudit(report))
  if (report.broken.length > 0) throw new AuditFailedError(report)
  io.out(`seedflow: audit of run ${runId} passed\n`)
  return report
}
