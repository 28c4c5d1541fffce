// `seedflow export-dumps --format verl` on a micro run written to a folder store by the real pipeline activities
// (seed row, 2 iterations): the reference's file names and, in every line, exactly its keys; a line per step
// sample and per analyzed trajectory; texts as stored; an iteration whose rollouts retention pruned is skipped
// with a note; an unknown run and an unknown format are refused by name.
import assert from 'node:assert/strict'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { exportDumpsCommand } from '../../cli/export-dumps-command.ts'
import type { RolloutTrajectory, SkillRecord } from '../../compute/index.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { exportVerlDumps } from '../../exports/verl-dumps.ts'
import { UnknownRunError } from '../../records/audit.ts'
import type { RunPlan } from '../../records/contracts.ts'
import { decodeJsonlGz } from '../../records/jsonl.ts'
import { parseSkillLines } from '../../records/skill-library.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { getJson, putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { Manifest } from '../../store/manifest.ts'
import { runMicro } from '../activities/micro-run.ts'
import { microConfig } from '../compute/micro.ts'

const RUN = 'dumps-run'
const ITERATIONS = 2
const engine = createLocalEngine({ threads: 1 })

/**
 * `_dump_generations`' keys, lljcic2024-boop/agent_rl aadf09e, verl/trainer/ppo/ray_trainer.py: the base keys
 * (lines 1446-1451), then the rollout loop's per-sample fields it copies where present (lines 3600-3613), all of
 * which its multi-turn rollout loop sets (agent_system/multi_turn_rollout/rollout_loop.py lines 597-598, 808-819,
 * 846-849). Its reward manager adds no reward_extra_info keys (agent_system/reward_manager/episode.py line 93).
 */
const ROLLOUT_KEYS = [
  'input',
  'output',
  'score',
  'step',
  'sample_id',
  'rollout_id',
  'step_num',
  'step_id',
  'uid',
  'traj_uid',
  'obs_text',
  'obs_text_base',
  'is_action_valid',
]

/** `_dump_seed_analysis`' keys, same file, lines 1558-1597. */
const ANALYSIS_KEYS = [
  'global_step',
  'traj_uid',
  'selector',
  'analysis_mode',
  'skill_mode',
  'analysis_prompt_version',
  'analysis_backend_requested',
  'analysis_backend_used',
  'include_episode_summary',
  'analysis_error',
  'episode_success',
  'candidate_step_indices',
  'num_steps',
  'step_indices',
  'episode_summary',
  'episode_skill',
  'step_skills',
  'llm_prompt',
  'llm_raw_output',
]

type Line = Record<string, unknown>

async function readLines(path: string): Promise<Line[]> {
  const text = await readFile(path, 'utf8')
  assert.ok(text.endsWith('\n'), `${path} ends with a newline`)
  return text
    .slice(0, -1)
    .split('\n')
    .map((l) => JSON.parse(l) as Line)
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort()
}

