// The embedded dev server of a state folder (`seedflow up` / `seedflow run`): started once, reused after, and a
// port asked for that is not the running server's is refused with what to do, not silently swapped for it.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { downLocal, upTemporal } from '../../infra/local-stack.ts'
import { freePort } from '../../infra/ports.ts'

test('the dev server of a state folder is reused, and another port for it is refused', async () => {
  const home = await mkdtemp(join(tmpdir(), 'seedflow-local-stack-'))
  const [port, ui, metrics, other] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const env = {
    ...process.env,
    SEEDFLOW_HOME: home,
    SEEDFLOW_TEMPORAL_PORT: String(port),
    SEEDFLOW_TEMPORAL_HTTP_PORT: String(await freePort()),
    SEEDFLOW_TEMPORAL_UI_PORT: String(ui),
    SEEDFLOW_TEMPORAL_METRICS_PORT: String(metrics),
  }
  try {
    const first = await upTemporal(env)
    assert.equal(first.reused, false)
    assert.equal(first.address, `127.0.0.1:${port}`)
    const again = await upTemporal(env)
    assert.deepEqual([again.reused, again.pid], [true, first.pid])
    const { SEEDFLOW_TEMPORAL_PORT: _, ...unset } = env
    assert.equal((await upTemporal(unset)).pid, first.pid)
    await assert.rejects(
      upTemporal({ ...env, SEEDFLOW_TEMPORAL_PORT: String(other) }),
      new RegExp(
        `SEEDFLOW_TEMPORAL_PORT is ${other}, but the dev server of .*seedflow-local-stack-.* already runs at ` +
          `127\\.0\\.0\\.1:${port} \\(pid ${first.pid}\\): .*npx seedflow down.*SEEDFLOW_HOME`,
      ),
    )
  } finally {
    await downLocal(env)
    await rm(home, { recursive: true, force: true })
  }
})
