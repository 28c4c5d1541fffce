// A choice's text as its tokens arrive: whole characters only, cut before a stop string, a possible start of a
// stop string held back until it is decided, and the same text as decoding all tokens at once.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { TextTokenizer } from '../../policy/tokenizer.ts'
import { ChoiceText } from '../../serve/choice-text.ts'
import { servedCheckpoint } from './served-checkpoint.ts'

const checkpoint = servedCheckpoint({ chat: false })
const tokenizer = new TextTokenizer(checkpoint.tokenizerJson as object, {}, [0])
const decode = (ids: readonly number[]) => tokenizer.decode(ids, { skipSpecial: true })
/** Byte-level tokens of text the BPE never merged: a multi-byte character spans several tokens. */
const bytes = (text: string) => tokenizer.encode(text)

function feed(text: ChoiceText, ids: number[]): string[] {
  return ids.map((id) => text.push(id))
}

describe('choice text', () => {
  it('hands out whole characters only, and adds up to the decoding of all tokens', () => {
    const ids = bytes('a✓ 日本語 é!')
    assert.ok(ids.length > [...'a✓ 日本語 é!'].length, 'multi-byte characters span several tokens')
    const text = new ChoiceText(decode)
    const deltas = feed(text, ids)
    assert.ok(deltas.every((d) => !d.includes('\uFFFD')))
    assert.equal(deltas.join('') + text.flush(), decode(ids))
  })

  it('cuts the text before the first stop string and says it stopped', () => {
    const text = new ChoiceText(decode, ['STOP', 'xyz'])
    const deltas = feed(text, bytes('hello ST'))
    assert.equal(deltas.join(''), 'hello ', '"ST" could start a stop string: held back')
    const more = feed(text, bytes('OP and more'))
    assert.equal(text.stopped, true)
    assert.equal(deltas.join('') + more.join(''), 'hello ')
    assert.equal(text.flush(), '')
  })

  it('releases held-back text that did not become a stop string', () => {
    const text = new ChoiceText(decode, ['STOP'])
    const deltas = feed(text, bytes('a STx'))
    assert.equal(deltas.join(''), 'a STx')
    assert.equal(text.stopped, false)
  })
})
