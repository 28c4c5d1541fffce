import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  type AnalyzerEpisode,
  type AnalyzerParse,
  analyzerPrompt,
  episodeOutcome,
  extractTaskDescription,
  isFormatPlaceholder,
  MAX_ANSWER_CHARS,
  parseAnalyzerOutput,
  parseStats,
} from '../../seed/index.ts'

const EPISODE: AnalyzerEpisode = {
  outcome: 'failure',
  steps: [
    {
      prompt: 'You are an expert agent. Your task is to:   put a  clean mug in coffeemachine.\nNow act.',
      observation: 'You are in the middle of a room.',
      response: '<think>look first</think><action>go to sink 1</action>',
      valid: true,
    },
    { observation: 'You arrive at sink 1.', response: 'I will clean it', valid: false },
  ],
}

describe('analyzer prompt', () => {
  const prompt = analyzerPrompt(EPISODE)

  it("knows the return format's placeholder when an answer copies it back as its skill", () => {
    assert.ok(prompt.includes('{"episode_summary": "string", "episode_skill": "string"}'))
    const copied = parseAnalyzerOutput('{"episode_summary":"string","episode_skill":"string"}')
    assert.ok(copied.ok && isFormatPlaceholder(copied.output.episodeSkill))
    assert.equal(isFormatPlaceholder(' String '), true)
    assert.equal(isFormatPlaceholder('find the desklamp first'), false)
    assert.equal(isFormatPlaceholder(null), false)
  })

  it('asks for only the two JSON fields, with the return format', () => {
    assert.match(prompt, /^Analyze the agent episode below and answer with ONLY valid JSON\./)
    assert.ok(prompt.includes('1. Write a concise episode_summary.'))
    assert.ok(prompt.includes('Return only these two top-level fields: episode_summary, episode_skill.'))
    assert.ok(prompt.includes('{"episode_summary": "string", "episode_skill": "string"}'))
    assert.ok(prompt.includes('one short skill addressed to the policy, not as a retrospective explanation'))
  })

  it('renders one block per step: 0-based index, raw observation, full response, validity', () => {
    const expected =
      '- Interaction trajectory:\n' +
      'Step 0\nObservation: You are in the middle of a room.\n' +
      'Response: <think>look first</think><action>go to sink 1</action>\nAction valid: true\n' +
      'Step 1\nObservation: You arrive at sink 1.\nResponse: I will clean it\nAction valid: false\n'
    assert.ok(prompt.endsWith(expected), prompt)
    assert.ok(!prompt.includes('You are an expert agent'), 'the templated prompt itself is not shown')
  })

  it('finds the task in the step prompt and collapses its whitespace', () => {
    assert.ok(prompt.includes('- Task description: put a clean mug in coffeemachine.\n'))
    assert.ok(prompt.includes('- episode_success: failure\n'))
  })

  it('words the skill instruction by outcome', () => {
    const of = (outcome: AnalyzerEpisode['outcome']) => analyzerPrompt({ ...EPISODE, outcome })
    assert.ok(of('success').includes('turns this successful trajectory into a workflow: the core decision rule'))
    assert.ok(of('failure').includes('turns this failed trajectory into avoidance rules: the core mistake'))
    assert.ok(of('unknown').includes('if it succeeded, the workflow that made it work; if it failed, the avoidance'))
    assert.ok(of('unknown').includes('- episode_success: unknown\n'))
  })

  it('prefers a given task, says "(not available)" when there is none, and omits unknown validity', () => {
    assert.ok(analyzerPrompt({ ...EPISODE, task: 'heat an egg' }).includes('- Task description: heat an egg\n'))
    const bare = analyzerPrompt({ outcome: 'success', steps: [{ observation: 'o', response: 'r' }] })
    assert.ok(bare.includes('- Task description: (not available)\n'))
    assert.ok(bare.endsWith('Step 0\nObservation: o\nResponse: r\n'))
  })

  it('leaves out the oldest steps when asked, keeping the original indices', () => {
    const cut = analyzerPrompt(EPISODE, { firstStep: 1 })
    assert.ok(cut.includes('(steps 0-0 omitted to fit the context)\nStep 1\n'))
    assert.ok(!cut.includes('Step 0\n'))
  })

  it('extracts the task after each task phrase, case-insensitively', () => {
    assert.equal(extractTaskDescription('Your task is to: find a key\nmore'), 'find a key')
    assert.equal(extractTaskDescription('your TASK is: buy shoes'), 'buy shoes')
    assert.equal(extractTaskDescription('Your current task is: open the door'), 'open the door')
    assert.equal(extractTaskDescription('Your question: who wrote Hamlet?'), 'who wrote Hamlet?')
    assert.equal(extractTaskDescription('no task here'), '')
  })

  it('labels outcomes at the 1.0 threshold', () => {
    assert.equal(episodeOutcome(10), 'success')
    assert.equal(episodeOutcome(1), 'success')
    assert.equal(episodeOutcome(0.99), 'failure')
    assert.equal(episodeOutcome(null), 'unknown')
    assert.equal(episodeOutcome(Number.NaN), 'unknown')
  })
})

const skillOf = (r: AnalyzerParse) => (r.ok ? r.output.episodeSkill : `FAILED ${r.code}: ${r.reason}`)

