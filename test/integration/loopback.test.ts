import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { testServers } from './servers.ts'

test('every socket the test servers listen on is bound to 127.0.0.1', (t) => {
  const ss = spawnSync('ss', ['-ltnpH'], { encoding: 'utf8' })
  if (ss.error || ss.status !== 0) {
    t.skip(`cannot run 'ss -ltnpH' (${ss.error?.message ?? ss.stderr.trim()}); install iproute2 to check sockets`)
    return
  }
  const { serverPids } = testServers()
  const sockets = ss.stdout
    .split('\n')
    .filter((line) => serverPids.some((pid) => line.includes(`pid=${pid},`)))
    .map((line) => line.trim().split(/\s+/)[3] as string)
  assert.ok(sockets.length >= 3, `expected the servers' listening sockets, found ${sockets.join(', ') || 'none'}`)
  for (const local of sockets) assert.match(local, /^127\.0\.0\.1:\d+$/, `listening on ${local}`)
})
