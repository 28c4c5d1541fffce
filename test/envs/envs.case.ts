// One conformance suite for every environment (docs/design.md §11.3, §8): each `it` checks one behaviour.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { trajectoryText } from '../../envs/core.ts'
import { mixSeed, mulberry32, type Rng } from '../../envs/rng.ts'
import type { Env, Episode, Split, TaskRef, Trajectory } from '../../envs/types.ts'
import { SPLITS } from '../../envs/types.ts'

/** Task anchors that skill insertion looks for (docs/algorithm.md §5), and the turn anchor. */
export const TASK_ANCHOR = /^.*(Your task is to:|Your current task is:|Your task is:|Your question:|Your goal is)/m
export const TURN_ANCHOR = /Now it's your turn/

export interface ConformanceOptions {
  /** Tasks per split for the expert check in CI. */
  expertSample: number
  /** Minimum expert solve rate (1 for sokoban, ezpoints, household; 0.99 for shop and searchqa). */
  expertMinRate: number
  /** Episodes for the random-policy baseline. */
  randomSample: number
}

export function runPolicy(env: Env, ref: TaskRef, choose: (ep: Episode) => string): Trajectory {
  const ep = env.reset(ref)
  while (!ep.done) ep.step(choose(ep))
  return ep.trajectory()
}

export function randomPolicy(env: Env, rng: Rng): (ep: Episode) => string {
  return (ep) => env.formatResponse(ep.randomAction(rng), 'random')
}

export function expertPolicy(env: Env): (ep: Episode) => string {
  return (ep) => env.formatResponse(ep.expertAction(), '')
}

const UNUSABLE = ['', 'garbage', '<action>', '<think>', '</action><action>', '\u0000\uffff', 'x'.repeat(10_000)]