describe('verl dumps of a micro run (folder store, real pipeline activities)', () => {
  let root: string
  let store: FsArtifactStore
  let out: string
  let plan: RunPlan
  const notes: string[] = []

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-dumps-'))
    store = new FsArtifactStore(join(root, 'store'))
    const c = microConfig('seed')
    await runMicro(createPipelineActivities({ store, engine }), RUN, {
      ...c,
      stage2: { ...c.stage2, iterations: ITERATIONS },
    })
    plan = (await getJson(store, keys.runPlan(RUN))) as RunPlan
    out = join(root, 'out')
    await exportVerlDumps(store, RUN, out, { onProgress: (m) => notes.push(m) })
  })

  after(async () => {
    await engine.close()
    await rm(root, { recursive: true, force: true })
  })

  /** Iteration k's stored trajectories and skill records, every shard. */
  async function stored(k: number): Promise<{ trajectories: RolloutTrajectory[]; skills: SkillRecord[] }> {
    const trajectories: RolloutTrajectory[] = []
    const skills: SkillRecord[] = []
    for (let shard = 0; shard < plan.shards; shard++) {
      const rollouts = keys.rollouts(RUN, k, shard)
      trajectories.push(...(decodeJsonlGz(await store.get(rollouts), rollouts) as RolloutTrajectory[]))
      const key = keys.skills(RUN, k, shard)
      skills.push(...parseSkillLines((await store.get(key)).toString('utf8'), key))
    }
    return { trajectories, skills }
  }

  it('writes the reference file names: {step}.jsonl and seed_analysis/step_{step:08d}.jsonl, step = k + 1', async () => {
    assert.deepEqual(await filesUnder(out), [
      '1.jsonl',
      '2.jsonl',
      'seed_analysis/step_00000001.jsonl',
      'seed_analysis/step_00000002.jsonl',
    ])
    assert.equal(notes.length, ITERATIONS, notes.join('\n'))
  })

  it('writes exactly the reference keys, in its order, on every line', async () => {
    for (let step = 1; step <= ITERATIONS; step++) {
      for (const line of await readLines(join(out, `${step}.jsonl`))) {
        assert.deepEqual(Object.keys(line), ROLLOUT_KEYS)
        assert.equal(line.step, step)
      }
      for (const line of await readLines(join(out, 'seed_analysis', `step_${String(step).padStart(8, '0')}.jsonl`))) {
        assert.deepEqual(Object.keys(line), ANALYSIS_KEYS)
        assert.equal(line.global_step, step)
      }
    }
  })

  it('writes a rollout line per step sample and an analysis line per analyzed trajectory', async () => {
    for (let k = 0; k < ITERATIONS; k++) {
      const { trajectories, skills } = await stored(k)
      const samples = trajectories.reduce((n, t) => n + t.steps.length, 0)
      assert.ok(samples > 0 && skills.length > 0)
      assert.equal((await readLines(join(out, `${k + 1}.jsonl`))).length, samples)
      assert.equal((await readLines(join(out, 'seed_analysis', `step_0000000${k + 1}.jsonl`))).length, skills.length)
    }
  })

  it('keeps the stored texts: prompt, response, analyzer prompt and raw answer', async () => {
    const { trajectories, skills } = await stored(1)
    const t = trajectories.find((x) => x.steps.length > 1) ?? (trajectories[0] as RolloutTrajectory)
    const n = t.steps.length - 1
    const line = (await readLines(join(out, '2.jsonl'))).find((l) => l.step_id === `${t.group}_${t.sample}_${n}`)
    assert.equal(line?.output, t.steps[n]?.responseText)
    assert.equal(line?.input, t.steps[n]?.actingPrompt)
    assert.equal(line?.traj_uid, String(t.id))
    const skill = skills[0] as SkillRecord
    const analysis = (await readLines(join(out, 'seed_analysis', 'step_00000002.jsonl'))).find(
      (l) => l.traj_uid === String(skill.trajectory),
    )
    assert.equal(analysis?.llm_raw_output, skill.raw)
    assert.deepEqual(analysis?.llm_prompt, { messages: [{ role: 'user', content: skill.prompt }] })
    assert.equal(analysis?.episode_skill, skill.skill ?? '')
  })

  it('skips an iteration whose rollouts retention pruned, with a note, and writes the others', async () => {
    const key = keys.rollouts(RUN, 0, 0)
    const bytes = await store.get(key)
    const info = await store.head(key)
    const record = keys.retentionRecord(RUN, 9)
    const pruned: Manifest = {
      version: 1,
      runId: RUN,
      configSha256: '',
      seedflowVersion: 'test',
      createdAt: new Date(0).toISOString(),
      artifacts: {
        [key]: { sha256: info?.sha256 ?? '', bytes: bytes.length, parents: [], pruned: { at: '', reason: 'a test' } },
      },
    }
    await putJson(store, record, pruned)
    await store.delete(key)
    try {
      const dir = join(root, 'pruned-out')
      const seen: string[] = []
      const result = await exportVerlDumps(store, RUN, dir, { onProgress: (m) => seen.push(m) })
      assert.equal(result.iterations, ITERATIONS - 1)
      assert.deepEqual(await filesUnder(dir), ['2.jsonl', 'seed_analysis/step_00000002.jsonl'])
      assert.equal(seen[0], `iteration 0 (step 1): ${key} was pruned by retention (a test): skipped`)
    } finally {
      await store.put(key, bytes)
      await store.delete(record)
    }
  })

  it('refuses an unknown run, naming it and the store', async () => {
    await assert.rejects(exportVerlDumps(store, 'no-such-run', join(root, 'none')), {
      name: UnknownRunError.name,
      message: `unknown run no-such-run: no runs/no-such-run/run.json in ${store.location}`,
    })
  })

  it('the command refuses an unknown format, listing the known ones', async () => {
    await assert.rejects(exportDumpsCommand(RUN, { format: 'csv', out: join(root, 'csv') }, { out: () => {} }, store), {
      name: 'RunInputError',
      message: 'unknown dump format "csv": known formats are verl, tensorboard',
    })
  })
})
