// The analyzer (docs/algorithm.md §4): the prompt that asks a model to turn one finished trajectory into an
// episode-level hindsight skill, and the lenient reading of its JSON answer. Used for Stage 1 annotation
// (an external analyzer) and for Stage 2 (the policy analyzing its own trajectories).
import { type JsonValue, readValue } from './lenient-json.ts'

export type EpisodeOutcome = 'success' | 'failure' | 'unknown'

/** The value the prompt's return format shows for each field. */
export const FORMAT_PLACEHOLDER = 'string'

/**
 * Whether a parsed skill is the return format's placeholder copied back (`{"episode_skill": "string"}`): valid
 * JSON that the reference parses too, but no skill. Counted per iteration (`analyze/placeholder_rate`), since a
 * parse rate that counts these says nothing of the analyzer.
 */
export function isFormatPlaceholder(skill: string | null | undefined): boolean {
  return skill?.trim().toLowerCase() === FORMAT_PLACEHOLDER
}

/** An episode counts as a success when its reward reaches this (`failure_success_threshold`). */
export const SUCCESS_THRESHOLD = 1.0

export interface AnalyzerStep {
  /** The raw environment observation the action was taken from, not the whole templated prompt. */
  observation: string
  /** The model's full output, `<think>` included. */
  response: string
  /** Whether the action parsed; the line is left out where it is not known. */
  valid?: boolean
  /** The step's templated prompt; only read to find the task line when `task` is not given. */
  prompt?: string
}

export interface AnalyzerEpisode {
  /** The task description; found in the steps' prompts or observations when absent. */
  task?: string
  steps: readonly AnalyzerStep[]
  outcome: EpisodeOutcome
}

export interface AnalyzerPromptOptions {
  /** Steps before this index are left out (with a line saying so) to fit a context; indices stay 0-based. */
  firstStep?: number
}

/** The outcome label of an episode reward; null or a non-finite reward is `unknown`. */
export function episodeOutcome(reward: number | null | undefined, threshold = SUCCESS_THRESHOLD): EpisodeOutcome {
  if (reward == null || !Number.isFinite(reward)) return 'unknown'
  return reward >= threshold ? 'success' : 'failure'
}

const TASK_PATTERNS = [
  /Your task is to:\s*(.+?)(?:\n|$)/i,
  /Your task is:\s*(.+?)(?:\n|$)/i,
  /Your current task is:\s*(.+?)(?:\n|$)/i,
  /Your question:\s*(.+?)(?:\n|$)/i,
] as const

/** The task description after the first matching task phrase, whitespace collapsed; '' when none matches. */
export function extractTaskDescription(text: string): string {
  for (const pattern of TASK_PATTERNS) {
    const match = pattern.exec(text)
    const task = match ? collapse(match[1] ?? '') : ''
    if (task) return task
  }
  return ''
}

const SKILL_INSTRUCTION: Record<EpisodeOutcome, string> = {
  success:
    'Write one episode_skill that turns this successful trajectory into a workflow: the core decision rule and ' +
    'the order of actions that made it work.',
  failure:
    'Write one episode_skill that turns this failed trajectory into avoidance rules: the core mistake and the ' +
    'warning signs the agent should avoid.',
  unknown:
    'Write one episode_skill from this trajectory: if it succeeded, the workflow that made it work; if it ' +
    'failed, the avoidance rules.',
}

/** One step block of the trajectory: `Step k`, the observation, the response and (when known) validity. */
export function renderAnalyzerStep(step: AnalyzerStep, index: number): string {
  const valid = step.valid === undefined ? '' : `\nAction valid: ${step.valid}`
  return `Step ${index}\nObservation: ${step.observation}\nResponse: ${step.response}${valid}\n`
}

/** The analyzer's user message (one message; the caller wraps it in the chat template). */
export function analyzerPrompt(episode: AnalyzerEpisode, options: AnalyzerPromptOptions = {}): string {
  const task = analyzerTask(episode)
  const first = Math.min(Math.max(0, Math.floor(options.firstStep ?? 0)), episode.steps.length)
  const omitted = first > 0 ? `(steps 0-${first - 1} omitted to fit the context)\n` : ''
  const steps = episode.steps
    .slice(first)
    .map((step, i) => renderAnalyzerStep(step, first + i))
    .join('')
  return [
    'Analyze the agent episode below and answer with ONLY valid JSON.',
    '',
    'Fill in two fields:',
    '1. Write a concise episode_summary.',
    `2. ${SKILL_INSTRUCTION[episode.outcome]}`,
    '',
    'Constraints:',
    '- Write episode_skill as one short skill addressed to the policy, not as a retrospective explanation of the ' +
      'trajectory.',
    '- Return only these two top-level fields: episode_summary, episode_skill.',
    '',
    'Return format:',
    `{"episode_summary": "${FORMAT_PLACEHOLDER}", "episode_skill": "${FORMAT_PLACEHOLDER}"}`,
    '',
    'Episode context:',
    `- Task description: ${task || '(not available)'}`,
    `- episode_success: ${episode.outcome}`,
    '- Interaction trajectory:',
    `${omitted}${steps}`,
  ].join('\n')
}