export function describeEnvConformance(env: Env, options: ConformanceOptions): void {
  describe(`env conformance: ${env.name}`, () => {
    it('gives the same episode for the same seed', () => {
      for (const split of SPLITS) {
        const ref = env.task(split, 7)
        const a = runPolicy(env, ref, randomPolicy(env, mulberry32(11)))
        const b = runPolicy(env, ref, randomPolicy(env, mulberry32(11)))
        assert.deepEqual(a, b)
        assert.equal(env.reset(ref).prompt(), env.reset(ref).prompt())
      }
    })

    it('gives different tasks for different seeds', () => {
      const texts = new Set<string>()
      for (let seed = 0; seed < 20; seed++) texts.add(env.reset(env.task('train', seed)).prompt())
      assert.ok(texts.size >= 5, `only ${texts.size} distinct first prompts in 20 seeds`)
    })

    it('resets idempotently', () => {
      const ref = env.task('train', 3)
      const ep = env.reset(ref)
      const first = { obs: ep.observation, prompt: ep.prompt(), compact: ep.prompt({ compact: true }) }
      const policy = randomPolicy(env, mulberry32(5))
      for (let i = 0; i < 3 && !ep.done; i++) ep.step(policy(ep))
      ep.reset()
      ep.reset()
      assert.deepEqual({ obs: ep.observation, prompt: ep.prompt(), compact: ep.prompt({ compact: true }) }, first)
      assert.equal(ep.stepCount, 0)
      assert.equal(ep.done, false)
      const again = runPolicy(env, ref, randomPolicy(env, mulberry32(5)))
      const fresh = ep
      const replay = randomPolicy(env, mulberry32(5))
      while (!fresh.done) fresh.step(replay(fresh))
      assert.deepEqual(fresh.trajectory(), again)
    })

    it('renders the same prompt twice', () => {
      const ep = env.reset(env.task('validation', 1))
      assert.equal(ep.prompt(), ep.prompt())
      assert.equal(ep.prompt({ compact: true }), ep.prompt({ compact: true }))
    })

    it('ends every episode within its step cap', () => {
      for (let seed = 0; seed < 10; seed++) {
        const t = runPolicy(env, env.task('train', seed), randomPolicy(env, mulberry32(seed)))
        assert.ok(t.steps.length >= 1 && t.steps.length <= env.maxSteps, `${t.steps.length} steps > ${env.maxSteps}`)
        const garbage = runPolicy(env, env.task('train', seed), () => 'no tags at all')
        assert.equal(garbage.steps.length, env.maxSteps)
      }
    })

    it('records unusable output as valid: false without throwing', () => {
      for (const text of UNUSABLE) {
        const parsed = env.parse(text)
        assert.equal(parsed.ok, false, `parsed ${JSON.stringify(text.slice(0, 30))}`)
        if (!parsed.ok) assert.ok(parsed.reason.length > 0)
        const ep = env.reset(env.task('train', 0))
        const r = ep.step(text)
        assert.equal(r.valid, false)
        assert.equal(r.action, null)
        assert.equal(typeof r.reason, 'string')
      }
    })

    it('parses what formatResponse writes', () => {
      const ep = env.reset(env.task('train', 2))
      const rng = mulberry32(1)
      for (let i = 0; i < 20; i++) {
        const action = ep.randomAction(rng)
        assert.deepEqual(env.parse(env.formatResponse(action, 'thinking')), { ok: true, action })
      }
    })

    it('puts the anchor lines in every step prompt, full and compact', () => {
      for (const split of SPLITS) {
        const ep = env.reset(env.task(split, 4))
        const policy = randomPolicy(env, mulberry32(4))
        for (;;) {
          for (const compact of [false, true]) {
            const p = ep.prompt({ compact })
            assert.match(p, TASK_ANCHOR, `${split} step ${ep.stepCount} compact=${compact}`)
            assert.match(p, TURN_ANCHOR, `${split} step ${ep.stepCount} compact=${compact}`)
          }
          if (ep.done) break
          ep.step(policy(ep))
        }
      }
    })

    it('renders a compact prompt no longer than the full one', () => {
      const ep = env.reset(env.task('train', 9))
      const policy = randomPolicy(env, mulberry32(9))
      for (let i = 0; i < 3 && !ep.done; i++) ep.step(policy(ep))
      assert.ok(ep.prompt({ compact: true }).length < ep.prompt().length)
    })

    it('names in oracle skills only entities that appear in the trajectory text', () => {
      const trajectories: Trajectory[] = []
      for (let seed = 0; seed < 8; seed++) {
        const ref = env.task(SPLITS[seed % SPLITS.length] as Split, seed)
        trajectories.push(runPolicy(env, ref, expertPolicy(env)))
        trajectories.push(runPolicy(env, ref, randomPolicy(env, mulberry32(seed))))
        trajectories.push(runPolicy(env, ref, () => 'unusable'))
      }
      const outcomes = new Set(trajectories.map((t) => t.info.won))
      assert.deepEqual([...outcomes].sort(), [false, true], 'needs both successes and failures')
      for (const t of trajectories) {
        const analysis = env.oracle(t)
        const text = trajectoryText(t)
        assert.ok(analysis.output.episode_summary.length > 0)
        assert.ok(analysis.output.episode_skill.length > 0)
        assert.deepEqual(Object.keys(analysis.output).sort(), ['episode_skill', 'episode_summary'])
        for (const entity of analysis.entities) {
          assert.ok(text.includes(entity), `entity ${JSON.stringify(entity)} is not in the trajectory text`)
          const written = `${analysis.output.episode_summary} ${analysis.output.episode_skill}`
          assert.ok(written.includes(entity), `entity ${JSON.stringify(entity)} is not in the skill or summary`)
        }
        assert.match(analysis.output.episode_skill, t.info.won ? /^Workflow/ : /^Avoid/)
      }
    })

    it(`solves at least ${options.expertMinRate * 100}% of ${options.expertSample} tasks per split with the expert`, () => {
      for (const split of SPLITS) {
        let solved = 0
        const failures: number[] = []
        for (let i = 0; i < options.expertSample; i++) {
          const seed = mixSeed(1234, i) % 1_000_000
          const t = runPolicy(env, env.task(split, seed), expertPolicy(env))
          if (t.info.won) solved++
          else failures.push(seed)
        }
        const rate = solved / options.expertSample
        assert.ok(
          rate >= options.expertMinRate,
          `${split}: expert solved ${rate}; failing seeds ${failures.slice(0, 5)}`,
        )
      }
    })

    it('reports the success rate of a uniformly random valid-action policy', (t) => {
      let won = 0
      const rng = mulberry32(2026)
      for (let i = 0; i < options.randomSample; i++) {
        if (runPolicy(env, env.task('test-seen', i), randomPolicy(env, rng)).info.won) won++
      }
      const rate = won / options.randomSample
      t.diagnostic(
        `${env.name}: random valid-action policy success ${(rate * 100).toFixed(1)}% of ${options.randomSample}`,
      )
      assert.ok(rate < 1, 'a random policy should not solve everything')
    })
  })
}
