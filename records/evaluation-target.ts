// How an evaluation target (records/contracts.ts) is named in status lines and stored evaluations. Pure: the
// workflows read it too.
import type { EvaluationTarget } from './contracts.ts'

export function targetLabel(target: EvaluationTarget): string {
  return target.kind === 'iteration' ? `iteration ${target.iteration}` : target.kind === 'base' ? 'base' : 'stage 1'
}