/** The task line the prompt shows: the given task, else the first one found in the steps' prompts or observations. */
export function analyzerTask(episode: AnalyzerEpisode): string {
  const given = collapse(episode.task ?? '')
  if (given) return given
  for (const step of episode.steps) {
    const task = extractTaskDescription(step.prompt ?? '') || extractTaskDescription(step.observation)
    if (task) return task
  }
  return ''
}

// ---- parsing the answer ----

export interface AnalyzerOutput {
  episodeSummary: string
  episodeSkill: string
}

export type AnalyzerParseFailure = 'no-json-object' | 'invalid-json' | 'missing-skill' | 'empty-skill' | 'too-long'

export type AnalyzerParse =
  | { ok: true; output: AnalyzerOutput }
  | { ok: false; code: AnalyzerParseFailure; reason: string }

/** Longer answers are refused: the analyzer is capped at 4,096 new tokens, far below this. */
export const MAX_ANSWER_CHARS = 262_144
/** Object starts tried per candidate text; bounds the work on adversarial input. */
const MAX_OBJECT_STARTS = 256

/**
 * Reads `{"episode_summary": …, "episode_skill": …}` from a model answer. Tolerates code fences, prose before
 * and after, several objects (the first with `episode_skill` wins, as in the released parser), trailing
 * commas, raw newlines in strings, single quotes and Python literals. Never throws: unusable output is data.
 */
export function parseAnalyzerOutput(answer: string): AnalyzerParse {
  const text = typeof answer === 'string' ? answer : String(answer)
  if (text.length > MAX_ANSWER_CHARS) {
    return fail('too-long', `answer has ${text.length} characters, more than ${MAX_ANSWER_CHARS}`)
  }
  const objects: Array<{ [key: string]: JsonValue }> = []
  let lastError = ''
  let sawBrace = false
  for (const candidate of candidateTexts(text)) {
    let starts = 0
    for (let i = candidate.indexOf('{'); i !== -1 && starts < MAX_OBJECT_STARTS; i = candidate.indexOf('{', i + 1)) {
      sawBrace = true
      starts++
      const read = readValue(candidate, i)
      if (read.ok && isObject(read.value)) objects.push(read.value)
      else if (!read.ok) lastError = `${read.reason} at offset ${read.at}`
    }
  }
  const chosen = objects.find((o) => Object.hasOwn(o, 'episode_skill')) ?? objects[0]
  if (!chosen) {
    return sawBrace
      ? fail('invalid-json', `no JSON object could be read (${lastError || 'no object'})`)
      : fail('no-json-object', `no '{' in an answer of ${text.length} characters`)
  }
  if (!Object.hasOwn(chosen, 'episode_skill')) {
    return fail('missing-skill', `object has no episode_skill (keys: ${Object.keys(chosen).slice(0, 8).join(', ')})`)
  }
  const skill = scalarText(chosen.episode_skill)
  if (skill === null) return fail('missing-skill', `episode_skill is ${kindOf(chosen.episode_skill)}, not text`)
  if (!skill.trim()) return fail('empty-skill', 'episode_skill is empty')
  const summary = Object.hasOwn(chosen, 'episode_summary') ? (scalarText(chosen.episode_summary) ?? '') : ''
  return { ok: true, output: { episodeSummary: summary.trim(), episodeSkill: skill.trim() } }
}

export interface ParseStats {
  total: number
  parsed: number
  failed: number
  /** parsed / total; 0 when there is nothing to count. */
  parseRate: number
  failures: Record<AnalyzerParseFailure, number>
}

/** Counts parse outcomes, for the per-iteration skill parse rate. */
export function parseStats(results: readonly AnalyzerParse[]): ParseStats {
  const failures: Record<AnalyzerParseFailure, number> = {
    'no-json-object': 0,
    'invalid-json': 0,
    'missing-skill': 0,
    'empty-skill': 0,
    'too-long': 0,
  }
  let parsed = 0
  for (const r of results) {
    if (r.ok) parsed++
    else failures[r.code]++
  }
  const total = results.length
  return { total, parsed, failed: total - parsed, parseRate: total === 0 ? 0 : parsed / total, failures }
}

/** Fenced blocks first (```json … ```), then the whole answer. */
function candidateTexts(text: string): string[] {
  const fenced = [...text.matchAll(/```(?:json|JSON)?\s*([\s\S]*?)```/g)].map((m) => (m[1] ?? '').trim())
  return [...fenced.filter((b) => b.length > 0), text.trim()]
}

function isObject(value: JsonValue): value is { [key: string]: JsonValue } {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Strings as they are; numbers and booleans as text (the released parser stringifies); anything else null. */
function scalarText(value: JsonValue | undefined): string | null {
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  return null
}

function kindOf(value: JsonValue | undefined): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'object' ? 'an object' : typeof value
}

function fail(code: AnalyzerParseFailure, reason: string): AnalyzerParse {
  return { ok: false, code, reason }
}

function collapse(text: string): string {
  return text.split(/\s+/).filter(Boolean).join(' ')
}
