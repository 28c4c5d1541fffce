import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import {
  exactMatch,
  generateSearchqa,
  INVALID_MESSAGE,
  normalizeAnswer,
  parseSearchqa,
  QUESTION_TYPES,
  questionTypes,
  searchqa,
  searchqaWithRetriever,
  UNSEEN_RELATIONS,
} from '../../envs/searchqa/index.ts'
import { formatInformation, localRetriever, searchR1Retriever } from '../../envs/searchqa/retriever.ts'

describe('searchqa', () => {
  it('normalizes answers as Search-R1 does', () => {
    assert.equal(normalizeAnswer('  The  Glass-Orchard! '), 'glassorchard')
    assert.ok(exactMatch('the Rosarford.', ['Rosarford']))
    assert.ok(!exactMatch('Rosarford city', ['Rosarford']))
  })

  it('parses one <search> or one <answer>, and rejects both, repeats and neither', () => {
    assert.deepEqual(parseSearchqa('<think>x</think><search>  a  b </search>'), {
      ok: true,
      action: '<search> a b </search>',
    })
    assert.deepEqual(parseSearchqa('<answer>Dahaven</answer>'), { ok: true, action: '<answer> Dahaven </answer>' })
    assert.equal(parseSearchqa('<search>a</search><answer>b</answer>').ok, false)
    assert.equal(parseSearchqa('<search>a</search><search>b</search>').ok, false)
    assert.equal(parseSearchqa('just text').ok, false)
    assert.equal(parseSearchqa('<search>unclosed').ok, false)
  })

  it('returns the top 3 passages in the Search-R1 information format', () => {
    const ep = searchqa.reset(searchqa.task('train', 1))
    const r = ep.step('<search> Isda Media </search>')
    assert.match(
      r.observation,
      /^\n<information>Doc 1\(Title: .+\) .+\nDoc 2\(Title: .+\) .+\nDoc 3\(Title: .+\) .+\n<\/information>\n$/,
    )
  })

  it('answers unusable output with the invalid message and spends the turn', () => {
    const ep = searchqa.reset(searchqa.task('train', 1))
    const r = ep.step('I think the answer is 42')
    assert.deepEqual([r.observation, r.valid, r.reward, ep.stepCount], [INVALID_MESSAGE, false, 0, 1])
  })

  it('pays 1 for an exact-match answer and 0 otherwise, ending the episode', () => {
    const task = generateSearchqa({ split: 'train', seed: 3 })
    const right = searchqa.reset({ split: 'train', seed: 3 }).step(`<answer> ${task.answers[0]} </answer>`)
    const wrong = searchqa.reset({ split: 'train', seed: 3 }).step('<answer> nobody </answer>')
    assert.deepEqual([right.reward, right.done, right.info.won], [1, true, true])
    assert.deepEqual([wrong.reward, wrong.done, wrong.info.won], [0, true, false])
  })

  it('holds out relation types: only test-unseen asks about them', () => {
    for (const split of ['train', 'validation', 'test-seen'] as const) {
      for (const q of questionTypes(split)) assert.ok(!QUESTION_TYPES[q].hops.some((h) => UNSEEN_RELATIONS.includes(h)))
    }
    for (const q of questionTypes('test-unseen'))
      assert.ok(QUESTION_TYPES[q].hops.some((h) => UNSEEN_RELATIONS.includes(h)))
    const families = new Set<string>()
    for (let seed = 0; seed < 40; seed++) families.add(searchqa.reset(searchqa.task('train', seed)).info.family)
    assert.deepEqual([...families].sort(), ['single-hop', 'two-hop'])
  })

  describe('Search-R1 /retrieve adapter', () => {
    let url = ''
    const server = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => {
        body += c
      })
      req.on('end', () => {
        const { queries, topk } = JSON.parse(body) as { queries: string[]; topk: number }
        const result = queries.map((q) =>
          localRetriever()
            .retrieve(q, topk)
            .map((p) => ({ document: { contents: `"${p.title}"\n${p.text}` }, score: 1 })),
        )
        res.setHeader('content-type', 'application/json')
        res.end(JSON.stringify({ result }))
      })
    })
    before(async () => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    })
    after(() => new Promise<void>((resolve) => server.close(() => resolve())))

    it('reads the same passages from a /retrieve server as the local corpus gives', async () => {
      const remote = searchR1Retriever(url)
      for (const q of ['Isda Media', 'Rospel Foods founder', 'The Glass Orchard']) {
        assert.equal(formatInformation(await remote.retrieve(q, 3)), formatInformation(localRetriever().retrieve(q, 3)))
      }
    })

    it('plays an episode over the /retrieve server exactly as over the local corpus', async () => {
      const remote = searchqaWithRetriever(searchR1Retriever(url))
      for (const seed of [0, 1, 2, 3]) {
        const ref = searchqa.task('test-unseen', seed)
        const local = searchqa.reset(ref)
        const ep = remote.reset(ref)
        while (!local.done) {
          const response = searchqa.formatResponse(local.expertAction(), '')
          assert.equal(ep.prompt(), local.prompt())
          assert.deepEqual(await ep.step(response), local.step(response))
        }
        assert.equal(ep.done, true)
        assert.deepEqual(ep.trajectory(), local.trajectory())
      }
    })

    it('fails with the URL and attempt count when the server is unreachable', async () => {
      const dead = searchR1Retriever('http://127.0.0.1:9', { timeoutMs: 500, retries: 1 })
      await assert.rejects(dead.retrieve('x', 3), /127\.0\.0\.1:9\/retrieve failed after 2 attempts/)
    })
  })
})
