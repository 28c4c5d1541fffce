// `seedflow chat` in a terminal: readline puts a TTY stdin in raw mode, so what the user types shows only when
// readline echoes it to a terminal. Without a real terminal, stdin and the echo stream are PassThroughs that say
// they are TTYs; where util-linux `script` exists, the CLI also runs on a real pseudo-terminal. Line editing keys
// (arrows, history) are not tested.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { stripVTControlCharacters } from 'node:util'
import { chatCommand, chatReadlineOptions } from '../../cli/chat-command.ts'
import { servedCheckpoint, writeCheckpointFolder } from './served-checkpoint.ts'

const BIN = fileURLToPath(new URL('../../cli/bin.js', import.meta.url))

function fakeTty(): PassThrough & { isTTY: boolean; columns: number; setRawMode(on: boolean): void; raw: boolean } {
  return Object.assign(new PassThrough(), {
    isTTY: true,
    columns: 80,
    raw: false,
    setRawMode(this: { raw: boolean }, on: boolean) {
      this.raw = on
    },
  })
}

function collect(stream: PassThrough): () => string {
  let text = ''
  stream.on('data', (d) => {
    text += d
  })
  return () => text
}

describe('seedflow chat in a terminal', () => {
  let dir: string
  let folder: string
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'seedflow-chat-tty-'))
    folder = writeCheckpointFolder(join(dir, 'tiny-chat'), servedCheckpoint({ chat: true }))
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('echoes what the user types, after a "> " prompt, to the terminal (stderr), not to stdout', async () => {
    const input = fakeTty()
    const echo = fakeTty()
    const echoed = collect(echo)
    let out = ''
    let err = ''
    const chat = chatCommand(
      folder,
      { maxTokens: 3, temperature: 0, threads: 1 },
      { out: (t) => (out += t), err: (t) => (err += t) },
      input,
      echo,
    )
    input.write('hello there\r')
    input.write('/exit\r')
    await chat
    assert.equal(input.raw, false, 'raw mode is left when the chat ends')
    assert.match(stripVTControlCharacters(echoed()), /^> hello there\r?\n/)
    assert.ok(!out.includes('hello there'), `stdout holds replies only: ${JSON.stringify(out)}`)
    assert.match(err, /seedflow: 3 tokens \(prompt \d+\)/)
  })

  // util-linux `script` runs the CLI on a real pseudo-terminal: raw mode and echo as a user's terminal has them
  const script = spawnSync('script', ['--version'], { encoding: 'utf8' })
  it('echoes typed lines on a real pseudo-terminal (util-linux script)', {
    skip: script.status === 0 ? false : 'no util-linux `script` on this machine to give the CLI a pseudo-terminal',
  }, async () => {
    const command = [process.execPath, BIN, 'chat', folder, '--max-tokens', '2', '--threads', '1']
      .map((a) => `'${a}'`)
      .join(' ')
    const child = spawn('script', ['-qfc', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] })
    const bound = setTimeout(() => child.kill('SIGKILL'), 60_000)
    let screen = ''
    let typed = 0
    child.stdout.on('data', (d) => {
      screen += d
      const shown = stripVTControlCharacters(screen)
      // type each line only once the chat asks for it
      if (typed === 0 && shown.includes('> ')) {
        typed = 1
        child.stdin.write('hello there\r')
      } else if (typed === 1 && /seedflow: 2 tokens/.test(shown)) {
        typed = 2
        child.stdin.write('/exit\r')
      }
    })
    await new Promise((resolve) => child.on('close', resolve))
    clearTimeout(bound)
    const shown = stripVTControlCharacters(screen)
    assert.match(shown, /> hello there\r*\n/)
    assert.match(shown, /> \/exit/)
  })

  it('lets the terminal echo (no raw mode) when there is no terminal to echo to', () => {
    const input = fakeTty()
    const options = chatReadlineOptions(input, new PassThrough())
    assert.equal(options.terminal, false)
  })

  it('reads a pipe line by line without echo or prompt', () => {
    const options = chatReadlineOptions(new PassThrough(), fakeTty())
    assert.deepEqual([options.terminal, options.output], [false, undefined])
  })
})
