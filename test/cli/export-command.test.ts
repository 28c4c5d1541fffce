// `seedflow export` on a micro run written to a folder store by the real pipeline activities (3 iterations,
// evaluated after iterations 1 and 2, retention keeping only the last checkpoint): a checkpoint comes out as a
// plain folder whose files are the recorded ones; pruned checkpoints and pruned optimizer state are refused;
// a damaged or vanishing file fails the export without leaving an output folder, a temporary folder or a
// partial file behind, and a folder that existed already is left as it was.
import assert from 'node:assert/strict'
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { type ExportOptions, exportCommand } from '../../cli/export-command.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { weightsFromTensors } from '../../policy/checkpoint.ts'
import { importHuggingFaceFolder } from '../../policy/hf-import.ts'
import { decodePeftAdapter, mergeLora } from '../../policy/lora.ts'
import { decodeSafetensors } from '../../policy/safetensors.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { sha256Hex } from '../../store/hash.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { Manifest } from '../../store/manifest.ts'
import { type MicroRun, runMicro } from '../activities/micro-run.ts'
import { microConfig } from '../compute/micro.ts'
import { seedflow } from './seedflow-process.ts'

const RUN = 'export-run'
const quiet = { out: () => {} }

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  )

/** The store, except that reading `file` of any checkpoint fails as if the blob vanished after its head. */
function vanishing(store: ArtifactStore, file: string): ArtifactStore {
  return new Proxy(store, {
    get(target, property) {
      if (property === 'getStream')
        return async (key: string) => {
          if (key.endsWith(`/${file}`)) throw Object.assign(new Error(`ENOENT: ${key} vanished`), { code: 'ENOENT' })
          return target.getStream(key)
        }
      const value = Reflect.get(target, property, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

/** What an export leaves in the parent folder of `out`, besides `others`: the target and any temporary folder. */
async function leftBeside(out: string, others: string[] = []): Promise<string[]> {
  const name = out.split('/').at(-1) ?? ''
  const entries = await readdir(dirname(out)).catch(() => [] as string[])
  return entries.filter((e) => !others.includes(e) && (e === name || e.startsWith(`.${name}.partial`)))
}

describe('seedflow export', () => {
  let root: string
  let store: FsArtifactStore
  let micro: MicroRun
  let n = 0
  const outDir = () => join(root, 'exports', String(n++))
  const run = (options: Partial<ExportOptions> & { out?: string }) =>
    exportCommand(RUN, { out: outDir(), ...options }, quiet, store)

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-export-'))
    store = new FsArtifactStore(join(root, 'artifacts'))
    const engine = createLocalEngine({ threads: 1 })
    const c = microConfig('seed')
    micro = await runMicro(createPipelineActivities({ store, engine }), RUN, {
      ...c,
      stage2: { ...c.stage2, iterations: 3 },
      evaluation: { ...c.evaluation, tasks: 2, every: 2 },
      retention: { ...c.retention, keepLast: 1 },
    })
    await engine.close()
  })

  after(() => rm(root, { recursive: true, force: true }))

  it('copies the final checkpoint into a plain folder: the recorded files, byte for byte, loadable as a model folder', async () => {
    const out = outDir()
    const files = await run({ out })
    assert.deepEqual(files.map((f) => f.file).sort(), ['config.json', 'model.safetensors', 'tokenizer.json'])
    assert.deepEqual((await readdir(out)).sort(), ['config.json', 'model.safetensors', 'tokenizer.json'])
    for (const f of files) {
      assert.equal(f.key, `${micro.checkpoints[2]?.prefix}${f.file}`)
      assert.equal(sha256Hex(await readFile(join(out, f.file))), (await store.head(f.key))?.sha256)
    }
    assert.equal(files.find((f) => f.file === 'model.safetensors')?.sha256, micro.checkpoints[2]?.sha256)
    const imported = await importHuggingFaceFolder(out)
    assert.equal(imported.checkpoint.config.numLayers, 1)
  })

  it('copies the optimizer state on request, and the base and Stage 1 checkpoints by name', async () => {
    const withOptimizer = await run({ optimizer: true })
    assert.ok(withOptimizer.some((f) => f.file === 'optimizer.safetensors'))
    const base = await run({ iteration: 'base' })
    assert.ok(base.every((f) => f.key.startsWith(`${micro.base.prefix}`)))
    const stage1 = await run({ iteration: 'stage1' })
    assert.ok(stage1.every((f) => f.key.startsWith(`${micro.stage1.prefix}`)))
  })

  it('refuses a checkpoint that retention pruned, saying when, why and where it is recorded', async () => {
    const record = `runs/${RUN}/retention/0001.json`
    const prefix = `runs/${RUN}/iterations/0000/checkpoint/`
    const entry = ((await getJson(store, record)) as Manifest).artifacts[`${prefix}model.safetensors`]
    assert.ok(entry?.pruned, 'the retention record lists the pruned model')
    const out = outDir()
    await assert.rejects(run({ iteration: '0', out }), (e: Error) => {
      assert.equal(e.name, 'RunInputError')
      assert.equal(
        e.message,
        `the checkpoint ${prefix} of run ${RUN} was pruned by retention on ${entry.pruned?.at} (recorded in ${record}): ` +
          'retention after iteration 1: not among the last 1 (iteration 1), no checkpoint evaluated yet, not evaluated; ' +
          'raise retention.keepLast or set retention.keepEvaluated to keep such checkpoints',
      )
      assert.equal(e.message.split('(').length, e.message.split(')').length, 'balanced parentheses')
      return true
    })
    assert.deepEqual(await leftBeside(out), [], 'a refused export makes no folder')
  })

  it('exports a kept checkpoint whose optimizer state was pruned, and refuses --optimizer for it', async () => {
    const files = await run({ iteration: '1' })
    assert.equal(files.find((f) => f.file === 'model.safetensors')?.sha256, micro.checkpoints[1]?.sha256)
    await assert.rejects(
      run({ iteration: '1', optimizer: true }),
      /optimizer\.safetensors is missing .*retention keeps optimizer state only for the newest checkpoint/,
    )
  })

  it('does not overwrite files already in the folder', async () => {
    const out = outDir()
    await run({ out })
    await assert.rejects(run({ out }), /model\.safetensors exists already: export into an empty folder/)
    assert.deepEqual(await leftBeside(out), [out.split('/').at(-1)], 'no temporary folder beside it')
  })

  it('fails on a damaged file, naming it, and leaves no output folder and no temporary folder behind', async () => {
    const key = keys.checkpoint(RUN, 2, 'config.json')
    const path = join(root, 'artifacts', key)
    const original = await readFile(path)
    await writeFile(path, Buffer.from(original.toString('utf8').replace('{', '{ ')))
    const out = outDir()
    try {
      await assert.rejects(run({ out }), (e: Error) => e.name === 'IntegrityError' && e.message.includes(key))
    } finally {
      await writeFile(path, original)
    }
    assert.deepEqual(await leftBeside(out), [], 'neither the target nor its temporary folder exists')
  })

  it('fails midway when a file vanishes from the store, leaving nothing behind, not even the parents it made', async () => {
    const top = join(root, 'exports', `fresh-${n++}`)
    const out = join(top, 'a', 'b')
    // model.safetensors and config.json are copied before tokenizer.json fails
    await assert.rejects(
      exportCommand(RUN, { out }, quiet, vanishing(store, 'tokenizer.json')),
      /tokenizer\.json vanished/,
    )
    assert.equal(await exists(top), false, 'the parent folders this export created are gone')
    assert.deepEqual(await leftBeside(top), [])
  })

  it('leaves a folder that existed already as it was when the export fails, and fills it when it succeeds', async () => {
    const empty = outDir()
    await mkdir(empty, { recursive: true })
    await assert.rejects(exportCommand(RUN, { out: empty }, quiet, vanishing(store, 'tokenizer.json')), /vanished/)
    assert.deepEqual(await readdir(empty), [], 'the empty folder stays, empty')
    assert.deepEqual(await leftBeside(empty, [empty.split('/').at(-1) ?? '']), [], 'no temporary folder')

    const notes = outDir()
    await mkdir(notes, { recursive: true })
    await writeFile(join(notes, 'NOTES.md'), 'mine\n')
    await assert.rejects(exportCommand(RUN, { out: notes }, quiet, vanishing(store, 'config.json')), /vanished/)
    assert.deepEqual(await readdir(notes), ['NOTES.md'])
    const files = await run({ out: notes })
    assert.deepEqual((await readdir(notes)).sort(), ['NOTES.md', 'config.json', 'model.safetensors', 'tokenizer.json'])
    assert.equal(await readFile(join(notes, 'NOTES.md'), 'utf8'), 'mine\n')
    for (const f of files) assert.equal(sha256Hex(await readFile(join(notes, f.file))), f.sha256)
    assert.deepEqual(await leftBeside(notes, [notes.split('/').at(-1) ?? '']), [], 'no temporary folder')
  })

  it('refuses a target that is a file', async () => {
    const out = outDir()
    await mkdir(dirname(out), { recursive: true })
    await writeFile(out, 'not a folder')
    await assert.rejects(run({ out }), new RegExp(`^RunInputError: ${out} exists and is not a folder`))
    assert.equal(await readFile(out, 'utf8'), 'not a folder')
  })

  it('the binary exits 1 with the reason for a pruned checkpoint, and rejects an unknown run', async () => {
    const env = { SEEDFLOW_ARTIFACTS_DIR: join(root, 'artifacts'), SEEDFLOW_S3_BUCKET: '' }
    const pruned = await seedflow(['export', RUN, '--iteration', '0', '--out', outDir()], env)
    assert.equal(pruned.code, 1)
    assert.match(
      pruned.err,
      /^seedflow: the checkpoint .* was pruned by retention on .* \(recorded in .*\): retention after/,
    )
    const unknown = await seedflow(['export', 'ghost', '--out', outDir()], env)
    assert.equal(unknown.code, 1)
    assert.match(unknown.err, /seedflow: unknown run ghost: no runs\/ghost\/run\.json/)
  })
})

describe('seedflow export of a LoRA run', () => {
  let root: string
  let store: FsArtifactStore
  const RUN_LORA = 'export-lora-run'

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-export-lora-'))
    store = new FsArtifactStore(join(root, 'artifacts'))
    const engine = createLocalEngine({ threads: 1 })
    const c = microConfig('seed')
    await runMicro(createPipelineActivities({ store, engine }), RUN_LORA, {
      ...c,
      model: { ...c.model, lora: { rank: 2, alpha: 4, dropout: 0, targets: ['q_proj', 'o_proj'] } },
      evaluation: { ...c.evaluation, tasks: 2, every: 1 },
    })
    await engine.close()
  })

  after(() => rm(root, { recursive: true, force: true }))

  it('writes the merged model at the top (transformers reads it), the PEFT adapter under adapter/ and the base', async () => {
    const out = join(root, 'out')
    const files = await exportCommand(RUN_LORA, { out }, quiet, store)
    assert.deepEqual(files.map((f) => f.file).sort(), [
      'adapter/adapter_config.json',
      'adapter/adapter_model.safetensors',
      'config.json',
      'lora_base.safetensors',
      'model.safetensors',
      'tokenizer.json',
    ])
    for (const f of files) assert.equal(sha256Hex(await readFile(join(out, f.file))), (await store.head(f.key))?.sha256)
    const { checkpoint } = await importHuggingFaceFolder(out)
    const adapter = decodePeftAdapter(checkpoint.config, {
      config: await readFile(join(out, 'adapter/adapter_config.json')),
      model: await readFile(join(out, 'adapter/adapter_model.safetensors')),
    })
    assert.deepEqual(adapter.lora, { rank: 2, alpha: 4, dropout: 0, targets: ['q_proj', 'o_proj'] })
    const base = decodeSafetensors(await readFile(join(out, 'lora_base.safetensors'))).tensors
    const merged = mergeLora(
      weightsFromTensors(checkpoint.config, base, 'lora_base.safetensors'),
      adapter.adapters,
      checkpoint.config,
      adapter.lora,
    )
    const name = 'model.layers.0.self_attn.q_proj.weight'
    assert.deepEqual(merged.get(name), checkpoint.weights.get(name), 'model.safetensors is base + adapter, merged')
  })
})
