// The test command. Runs the unit tier, then the integration tier against a real Temporal dev server and a
// real S3 server that it starts on 127.0.0.1 and always stops: on success, failure, SIGINT and SIGTERM.
// Servers left behind by a run that was killed outright are reaped through their PID files at the next start.
import { spawn, spawnSync } from 'node:child_process'
import { mkdir, readdir, rm } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { ensureChromium } from '../infra/chromium.ts'
import { ensureCudaLibraries } from '../infra/cuda.ts'
import { ensureLlamaServer } from '../infra/llama-server.ts'
import { ensureModels } from '../infra/models.ts'
import { ensureNativeAddon } from '../infra/native.ts'
import { isAlive, reapStale } from '../infra/processes.ts'
import { startS3Server } from '../infra/s3-server.ts'
import { startTemporalServer } from '../infra/temporal-server.ts'
import { ensureTools, PROJECT_ROOT } from '../infra/tools.ts'
import { ensureSoftwareVulkan } from '../infra/vulkan.ts'
import { TEST_ENV } from './integration/servers.ts'

type Tier = 'unit' | 'integration'
const TIERS: Record<string, Tier[]> = { unit: ['unit'], integration: ['integration'], all: ['unit', 'integration'] }

// We pin the AWS SDK (docs/design.md §5.2); its notice about Node 22 would repeat in every test process.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'

const tiers = TIERS[process.argv[2] ?? 'all']
if (!tiers) {
  console.error(`usage: node --import tsx test/run.ts [unit|integration|all]  (got ${process.argv[2]})`)
  process.exit(2)
}
const only = process.argv.slice(3) // optional file filters

const stops: Array<() => Promise<void>> = []
let child: ReturnType<typeof spawn> | undefined
let stopping = false
let stopped: Promise<void> | undefined

/** Stops the test processes (their whole process group) and the servers; every caller awaits the same work. */
function stopAll(): Promise<void> {
  stopped ??= (async () => {
    await killGroup(child)
    for (const stop of stops.splice(0).reverse()) await stop().catch((e) => console.error(`stop failed: ${e}`))
  })()
  return stopped
}

async function killGroup(proc: ReturnType<typeof spawn> | undefined): Promise<void> {
  if (!proc?.pid || proc.exitCode !== null || proc.signalCode !== null) return
  const exited = new Promise((resolve) => proc.once('exit', resolve))
  const signalGroup = (sig: NodeJS.Signals) => {
    try {
      process.kill(-(proc.pid as number), sig)
    } catch {}
  }
  signalGroup('SIGTERM')
  const timer = setTimeout(() => signalGroup('SIGKILL'), 5000)
  await exited
  clearTimeout(timer)
  signalGroup('SIGKILL') // grandchildren (per-file test processes) that outlived the runner
}

function abort(reason: string, exitCode: number): void {
  if (stopping) return
  stopping = true
  console.error(`\ntest run: ${reason}, stopping servers`)
  void stopAll().finally(() => process.exit(exitCode))
}

for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
] as const)
  process.on(sig, () => abort(sig, code))

// `npm test` does not forward SIGTERM to its script: if our parent goes away, so do we.
const parentPid = process.ppid
setInterval(() => {
  if (process.ppid !== parentPid) abort(`parent process ${parentPid} is gone`, 143)
}, 250).unref()

async function testFiles(tier: Tier): Promise<string[]> {
  const root = join(PROJECT_ROOT, 'test')
  const found: string[] = []
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        if (entry.name === 'fixtures') continue
        if ((entry.name === 'integration') !== (tier === 'integration') && dir === root) continue
        await walk(path)
      } else if (entry.name.endsWith('.test.ts')) found.push(relative(PROJECT_ROOT, path))
    }
  }
  await walk(tier === 'integration' ? join(root, 'integration') : root)
  return found.filter((f) => only.length === 0 || only.some((o) => f.includes(o))).sort()
}

function runNodeTest(files: string[], env: NodeJS.ProcessEnv, concurrency: number): Promise<number> {
  return new Promise((resolve) => {
    const args = ['--import', 'tsx', '--test', '--test-reporter=spec', `--test-concurrency=${concurrency}`, ...files]
    // Own process group, so that stopping it also stops the per-file test processes it spawns.
    child = spawn(process.execPath, args, { cwd: PROJECT_ROOT, env, stdio: 'inherit', detached: true })
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)))
  })
}

