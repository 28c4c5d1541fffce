// The local dev server's ports come from SEEDFLOW_TEMPORAL_* settings, its HTTP API's too (issue 40 item 9: the
// `temporal` CLI picked a random HTTP port outside the configured ones when none was given).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { HTTP_PORT_OFFSET, LOCAL_PORTS, localTemporalPorts } from '../../infra/local-stack.ts'
import { devServerArgs } from '../../infra/temporal-server.ts'

const argAfter = (args: string[], flag: string) => args[args.indexOf(flag) + 1]

describe('local dev server ports', () => {
  it('default to 7233, 7243 (the HTTP API), 8233 and 9233', () => {
    assert.deepEqual(localTemporalPorts({}), {
      port: LOCAL_PORTS.temporal,
      httpPort: LOCAL_PORTS.temporal + HTTP_PORT_OFFSET,
      uiPort: LOCAL_PORTS.ui,
      metricsPort: LOCAL_PORTS.metrics,
    })
    assert.equal(localTemporalPorts({}).httpPort, 7243)
  })

  it('the HTTP API follows the frontend unless SEEDFLOW_TEMPORAL_HTTP_PORT names its own', () => {
    assert.equal(localTemporalPorts({ SEEDFLOW_TEMPORAL_PORT: '17233' }).httpPort, 17243)
    const ports = localTemporalPorts({ SEEDFLOW_TEMPORAL_PORT: '17233', SEEDFLOW_TEMPORAL_HTTP_PORT: '17300' })
    assert.equal(ports.httpPort, 17300)
    assert.throws(
      () => localTemporalPorts({ SEEDFLOW_TEMPORAL_HTTP_PORT: '70000' }),
      /^Error: SEEDFLOW_TEMPORAL_HTTP_PORT must be a port number, got "70000"$/,
    )
  })

  it('every port is passed to the server: none is left for it to pick', () => {
    const args = devServerArgs({ port: 17233, httpPort: 17243, metricsPort: 19233, uiPort: 18233 })
    assert.equal(argAfter(args, '--port'), '17233')
    assert.equal(argAfter(args, '--http-port'), '17243')
    assert.equal(argAfter(args, '--metrics-port'), '19233')
    assert.equal(argAfter(args, '--ui-port'), '18233')
    assert.equal(argAfter(args, '--ip'), '127.0.0.1')
    assert.equal(argAfter(args, '--ui-ip'), '127.0.0.1')
    assert.ok(devServerArgs({ port: 1, httpPort: 2, metricsPort: 3, uiPort: false }).includes('--headless'))
  })
})
