import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { NONDIFFERENTIABLE, type OpDef } from '../../engine/op-def.ts'
import { OPS, type OpName } from '../../engine/ops/index.ts'
import { createLocalEngine } from '../../engine/runtime.ts'
import { GRAD_CASES } from './grad-cases.ts'
import { gradcheck } from './gradcheck.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())

describe('gradient rules match central finite differences', () => {
  for (const [op, cases] of Object.entries(GRAD_CASES)) {
    for (const c of cases ?? []) {
      it(`${op}: ${c.name}`, async () => {
        const { checked, mismatches } = await gradcheck(engine, c)
        assert.ok(checked > 0, 'no gradient elements were checked')
        const shown = mismatches
          .slice(0, 5)
          .map((m) => `${m.input}[${m.index}]: analytic ${m.analytic}, numeric ${m.numeric}`)
        assert.deepEqual(shown, [], `${mismatches.length} of ${checked} elements differ`)
      })
    }
  }
})

describe('gradcheck coverage', () => {
  it('every differentiable op in OPS has a case, and no non-differentiable op has one', () => {
    const missing: string[] = []
    const extra: string[] = []
    for (const name of Object.keys(OPS) as OpName[]) {
      const differentiable = (OPS[name] as OpDef).vjp !== NONDIFFERENTIABLE
      const cases = GRAD_CASES[name]?.length ?? 0
      if (differentiable && cases === 0) missing.push(name)
      if (!differentiable && cases > 0) extra.push(name)
    }
    assert.deepEqual({ missing, extra }, { missing: [], extra: [] })
  })
})