/** Starts the servers for the integration tier and returns the environment the tests read them from. */
async function startServers(): Promise<NodeJS.ProcessEnv> {
  const tools = ensureTools()
  const model = ensureModels()
  const llamaPython = ensureLlamaServer()
  const chromium = ensureChromium()
  const ortGpu = ensureCudaLibraries()
  const vulkanIcd = ensureSoftwareVulkan()
  const testState = join(PROJECT_ROOT, '.seedflow', 'test')
  await mkdir(testState, { recursive: true })
  for (const dir of await readdir(testState)) {
    // another test run on this machine, still going: its servers and data are its own
    const owner = /^run-(\d+)$/.exec(dir)?.[1]
    if (owner !== undefined && Number(owner) !== process.pid && isAlive(Number(owner))) continue
    const reaped = await reapStale(join(testState, dir))
    for (const r of reaped) console.error(`test run: stopped ${r.name} (pid ${r.pid}) left by a killed run`)
    await rm(join(testState, dir), { recursive: true, force: true })
  }
  const stateDir = join(testState, `run-${process.pid}`)
  const started = Date.now()
  const owned = <T extends { stop(): Promise<void> }>(server: T): T => {
    stops.push(server.stop)
    return server
  }
  const [s3, temporal] = await Promise.all([
    startS3Server({
      binary: tools.versitygw,
      stateDir,
      dataDir: join(stateDir, 's3-data'),
      bucket: 'seedflow-test',
      detached: false,
    }).then(owned),
    startTemporalServer({ binary: tools.temporal, stateDir, uiPort: false, detached: false }).then(owned),
  ])
  console.log(
    `test run: Temporal ${temporal.address} (pid ${temporal.pid}), S3 ${s3.endpoint} (pid ${s3.pid}), ` +
      `ready in ${((Date.now() - started) / 1000).toFixed(1)} s; logs in ${relative(PROJECT_ROOT, stateDir)}`,
  )
  return {
    [TEST_ENV.temporalAddress]: temporal.address,
    [TEST_ENV.s3Endpoint]: s3.endpoint,
    [TEST_ENV.s3Bucket]: s3.bucket,
    [TEST_ENV.stateDir]: stateDir,
    [TEST_ENV.model]: model,
    [TEST_ENV.llamaPython]: llamaPython,
    [TEST_ENV.chromium]: chromium,
    [TEST_ENV.ortGpu]: ortGpu,
    [TEST_ENV.vulkanIcd]: vulkanIcd,
    [TEST_ENV.serverPids]: `${temporal.pid},${s3.pid},${process.pid}`, // this process runs the S3 write gate
  }
}

/** Type check and lint, as part of the full test command. */
function runStatic(): number {
  let code = 0
  for (const [what, args] of [
    ['typecheck', ['tsc', '--noEmit', '-p', '.']],
    ['lint', ['biome', 'check', '.']],
  ] as const) {
    const started = Date.now()
    const result = spawnSync('npx', [...args], { cwd: PROJECT_ROOT, stdio: 'inherit' })
    summary.push(
      `${what}: ${result.status === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    )
    code ||= result.status ?? 1
  }
  return code
}

let failed = false
const summary: string[] = []
try {
  if (process.argv[2] === 'all' && only.length === 0) failed = runStatic() !== 0
  ensureNativeAddon() // the native engine's tests in both tiers: built once per version of its sources
  for (const tier of tiers) {
    const files = await testFiles(tier)
    if (files.length === 0) {
      summary.push(`${tier}: no test files`)
      continue
    }
    const started = Date.now()
    const env = { ...process.env, ...(tier === 'integration' ? await startServers() : {}) }
    console.log(`\n=== ${tier} tier: ${files.length} files ===`)
    const code = await runNodeTest(files, env, tier === 'integration' ? 1 : 2)
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    summary.push(`${tier}: ${code === 0 ? 'passed' : 'FAILED'} in ${seconds} s`)
    failed ||= code !== 0
  }
} catch (error) {
  failed = true
  summary.push(`error: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  await stopAll()
}
console.log(`\n${summary.map((s) => `test run: ${s}`).join('\n')}`)
process.exit(failed ? 1 : 0)
