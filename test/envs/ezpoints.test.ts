import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { cardValue, evaluateFormula, ezpoints, generateEzpoints, parseEzpoints } from '../../envs/ezpoints/index.ts'

const say = (action: string) => ezpoints.formatResponse(action)

describe('ezpoints', () => {
  it('deals two cards that make 12 by sum or product', () => {
    for (let seed = 0; seed < 300; seed++) {
      const [a, b] = generateEzpoints({ split: 'train', seed }).cards.map(cardValue) as [number, number]
      assert.ok(a + b === 12 || a * b === 12, `${a}, ${b}`)
    }
  })

  it('pays 10 for a formula equal to 12 that uses both cards, then ends', () => {
    const ref = ezpoints.task('train', 5)
    const [a, b] = generateEzpoints(ref).cards.map(cardValue) as [number, number]
    const ep = ezpoints.reset(ref)
    for (const e of [String(a), a + b === 12 ? '+' : '*', String(b)]) assert.equal(ep.step(say(e)).reward, 0)
    const r = ep.step(say('='))
    assert.deepEqual([r.reward, r.done, r.info.won], [10, true, true])
  })

  it('ignores a number that is not on the cards', () => {
    const ref = ezpoints.task('train', 5)
    const values = generateEzpoints(ref).cards.map(cardValue)
    const absent = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10'].find(
      (n) => !values.includes(Number(n)),
    ) as string
    const ep = ezpoints.reset(ref)
    const before = ep.observation
    const r = ep.step(say(absent))
    assert.deepEqual([r.valid, r.reward, r.observation], [true, 0, before])
  })

  it('ends with 0 on "=" when the formula is not 12', () => {
    const ep = ezpoints.reset(ezpoints.task('train', 1))
    const r = ep.step(say('='))
    assert.deepEqual([r.reward, r.done, r.info.won], [0, true, false])
  })

  it('truncates once the formula holds more than 5 elements', () => {
    const ep = ezpoints.reset(ezpoints.task('train', 1))
    let r = ep.step(say('+'))
    for (let i = 0; i < 5; i++) r = ep.step(say('+'))
    assert.deepEqual([r.done, ep.stepCount, r.info.won], [true, 6, false])
  })

  it('evaluates + and * with precedence and rejects malformed formulas', () => {
    assert.equal(evaluateFormula('2+5*2'), 12)
    assert.equal(evaluateFormula('3*4'), 12)
    assert.equal(evaluateFormula('3+'), null)
    assert.equal(evaluateFormula('*3'), null)
  })

  it('reads the JSON "action" value and rejects anything else', () => {
    assert.deepEqual(parseEzpoints('{"thoughts": "x", "action": "10"}'), { ok: true, action: '10' })
    assert.deepEqual(parseEzpoints('{"action": *}'), { ok: true, action: '*' })
    assert.equal(parseEzpoints('{"action": "11"}').ok, false)
    assert.equal(parseEzpoints('{"action": "1 + 2"}').ok, false)
  })
})
