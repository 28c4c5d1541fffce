// The local dev server (`seedflow up` / `seedflow run`) serves its HTTP API on the SEEDFLOW_TEMPORAL_HTTP_PORT
// asked for, not on a port the `temporal` CLI picks at random (issue 40 item 9), and records it for `seedflow up`.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { downLocal, upTemporal } from '../../infra/local-stack.ts'
import { freePort } from '../../infra/ports.ts'

test('the dev server answers HTTP on SEEDFLOW_TEMPORAL_HTTP_PORT', async () => {
  const home = await mkdtemp(join(tmpdir(), 'seedflow-dev-ports-'))
  const [port, http, ui, metrics] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const env = {
    ...process.env,
    SEEDFLOW_HOME: home,
    SEEDFLOW_TEMPORAL_PORT: String(port),
    SEEDFLOW_TEMPORAL_HTTP_PORT: String(http),
    SEEDFLOW_TEMPORAL_UI_PORT: String(ui),
    SEEDFLOW_TEMPORAL_METRICS_PORT: String(metrics),
  }
  try {
    const server = await upTemporal(env)
    assert.equal(server.httpUrl, `http://127.0.0.1:${http}`)
    const answer = await fetch(`http://127.0.0.1:${http}/api/v1/namespaces/default`)
    assert.equal(answer.status, 200)
    assert.equal(((await answer.json()) as { namespaceInfo?: { name?: string } }).namespaceInfo?.name, 'default')
    // reused: the recorded HTTP API comes back with it
    assert.equal((await upTemporal(env)).httpUrl, `http://127.0.0.1:${http}`)
  } finally {
    await downLocal(env)
    await rm(home, { recursive: true, force: true })
  }
})
