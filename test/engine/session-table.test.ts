// The sessions table the local and native engines share (engine/session-table.ts).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SessionTable } from '../../engine/session-table.ts'

describe('engine/session-table', () => {
  it('makes one session per id and evicts the least recently used beyond the cap', async () => {
    const dropped: string[] = []
    const table = new SessionTable<string>(2, (id) => dropped.push(id))
    let made = 0
    const make = (v: string) => () => Promise.resolve(`${v}${++made}`)
    assert.equal(await table.acquire('a', make('a')), 'a1')
    assert.equal(await table.acquire('a', make('a')), 'a1', 'a second load shares the session')
    await table.acquire('b', make('b'))
    assert.equal(await table.release('b'), 'b2', 'its last reference: the session comes out of the table')
    assert.equal(await table.acquire('b', make('b')), 'b3', 'made anew')
    await table.get('a') // a is now the most recently used
    await table.acquire('c', make('c')) // over the cap: the least recently used is b
    assert.deepEqual(dropped, ['b'])
    assert.throws(() => table.get('b'), /model b is not loaded in this engine/)
  })

  it('gives the session back with the last reference, and forgets one whose making failed', async () => {
    const table = new SessionTable<string>(4, () => undefined)
    await table.acquire('a', () => Promise.resolve('s'))
    await table.acquire('a', () => Promise.resolve('other'))
    assert.equal(table.release('a'), undefined, 'one reference left')
    assert.equal(await table.release('a'), 's')
    assert.throws(() => table.get('a'), /not loaded/)
    await assert.rejects(
      table.acquire('x', () => Promise.reject(new Error('no'))),
      /no/,
    )
    assert.equal(await table.acquire('x', () => Promise.resolve('again')), 'again', 'made anew')
  })
})
