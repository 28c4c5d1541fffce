// The whole seedRun with the real pipeline activities, on the real dev server and the real S3 store: a micro
// configuration (one-layer model, a few warm-start and SFT steps, 2 iterations of 2 shards) that does not need
// to learn, only to pass every phase through the store. A second run of the same run id reuses every manifest.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Client, WorkflowFailedError } from '@temporalio/client'
import type { PhaseCounters } from '../../activities/phase.ts'
import type { RolloutTrajectory } from '../../compute/index.ts'
import { auditRun } from '../../records/audit.ts'
import { loadCheckpoint } from '../../records/checkpoint-store.ts'
import type { RunPlan } from '../../records/contracts.ts'
import type { IterationMetricsRecord } from '../../records/iteration-metrics.ts'
import { ITERATION_METRICS } from '../../records/iteration-metrics.ts'
import { decodeJsonlGz } from '../../records/jsonl.ts'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { Manifest } from '../../store/manifest.ts'
import { readPruned } from '../../store/pruned.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { microConfig } from '../compute/micro.ts'
import {
  allKeys,
  evaluationLabels,
  finishedPhases,
  iterationPhases,
  type PipelineHarness,
  startPipeline,
} from './pipeline-harness.ts'

const RUN_ID = `pipeline-${process.pid}`

function config(algorithm: Parameters<typeof microConfig>[0] = 'seed', iterations = 2) {
  const c = microConfig(algorithm)
  return {
    ...c,
    stage2: { ...c.stage2, iterations },
    evaluation: { ...c.evaluation, tasks: 2, every: 1 },
  }
}

