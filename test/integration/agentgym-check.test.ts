// AgentGym's clients against `seedflow env serve sokoban`: examples/agentgym/check.py replays the requests each of
// AgentGym's client classes sends (no PyPI package holds them: examples/agentgym/README.md) and checks every reply
// field the client reads. With --bare-actions the server takes the clients' parsed actions, and the five clients
// that name an episode by `id` play it unchanged; the `env_idx` ones and Wordle's /filtered_vocab do not.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const CHECK = fileURLToPath(new URL('../../examples/agentgym/check.py', import.meta.url))
const ROOT = fileURLToPath(new URL('../../', import.meta.url))

const check = (...args: string[]) =>
  spawnSync('python3', [CHECK, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 })

test('the protocol core AgentGym shares holds; with --bare-actions its five id clients play the server', () => {
  const plain = check()
  assert.equal(plain.status, 0, plain.stdout + plain.stderr)
  assert.match(plain.stdout, /^ {2}ok$/m)
  assert.match(plain.stdout, /0 of 9 AgentGym client profiles play seedflow's server unchanged/)
  const bare = check('--bare-actions')
  assert.equal(bare.status, 0, bare.stdout + bare.stderr)
  for (const client of ['BabyAI', 'Sciworld', 'TextCraft', 'Maze', 'AlfWorld'])
    assert.match(bare.stdout, new RegExp(`works +${client}EnvClient`))
  assert.match(bare.stdout, /5 of 9 AgentGym client profiles play seedflow's server unchanged/)
})
