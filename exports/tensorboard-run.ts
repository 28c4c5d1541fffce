// A run's scalars as a TensorBoard event file: every headline metric of every complete iteration under its own
// name (`rollout/success_rate`, `update/opd_loss`, …) plus `rollout/tokens_per_second`, and every evaluation as
// `eval/<split>/success` and `eval/<split>/macro_success`. The step is the Stage 2 updates done, the axis verl
// and the reference log against (their global step): iteration k's metrics at k + 1, its checkpoint's evaluation
// at k + 1, the start evaluations at 0. Wall times: the iteration manifest's time (the evaluation of an
// iteration's checkpoint runs right after it); the start evaluations carry the run's creation time.
import { DamagedRunError } from '../report/damage.ts'
import { readRunData } from '../report/run-data.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { type ScalarPoint, writeEventFile } from './tensorboard/writer.ts'

const seconds = (iso: string) => Date.parse(iso) / 1000

/** The scalar points of a run, in step order (pure over the store's contents). */
export async function runScalars(
  store: ArtifactStore,
  runId: string,
): Promise<{ points: ScalarPoint[]; start: number }> {
  const run = await readRunData(store, runId)
  if (run.damaged.length > 0) throw new DamagedRunError(runId, run.damaged) // an export leaves nothing out
  const start = seconds(run.record.createdAt)
  const points: ScalarPoint[] = []
  const wallOf = new Map<number, number>()
  for (const it of run.iterations) {
    const step = it.iteration + 1
    const wallTime = seconds(it.finishedAt)
    wallOf.set(step, wallTime)
    for (const [tag, value] of Object.entries(it.metrics)) {
      if (typeof value === 'number' && Number.isFinite(value)) points.push({ tag, step, wallTime, value })
    }
    if (it.rolloutTokensPerSecond !== null)
      points.push({ tag: 'rollout/tokens_per_second', step, wallTime, value: it.rolloutTokensPerSecond })
  }
  for (const e of run.evaluations) {
    if (e.kind === 'base' && run.evaluations.some((x) => x.kind === 'stage1' && x.split === e.split)) continue
    const step = e.kind === 'iteration' ? e.iteration + 1 : 0
    const wallTime = wallOf.get(step) ?? start
    points.push({ tag: `eval/${e.split}/success`, step, wallTime, value: e.success })
    if (e.macroSuccess !== null)
      points.push({ tag: `eval/${e.split}/macro_success`, step, wallTime, value: e.macroSuccess })
  }
  return { points: points.sort((a, b) => a.step - b.step), start }
}

/** Writes `<outDir>/events.out.tfevents.<start>.<host>`; the file-version event carries the run's creation time. */
export async function exportTensorBoard(
  store: ArtifactStore,
  runId: string,
  outDir: string,
  opts: { onProgress?: (msg: string) => void } = {},
): Promise<{ files: string[]; iterations: number }> {
  const { points, start } = await runScalars(store, runId)
  const file = await writeEventFile(outDir, points, { fileVersionWallTime: start })
  const steps = new Set(points.filter((p) => p.step > 0 && !p.tag.startsWith('eval/')).map((p) => p.step))
  opts.onProgress?.(`${points.length} scalars over ${steps.size} iterations; open with: tensorboard --logdir ${outDir}`)
  return { files: [file], iterations: steps.size }
}
