import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { BYTE_TO_CHAR, trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import { TextTokenizer, TINY_SPECIAL_TOKENS } from '../../policy/tokenizer.ts'

const CORPUS = [
  'Your task is to: put a clean mug in the coffee machine.',
  'You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1.',
  '<think>The box is left of the target.</think><action>push left</action>',
  'Your goal is to make 12 with the cards 5 and 7: 5+7=12',
  "Now it's your turn to take an action. Nothing happens.",
  'Ünïcödé text, emojis 🙂 and tabs\tstay round-trippable.',
]
const TRAIN = Array.from({ length: 20 }, () => CORPUS).flat()

describe('byte-level BPE tokenizer', () => {
  const json = trainByteLevelBpe(TRAIN, { vocabSize: 400, specialTokens: [...TINY_SPECIAL_TOKENS] })
  const tokenizer = new TextTokenizer(json)

  it('has the requested vocabulary: special tokens first, then the 256 bytes, then merges', () => {
    assert.equal(tokenizer.vocabSize, 400)
    assert.equal(tokenizer.tokenId('<|endoftext|>'), 0)
    assert.equal(tokenizer.tokenId(BYTE_TO_CHAR[65] as string), 3 + 65)
    assert.equal(json.model.merges.length, 400 - 259)
  })

  it('is deterministic', () => {
    const again = trainByteLevelBpe([...TRAIN], { vocabSize: 400, specialTokens: [...TINY_SPECIAL_TOKENS] })
    assert.equal(JSON.stringify(again), JSON.stringify(json))
  })

  it('round-trips any text through the tokenizer library, unseen characters included', () => {
    for (const text of [...CORPUS, 'entirely 新しい text ∑ with \u0000 control and\n\nnewlines', '']) {
      assert.equal(tokenizer.decode(tokenizer.encode(text)), text)
    }
  })

  it('compresses frequent words into single tokens', () => {
    assert.equal(tokenizer.encode(' the').length, 1)
    assert.ok(tokenizer.encode(CORPUS[0] as string).length < Buffer.byteLength(CORPUS[0] as string) / 2.5)
  })

  it('encodes a text again to the same ids, however the caller changed the ids it got (the last text is kept)', () => {
    const text = CORPUS[1] as string
    const first = tokenizer.encode(text)
    const expected = [...first]
    first.fill(-1)
    assert.deepEqual(tokenizer.encode(text), expected)
    assert.notDeepEqual(tokenizer.encode(CORPUS[2] as string), expected)
    assert.deepEqual(tokenizer.encode(text), expected)
  })

  it('keeps special tokens whole and uses the first as end of sequence', () => {
    const ids = tokenizer.encode('<|im_start|>user hi<|im_end|>')
    assert.equal(ids[0], 1)
    assert.equal(ids.at(-1), 2)
    assert.deepEqual(tokenizer.eosIds, [0])
  })

  it('refuses a vocabulary smaller than the byte alphabet', () => {
    assert.throws(() => trainByteLevelBpe(['x'], { vocabSize: 100, specialTokens: [] }), /vocabSize 100 is below 256/)
  })
})
