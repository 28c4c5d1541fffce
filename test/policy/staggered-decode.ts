// Decoding with sequences joining a running batch at chosen steps: shared by the decode-batch and fused-decode tests.
import type { DecodeBatch, SampledToken, SequenceSpec } from '../../policy/decode-batch.ts'

/** Decodes `n` tokens of each spec, admitting spec i before step `joinAt[i]`; returns each sequence's tokens
 * and the row it took. */
export async function staggered(
  batch: DecodeBatch,
  specs: SequenceSpec[],
  joinAt: number[],
  n: number,
): Promise<{ tokens: SampledToken[][]; rows: number[] }> {
  const tokens: SampledToken[][] = specs.map(() => [])
  const rows: number[] = specs.map(() => -1)
  const ofRow = new Map<number, number>()
  const take = (t: SampledToken) => {
    const i = ofRow.get(t.row) as number
    tokens[i]?.push(t)
    if ((tokens[i] as SampledToken[]).length === n) {
      batch.release(t.row)
      ofRow.delete(t.row)
    }
  }
  for (let step = 0; ; step++) {
    for (const t of await batch.step()) take(t) // the rows that were live before this step's joiners
    const joining = specs.flatMap((_, i) => (joinAt[i] === step ? [i] : []))
    const first = await batch.admit(joining.map((i) => specs[i] as SequenceSpec))
    first.forEach((t, j) => {
      const i = joining[j] as number
      rows[i] = t.row
      ofRow.set(t.row, i)
      take(t)
    })
    if (ofRow.size === 0 && joinAt.every((j) => j <= step)) break
  }
  return { tokens, rows }
}
