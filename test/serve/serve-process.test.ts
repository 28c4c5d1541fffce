// `npx seedflow serve` as an operator starts it: npm runs the CLI under `sh -c` and forwards SIGTERM only to that
// shell, which dies without passing it on. The server must still stop: it notices its parent is gone, shuts down
// and frees the port. Its stderr carries one access-log line per request, without the API key; `--cors` reaches
// the server.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import OpenAI from 'openai'
import { servedCheckpoint, writeCheckpointFolder } from './served-checkpoint.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const KEY = 'sk-process-test-5e1d'
const ORIGIN = 'http://localhost:5173'

async function answers(url: string): Promise<boolean> {
  try {
    await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) })
    return true
  } catch {
    return false
  }
}

describe('npx seedflow serve', () => {
  let dir: string
  let child: ChildProcess | undefined
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'seedflow-serve-process-'))
    writeCheckpointFolder(join(dir, 'tiny-chat'), servedCheckpoint({ chat: true }))
  })
  after(() => {
    // the whole group (npm, its shell, the server), should the server have outlived its parent
    if (child?.pid !== undefined)
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {}
    rmSync(dir, { recursive: true, force: true })
  })

  it('stops serving and exits when npx gets SIGTERM; the access log never holds the key', async () => {
    const args = [
      ...['serve', join(dir, 'tiny-chat'), '--port', '0', '--threads', '1'],
      ...['--api-key-env', 'TEST_KEY', '--cors', ORIGIN],
    ]
    const npx = spawn('npx', ['--offline', 'seedflow', ...args], {
      cwd: ROOT,
      detached: true, // its own process group, so that `after` can reap whatever is left
      env: { ...process.env, TEST_KEY: KEY },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child = npx
    let err = ''
    npx.stderr?.on('data', (d) => {
      err += d
    })
    // the pipes close once every process holding them has exited: npm, its shell and the server
    const closed = new Promise<void>((resolve) => npx.on('close', () => resolve()))
    const url = await new Promise<string>((resolve, reject) => {
      let out = ''
      npx.stdout?.on('data', (d) => {
        out += d
        const found = / at (http:\/\/\S+)\/v1 /.exec(out)?.[1]
        if (found) resolve(found)
      })
      npx.on('exit', (code) => reject(new Error(`npx exited ${code} before the server listened:\n${err}`)))
    })
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0 })
    assert.equal((await client.models.list()).data[0]?.id, 'tiny-chat')
    const preflight = await fetch(`${url}/v1/models`, {
      method: 'OPTIONS',
      headers: { Origin: ORIGIN, 'Access-Control-Request-Method': 'GET' },
    })
    assert.equal(preflight.status, 204)
    assert.equal(preflight.headers.get('access-control-allow-origin'), ORIGIN)

    npx.kill('SIGTERM') // npm alone, as `kill <pid of npx>` does
    let bound: NodeJS.Timeout | undefined
    const outcome = await Promise.race([
      closed.then(() => 'exited'),
      new Promise<string>((resolve) => {
        bound = setTimeout(() => resolve('still running'), 15_000)
      }),
    ])
    clearTimeout(bound)
    assert.equal(outcome, 'exited', `the server outlived npx by 15 s (orphaned):\n${err}`)
    assert.equal(await answers(url), false, `${url} still answers`)
    assert.match(err, /seedflow: parent exited: no new requests/)
    assert.match(err, /^seedflow: GET \/v1\/models 200 prompt_tokens=0 completion_tokens=0 [\d.]+ms$/m)
    assert.ok(!err.includes(KEY), `the API key is on stderr:\n${err}`)
  })
})