describe('seedRun end to end with the pipeline activities (real dev server, S3 store)', () => {
  let harness: PipelineHarness
  let store: S3ArtifactStore
  let counters: PhaseCounters
  let client: Client

  before(async () => {
    harness = await startPipeline(`pipeline-${process.pid}`)
    ;({ store, counters, client } = harness)
  })

  after(async () => {
    await harness?.close()
  })

  it('runs prepare → Stage 1 → 2 iterations of 2 shards → evaluations, every phase manifest in the store', async () => {
    const result = await harness.run(RUN_ID, config())
    assert.deepEqual(evaluationLabels(result), [
      ['base', -1],
      ['stage 1', -1],
      ['iteration 0', 0],
      ['iteration 1', 1],
    ])
    for (const e of result.evaluations) {
      assert.ok(e.success >= 0 && e.success <= 1, `${e.label}: success ${e.success}`)
      assert.ok(await store.head(e.manifestKey), `${e.manifestKey} exists`)
    }
    assert.ok(await store.head(keys.stageEvaluation(RUN_ID, 'base')))
    assert.ok(await store.head(keys.stageEvaluation(RUN_ID, 'stage1')))
    assert.ok(await store.head(keys.evaluation(RUN_ID, 1)))

    const plan = (await getJson(store, keys.runPlan(RUN_ID))) as RunPlan
    assert.equal(plan.shards, 2)
    const expected = [
      keys.stagePhaseManifest(RUN_ID, 'warmstart', 0),
      keys.stagePhaseManifest(RUN_ID, 'sft', 0),
      keys.stagePhaseManifest(RUN_ID, 'evaluate', 0),
      keys.stagePhaseManifest(RUN_ID, 'evaluate', 1),
    ]
    for (const k of [0, 1]) {
      expected.push(keys.phaseManifest(RUN_ID, k, 'snapshot', 0))
      for (const shard of [0, 1]) {
        expected.push(keys.phaseManifest(RUN_ID, k, 'rollout', shard))
        expected.push(keys.phaseManifest(RUN_ID, k, 'analyze', shard))
      }
      expected.push(keys.phaseManifest(RUN_ID, k, 'rescore', 0))
      expected.push(keys.phaseManifest(RUN_ID, k, 'update', 0))
      expected.push(keys.phaseManifest(RUN_ID, k, 'metrics', 0))
      expected.push(keys.phaseManifest(RUN_ID, k, 'evaluate', 0))
    }
    const present = new Set(await allKeys(store, keys.runPrefix(RUN_ID)))
    assert.deepEqual(
      expected.filter((k) => !present.has(k)),
      [],
    )
    assert.ok(present.has(keys.sftAnnotations(RUN_ID)))
    assert.ok(present.has(keys.checkpoint(RUN_ID, 1, 'optimizer.safetensors')))
    assert.equal(
      result.checkpoint?.prefix,
      keys.checkpoint(RUN_ID, 1, 'model.safetensors').replace(/model\.safetensors$/, ''),
    )
    assert.equal((await store.head(`${result.checkpoint?.prefix}model.safetensors`))?.sha256, result.checkpoint?.sha256)
    assert.equal(
      [...counters.reused.values()].reduce((a, b) => a + b, 0),
      0,
    )
  })

  it('writes metrics.json per iteration: rollout success, skill parse rate, OPD gate, truncation, losses, timings', async () => {
    for (const k of [0, 1]) {
      const record = (await getJson(store, keys.metrics(RUN_ID, k))) as IterationMetricsRecord
      assert.deepEqual([record.runId, record.iteration, record.algorithm], [RUN_ID, k, 'seed'])
      const m = record.metrics
      assert.deepEqual(Object.keys(m).sort(), Object.keys(ITERATION_METRICS).sort())
      for (const [name, v] of Object.entries(m)) assert.ok(v === null || Number.isFinite(v), `${name}: ${v}`)
      const present = (name: keyof typeof m) => {
        const v = m[name]
        assert.ok(typeof v === 'number' && Number.isFinite(v), `iteration ${k}: ${name} is ${v}`)
        return v
      }
      const rate = (name: keyof typeof m) => {
        const v = present(name)
        assert.ok(v >= 0 && v <= 1, `iteration ${k}: ${name} ${v} is not in [0, 1]`)
      }
      rate('rollout/success_rate')
      rate('analyze/parse_rate')
      assert.equal(present('rollout/episodes'), 4)
      assert.equal(present('analyze/trajectories'), 4)
      for (const name of [
        'rollout/prompts_truncated',
        'analyze/prompts_truncated',
        'rescore/teacher_prompts_truncated',
        'rescore/teacher_blocks_dropped',
      ] as const) {
        assert.ok(Number.isInteger(present(name)) && present(name) >= 0, `${name}`)
      }
      for (const name of [
        'update/loss',
        'update/pg_loss',
        'update/kl',
        'update/entropy',
        'update/grad_norm',
      ] as const) {
        present(name)
      }
      for (const phase of ['rollout', 'analyze', 'rescore', 'update'] as const) {
        assert.ok(present(`timing/${phase}_s`) > 0, `timing/${phase}_s`)
      }
      // through the binary rescore artifact the first mini-batch still sees ratio 1
      assert.equal(present('update/first_clip_fraction'), 0)
      if (present('update/opd_tokens') > 0) {
        assert.ok(present('update/opd_gate_mean') > 0 && present('update/opd_gate_mean') < 1)
        rate('update/opd_positive_gap_share')
        present('update/opd_loss')
      } else {
        assert.equal(m['update/opd_gate_mean'], null)
        assert.equal(m['update/opd_positive_gap_share'], null)
      }
      assert.equal(record.phases.rollout?.length, 2)
      assert.equal(record.phases.analyze?.length, 2)
    }
  })

  it('writes the iteration manifest last: every artifact of the iteration with its sha256 and bytes', async () => {
    for (const k of [0, 1]) {
      const manifest = (await getJson(store, keys.iterationManifest(RUN_ID, k))) as Manifest
      assert.equal(manifest.runId, RUN_ID)
      const listed = Object.keys(manifest.artifacts)
      const expected = [
        keys.snapshot(RUN_ID, k),
        keys.rescore(RUN_ID, k, 0),
        keys.checkpoint(RUN_ID, k, 'model.safetensors'),
        keys.checkpoint(RUN_ID, k, 'optimizer.safetensors'),
        keys.metrics(RUN_ID, k),
        ...(['snapshot', 'rescore', 'update', 'metrics'] as const).map((p) => keys.phaseManifest(RUN_ID, k, p, 0)),
        ...[0, 1].flatMap((shard) => [
          keys.rollouts(RUN_ID, k, shard),
          keys.skills(RUN_ID, k, shard),
          keys.phaseManifest(RUN_ID, k, 'rollout', shard),
          keys.phaseManifest(RUN_ID, k, 'analyze', shard),
        ]),
      ]
      assert.deepEqual(
        expected.filter((key) => !listed.includes(key)),
        [],
      )
      // default retention keeps optimizer state only for the newest checkpoint: iteration 0's is recorded as pruned
      const pruned = await readPruned(store, RUN_ID)
      assert.deepEqual([...pruned.keys()], [keys.checkpoint(RUN_ID, 0, 'optimizer.safetensors')])
      for (const [key, entry] of Object.entries(manifest.artifacts)) {
        const head = await store.head(key)
        const expected = pruned.has(key) ? [undefined, undefined] : [entry.sha256, entry.bytes]
        assert.deepEqual([head?.sha256, head?.bytes], expected, key)
        if (pruned.has(key)) assert.equal(pruned.get(key)?.sha256, entry.sha256)
      }
      const rescore = manifest.artifacts[keys.rescore(RUN_ID, k, 0)]
      assert.ok(rescore?.parents.includes(keys.snapshot(RUN_ID, k)), `rescore parents: ${rescore?.parents}`)
      assert.ok(rescore?.parents.includes(keys.skills(RUN_ID, k, 1)))
    }
  })

  it('a second run of the same run id computes nothing: every phase reuses its manifest', async () => {
    const manifests = await Promise.all([0, 1].map((k) => store.head(keys.iterationManifest(RUN_ID, k))))
    const computed = [...counters.computed.values()].reduce((a, b) => a + b, 0)
    await client.workflow.getHandle(RUN_ID).describe() // the first run is closed
    const result = await client.workflow.execute(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: RUN_ID,
      args: [{ runId: RUN_ID, config: config() }],
    })
    assert.equal(result.evaluations.length, 4)
    assert.equal(
      [...counters.computed.values()].reduce((a, b) => a + b, 0),
      computed,
    )
    assert.equal(counters.reused.get('update'), 2)
    assert.equal(counters.reused.get('rollout'), 4)
    assert.equal(counters.reused.get('warmstart'), 1)
    assert.equal(counters.reused.get('metrics'), 2)
    assert.deepEqual(await Promise.all([0, 1].map((k) => store.head(keys.iterationManifest(RUN_ID, k)))), manifests)
  })

  it('a bad config fails the run at once with InvalidRunConfig listing every problem', async () => {
    const bad = { ...config(), threads: 0, stage2: { ...config().stage2, groupSize: -1 } }
    const error = await client.workflow
      .execute(seedRun, {
        taskQueue: TASK_QUEUES.control,
        workflowId: `${RUN_ID}-bad`,
        args: [{ runId: `${RUN_ID}-bad`, config: bad }],
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      )
    assert.ok(error instanceof WorkflowFailedError, String(error))
    const cause = error.cause?.cause as { type?: string; message?: string } | undefined
    assert.equal(cause?.type, 'InvalidRunConfig')
    assert.match(cause?.message ?? '', /threads: /)
    assert.match(cause?.message ?? '', /stage2\.groupSize: /)
  })

  it('skill-prompt: annotate (the library) and the base evaluation with library skills; no Stage 1, no RL', async () => {
    const runId = `${RUN_ID}-skill-prompt`
    const before = counters.computed.get('annotate') ?? 0
    const result = await harness.run(runId, config('skill-prompt'))
    assert.deepEqual(evaluationLabels(result), [['base', -1]])
    assert.deepEqual(await finishedPhases(store, runId), ['annotate/0000', 'evaluate/0000', 'warmstart/0000'])
    assert.equal(counters.computed.get('annotate'), before + 1)
    const annotations = await store.head(keys.sftAnnotations(runId))
    assert.ok(annotations)
    const evaluation = (await getJson(store, keys.stagePhaseManifest(runId, 'evaluate', 0))) as PhaseManifest
    assert.equal(evaluation.inputs.library, annotations.sha256, 'the base evaluation read the library')
  })

  it('trains LoRA adapters in Stage 1 and the update: the base stays frozen, the checkpoints carry the PEFT adapter, audit is clean', async () => {
    const runId = `${RUN_ID}-lora`
    const c = config('seed', 1)
    const lora = { rank: 4, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj', 'down_proj'] }
    const result = await harness.run(runId, { ...c, model: { ...c.model, lora } })
    assert.deepEqual(
      evaluationLabels(result).map(([label]) => label),
      ['base', 'stage 1', 'iteration 0'],
    )
    const base = await loadCheckpoint(store, {
      prefix: keys.baseCheckpoint(runId, 'config.json').replace(/config\.json$/, ''),
      sha256: '',
    })
    const folder = (k: string) => k.replace(/model\.safetensors$/, '')
    const sft = await loadCheckpoint(store, {
      prefix: folder(keys.sftCheckpoint(runId, 'model.safetensors')),
      sha256: '',
    })
    const last = await loadCheckpoint(store, { prefix: result.checkpoint?.prefix ?? '', sha256: '' })
    assert.equal(base.checkpoint.lora, undefined, 'the warm-start trains every weight')
    for (const { checkpoint } of [sft, last]) {
      assert.deepEqual(checkpoint.lora?.config, lora)
      assert.deepEqual(checkpoint.lora?.base, base.checkpoint.weights, 'the base weights are frozen')
    }
    const moved = (name: string) =>
      sft.checkpoint.lora?.adapters.get(name)?.some((v, i) => v !== last.checkpoint.lora?.adapters.get(name)?.[i])
    assert.ok(moved('model.layers.0.self_attn.q_proj.lora_B.weight'), 'the update moved the adapters')
    assert.ok(
      sft.checkpoint.lora?.adapters.get('model.layers.0.mlp.down_proj.lora_B.weight')?.some((v) => v !== 0),
      'Stage 1 trained B away from 0',
    )
    assert.deepEqual(
      Object.keys(last.optimizer?.tensors ?? {}).every((n) => /\.lora_[AB]\.weight\.exp_avg(_sq)?$/.test(n)),
      true,
      'optimizer state for adapters only',
    )
    assert.ok(await store.head(`${result.checkpoint?.prefix}adapter/adapter_model.safetensors`))
    const report = await auditRun(store, runId)
    assert.deepEqual(report.broken, [])
    // audit re-hashed what the update manifest records: the adapter files among them
    const update = (await getJson(store, keys.phaseManifest(runId, 0, 'update', 0))) as PhaseManifest
    for (const file of ['adapter/adapter_config.json', 'adapter/adapter_model.safetensors', 'lora_base.safetensors'])
      assert.ok(update.outputs[file], `the update manifest records ${file}`)
  })

  it('skill-grpo: annotate, the base evaluation and one grpo iteration whose rollouts carry library skills', async () => {
    const runId = `${RUN_ID}-skill-grpo`
    const result = await harness.run(runId, config('skill-grpo', 1))
    assert.deepEqual(evaluationLabels(result), [
      ['base', -1],
      ['iteration 0', 0],
    ])
    assert.deepEqual(
      await finishedPhases(store, runId),
      [...iterationPhases(0, ALGORITHMS['skill-grpo'], 2), 'annotate/0000', 'evaluate/0000', 'warmstart/0000'].sort(),
    )
    const annotations = (await store.head(keys.sftAnnotations(runId)))?.sha256
    for (const shard of [0, 1]) {
      const manifest = (await getJson(store, keys.phaseManifest(runId, 0, 'rollout', shard))) as PhaseManifest
      assert.equal(manifest.inputs.library, annotations)
      const rollouts = manifest.outputs.rollouts
      assert.ok(rollouts)
      const trajectories = decodeJsonlGz(await store.get(rollouts.key), rollouts.key) as RolloutTrajectory[]
      assert.ok(trajectories.length > 0)
      for (const t of trajectories) for (const step of t.steps) assert.ok(step.skill, 'every acting prompt has a skill')
    }
    const update = (await getJson(store, keys.phaseManifest(runId, 0, 'update', 0))) as PhaseManifest
    assert.ok(Number.isFinite(update.stats.loss), `update loss ${update.stats.loss}`)
    const record = (await getJson(store, keys.metrics(runId, 0))) as IterationMetricsRecord
    assert.equal(record.algorithm, 'skill-grpo')
    assert.equal(record.metrics['rollout/episodes'], 4)
    assert.equal(record.metrics['analyze/parse_rate'], null, 'the row does not analyze')
    // the library the annotate phase wrote is a parent of the rollouts that read it
    const manifest = (await getJson(store, keys.iterationManifest(runId, 0))) as Manifest
    for (const shard of [0, 1]) {
      const parents = manifest.artifacts[keys.rollouts(runId, 0, shard)]?.parents ?? []
      assert.ok(parents.includes(keys.sftAnnotations(runId)), `rollouts ${shard} parents: ${parents}`)
    }
    assert.equal(
      result.checkpoint?.prefix,
      keys.checkpoint(runId, 0, 'model.safetensors').replace(/model\.safetensors$/, ''),
    )
  })
})
