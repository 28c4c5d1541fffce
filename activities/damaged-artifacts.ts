/** One stored artifact that does not hold what was recorded for it (an AuditProblem is one). */
export interface Damage {
  kind: string
  key: string
  message: string
}

/**
 * Stored artifacts that a run would reuse do not hash to what was recorded (bit rot, a partial restore, a file
 * edited by hand). Fatal for the activity: the run waits for an operator, who restores or deletes them.
 */
export class DamagedArtifactsError extends Error {
  override name = 'DamagedArtifactsError'
  constructor(
    readonly runId: string,
    readonly damaged: readonly Damage[],
  ) {
    const n = damaged.length
    const lines = damaged.map(
      (d) => `  ${d.kind} ${d.message.startsWith(d.key) ? d.message : `${d.key}: ${d.message}`}`,
    )
    super(
      `run ${runId}: ${n} stored artifact${n === 1 ? '' : 's'} it would reuse ${n === 1 ? 'is' : 'are'} damaged:\n` +
        `${lines.join('\n')}\n` +
        'restore them from a backup and retry, or delete each damaged output (with the folder store, its file) and ' +
        'retry so that the phase that wrote it computes it again (`seedflow audit` lists every problem, older ' +
        'attempts included)',
    )
  }
}