describe('analyzer answer parsing', () => {
  it('reads plain JSON', () => {
    const r = parseAnalyzerOutput('{"episode_summary": "went to sink", "episode_skill": "Clean before placing."}')
    assert.deepEqual(r, { ok: true, output: { episodeSummary: 'went to sink', episodeSkill: 'Clean before placing.' } })
  })

  it('reads a fenced block with prose around it', () => {
    const r = parseAnalyzerOutput(
      'Sure! Here it is:\n```json\n{"episode_summary": "s", "episode_skill": "k"}\n```\nDone.',
    )
    assert.equal(skillOf(r), 'k')
  })

  it('reads an object after a <think> block that contains braces', () => {
    const r = parseAnalyzerOutput(
      '<think>maybe {x} or {"a": 1}</think>\n{"episode_summary": "s", "episode_skill": "k2"}',
    )
    assert.equal(skillOf(r), 'k2')
  })

  it('prefers the object that has episode_skill over an earlier one', () => {
    const r = parseAnalyzerOutput('{"note": "draft"} then {"episode_summary": "s", "episode_skill": "final"}')
    assert.equal(skillOf(r), 'final')
  })

  it('repairs trailing commas, raw newlines in strings, single quotes and Python literals', () => {
    assert.equal(skillOf(parseAnalyzerOutput('{"episode_summary": "s", "episode_skill": "k",}')), 'k')
    assert.equal(
      skillOf(parseAnalyzerOutput('{"episode_summary": "a\nb", "episode_skill": "line1\nline2"}')),
      'line1\nline2',
    )
    assert.equal(
      skillOf(parseAnalyzerOutput("{'episode_summary': 's', 'episode_skill': 'it\\'s fine', 'x': None}")),
      "it's fine",
    )
    assert.equal(skillOf(parseAnalyzerOutput('{"episode_skill": "k", "ok": True, "n": [1, 2.5e3, -3,]}')), 'k')
  })

  it('decodes escapes, including unicode', () => {
    assert.equal(
      skillOf(parseAnalyzerOutput('{"episode_skill": "caf\\u00e9 \\"quoted\\" \\\\ tab\\tend"}')),
      'café "quoted" \\ tab\tend',
    )
  })

  it('trims the skill and tolerates a missing summary', () => {
    const r = parseAnalyzerOutput('{"episode_skill": "  spaced  "}')
    assert.deepEqual(r, { ok: true, output: { episodeSummary: '', episodeSkill: 'spaced' } })
  })

  it('says why it failed, with a code for counting', () => {
    const cases: Array<[string, string, RegExp]> = [
      ['I cannot do that.', 'no-json-object', /no '\{' in an answer of 17 characters/],
      ['{"episode_skill": "unterminated', 'invalid-json', /unterminated string/],
      ['{"episode_summary": "only summary"}', 'missing-skill', /keys: episode_summary/],
      ['{"episode_summary": "s", "episode_skill": "   "}', 'empty-skill', /empty/],
      ['{"episode_skill": {"nested": 1}}', 'missing-skill', /an object, not text/],
      ['{"episode_skill": null}', 'missing-skill', /null, not text/],
    ]
    for (const [answer, code, reason] of cases) {
      const r = parseAnalyzerOutput(answer)
      assert.equal(r.ok, false, answer)
      if (!r.ok) {
        assert.equal(r.code, code, answer)
        assert.match(r.reason, reason)
      }
    }
  })

  it('never throws on adversarial answers', () => {
    const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`
    const adversarial = [
      '',
      '{',
      '}{',
      '{{{{{{{{{{',
      `{"episode_skill": ${deep}}`,
      `{"a": ${'{"a": '.repeat(3000)}1${'}'.repeat(3000)}}`,
      '{"__proto__": {"polluted": true}, "episode_skill": "k"}',
      '{"episode_skill": "\\u12"}',
      '{"episode_skill": "x\\',
      '```json\n```',
      '```',
      '{"episode_skill": 1e999999}',
      '{"episode_skill": -}',
      '\u0000{\u0000"episode_skill"\u0000:\u0000"k"}',
      '{"episode_skill": "k"'.repeat(2000),
      '{"episode_skill": "😀 \ud800"}',
      'x'.repeat(MAX_ANSWER_CHARS + 1),
      `{"episode_skill": "${'a'.repeat(100_000)}`,
    ]
    for (const answer of adversarial) {
      const r = parseAnalyzerOutput(answer)
      assert.equal(typeof r.ok, 'boolean')
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution')
    assert.equal(skillOf(parseAnalyzerOutput('{"__proto__": {"polluted": true}, "episode_skill": "k"}')), 'k')
    const tooLong = parseAnalyzerOutput('x'.repeat(MAX_ANSWER_CHARS + 1))
    assert.ok(!tooLong.ok && tooLong.code === 'too-long')
  })

  it('stays fast on many unclosed objects', () => {
    const started = performance.now()
    parseAnalyzerOutput(`{"k": "${'v'.repeat(50)}", `.repeat(4000))
    const ms = performance.now() - started
    assert.ok(ms < 2000, `took ${ms} ms`)
  })

  it('counts parse outcomes and failure codes', () => {
    const results = ['{"episode_skill": "a"}', 'nothing', '{"episode_skill": ""}', '{"episode_skill": "b"}'].map(
      parseAnalyzerOutput,
    )
    const stats = parseStats(results)
    assert.equal(stats.total, 4)
    assert.equal(stats.parsed, 2)
    assert.equal(stats.failed, 2)
    assert.equal(stats.parseRate, 0.5)
    assert.equal(stats.failures['no-json-object'], 1)
    assert.equal(stats.failures['empty-skill'], 1)
    assert.equal(parseStats([]).parseRate, 0)
  })
})
