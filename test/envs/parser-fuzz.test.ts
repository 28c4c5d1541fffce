// Feeds 10,000 random and adversarial strings to every environment's parser: none may throw.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { ENVS } from '../../envs/index.ts'
import { mulberry32, pick, type Rng, randInt } from '../../envs/rng.ts'

const PIECES = [
  '<think>',
  '</think>',
  '<action>',
  '</action>',
  '<search>',
  '</search>',
  '<answer>',
  '</answer>',
  '<information>',
  '"action":',
  '"action"',
  '{',
  '}',
  '"',
  'search[',
  'click[',
  ']',
  '[',
  'up',
  'left',
  '12',
  '=',
  '*',
  'go to cabinet 1',
  '\n',
  '\u0000',
  '\ud800',
  '你好',
  '🙂',
  '\u202e',
  ' ',
]

function randomString(rng: Rng): string {
  const kind = randInt(rng, 0, 5)
  if (kind === 0) return ''
  if (kind === 1) {
    let s = ''
    const n = randInt(rng, 1, 200)
    for (let i = 0; i < n; i++) s += String.fromCharCode(randInt(rng, 0, 0x10000))
    return s
  }
  let s = ''
  const n = randInt(rng, 1, 40)
  for (let i = 0; i < n; i++) s += pick(rng, PIECES)
  if (kind === 4 && rng.next() < 0.01) s = s.repeat(20_000) // occasionally huge (hundreds of KB to MB)
  return s
}

for (const [name, env] of Object.entries(ENVS)) {
  it(`${name}: parser survives 10,000 random and adversarial strings`, () => {
    const rng = mulberry32(42)
    let valid = 0
    for (let i = 0; i < 10_000; i++) {
      const r = env.parse(randomString(rng))
      assert.equal(typeof r.ok, 'boolean')
      if (r.ok) {
        valid++
        assert.equal(typeof r.action, 'string')
      } else assert.ok(r.reason.length > 0)
    }
    assert.ok(valid < 10_000)
  })
}
