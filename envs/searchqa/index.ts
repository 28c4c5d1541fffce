// Search-QA, Search-R1 protocol (docs/algorithm.md §10.4): <search> returns the top 3 passages inside <information>,
// <answer> ends the episode, normalized exact match, 4 turns.
import { between, defineEnv, type EnvSpec } from '../core.ts'
import { hashString, mixSeed, mulberry32, pick, randInt } from '../rng.ts'
import type { Episode, OracleAnalysis, ParseResult, Split, StepResult, TaskRef, Trajectory } from '../types.ts'
import { type Entity, type Kind, knowledgeBase, type Relation } from './kb.ts'
import { type AsyncRetriever, formatInformation, localRetriever, TOP_K } from './retriever.ts'

export const SEARCHQA_MAX_TURNS = 4
export const INVALID_MESSAGE =
  '\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. ' +
  'If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n'

interface QuestionType {
  subject: Kind
  hops: readonly Relation[]
  ask: (subject: string) => string
}

export const QUESTION_TYPES = {
  birthplace: { subject: 'person', hops: ['born_in'], ask: (s) => `Where was ${s} born?` },
  country_of_city: { subject: 'city', hops: ['located_in'], ask: (s) => `In which country is ${s}?` },
  capital: { subject: 'country', hops: ['capital'], ask: (s) => `What is the capital of ${s}?` },
  founder: { subject: 'company', hops: ['founded_by'], ask: (s) => `Who founded ${s}?` },
  headquarters: { subject: 'company', hops: ['headquartered_in'], ask: (s) => `Where is ${s} headquartered?` },
  author: { subject: 'book', hops: ['written_by'], ask: (s) => `Who wrote ${s}?` },
  director: { subject: 'film', hops: ['directed_by'], ask: (s) => `Who directed ${s}?` },
  employer: { subject: 'person', hops: ['works_for'], ask: (s) => `Which company does ${s} work for?` },
  author_birthplace: {
    subject: 'book',
    hops: ['written_by', 'born_in'],
    ask: (s) => `Where was the author of ${s} born?`,
  },
  founder_birthplace: {
    subject: 'company',
    hops: ['founded_by', 'born_in'],
    ask: (s) => `Where was the founder of ${s} born?`,
  },
  hq_country: {
    subject: 'company',
    hops: ['headquartered_in', 'located_in'],
    ask: (s) => `In which country is ${s} headquartered?`,
  },
  birth_country: { subject: 'person', hops: ['born_in', 'located_in'], ask: (s) => `In which country was ${s} born?` },
  director_birthplace: {
    subject: 'film',
    hops: ['directed_by', 'born_in'],
    ask: (s) => `Where was the director of ${s} born?`,
  },
  employer_headquarters: {
    subject: 'person',
    hops: ['works_for', 'headquartered_in'],
    ask: (s) => `Where is the employer of ${s} headquartered?`,
  },
  author_employer: {
    subject: 'book',
    hops: ['written_by', 'works_for'],
    ask: (s) => `Which company does the author of ${s} work for?`,
  },
} as const satisfies Record<string, QuestionType>
export type QuestionTypeName = keyof typeof QUESTION_TYPES

/** Relation types whose questions only test-unseen asks. */
export const UNSEEN_RELATIONS: readonly Relation[] = ['directed_by', 'works_for']

export function questionTypes(split: Split): QuestionTypeName[] {
  return (Object.keys(QUESTION_TYPES) as QuestionTypeName[]).filter(
    (q) => QUESTION_TYPES[q].hops.some((h) => UNSEEN_RELATIONS.includes(h)) === (split === 'test-unseen'),
  )
}

export interface SearchqaTask {
  type: QuestionTypeName
  question: string
  subject: string
  answers: string[]
}

export interface SearchqaState {
  /** Information blocks returned so far, in order. */
  infos: string[]
  answer: string | null
}

const SPLIT_STREAM: Record<Split, number> = { train: 0, validation: 1, 'test-seen': 2, 'test-unseen': 3 }
const SEEN_BUCKET: Record<Exclude<Split, 'test-unseen'>, (b: number) => boolean> = {
  'test-seen': (b) => b === 0,
  validation: (b) => b === 1,
  train: (b) => b >= 2,
}

export function generateSearchqa(ref: TaskRef): SearchqaTask {
  const rng = mulberry32(mixSeed(hashString('searchqa'), SPLIT_STREAM[ref.split], ref.seed))
  const kb = knowledgeBase()
  const types = questionTypes(ref.split)
  for (;;) {
    const type = pick(rng, types)
    const q: QuestionType = QUESTION_TYPES[type]
    const subject = pick(rng, kb.byKind[q.subject])
    if (ref.split !== 'test-unseen' && !SEEN_BUCKET[ref.split](hashString(`${type}|${subject.name}`) % 10)) continue
    let at: Entity = subject
    for (const hop of q.hops) at = kb.entities[at.facts[hop] as number] as Entity
    return { type, question: q.ask(subject.name), subject: subject.name, answers: [at.name] }
  }
}

/** Search-R1's answer normalization: lowercase, no punctuation, no articles, single spaces. */
export function normalizeAnswer(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]/gu, '')
    .replace(/\b(a|an|the)\b/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
}

export function exactMatch(prediction: string, golds: readonly string[]): boolean {
  const p = normalizeAnswer(prediction)
  return golds.some((g) => normalizeAnswer(g) === p)
}

const count = (text: string, tag: string): number => text.split(tag).length - 1

/** First <search> block else first <answer> block; unusable if neither, if both kinds appear, or if a tag repeats. */
export function parseSearchqa(response: string): ParseResult {
  if (typeof response !== 'string') return { ok: false, reason: 'response is not a string' }
  const searches = count(response, '<search>')
  const answers = count(response, '<answer>')
  if (searches > 0 && answers > 0) return { ok: false, reason: 'both <search> and <answer> in one response' }
  if (searches > 1 || answers > 1) return { ok: false, reason: 'a tag repeats' }
  const kind = searches === 1 ? 'search' : answers === 1 ? 'answer' : null
  if (!kind) return { ok: false, reason: 'neither <search> nor <answer>' }
  const inner = between(response, `<${kind}>`, `</${kind}>`)
  if (inner === null) return { ok: false, reason: `unclosed <${kind}>` }
  const text = inner.trim().replace(/\s+/g, ' ')
  if (text.length === 0) return { ok: false, reason: `empty <${kind}>` }
  if (text.length > 500) return { ok: false, reason: `<${kind}> longer than 500 characters` }
  return { ok: true, action: `<${kind}> ${text} </${kind}>` }
}

/** Applies a parsed action with the information block already retrieved (local or remote). */
export function applySearchqa(task: SearchqaTask, state: SearchqaState, action: string, information: string | null) {
  const answer = between(action, '<answer>', '</answer>')
  if (answer !== null) {
    state.answer = answer.trim()
    const won = exactMatch(state.answer, task.answers)
    return { observation: `\nAnswer submitted: ${state.answer}\n`, reward: won ? 1 : 0, done: true, won }
  }
  const info = information ?? formatInformation([])
  state.infos.push(info)
  return { observation: info, reward: 0, done: false, won: false }
}

export function searchQuery(action: string): string | null {
  const q = between(action, '<search>', '</search>')
  return q === null ? null : q.trim()
}

const FACT_PATTERNS: Record<Relation, RegExp> = {
  located_in: / is a city in (.+?)\./,
  capital: / Its capital is (.+?)\./,
  born_in: / was born in (.+?)\./,
  works_for: / works for (.+?)\./,
  founded_by: / founded by (.+?)\./,
  headquartered_in: / headquartered in (.+?)\./,
  written_by: / written by (.+?)\./,
  directed_by: / directed by (.+?)\./,
}

/** Reads a fact about `entity` from an information block, as a reader of the text would. */
export function readFact(info: string, entity: string, relation: Relation): string | null {
  for (const line of info.split('\n')) {
    const m = /^(?:<information>)?Doc \d+\(Title: (.*?)\) (.*)$/.exec(line)
    if (!m || m[1] !== entity) continue
    const fact = FACT_PATTERNS[relation].exec(` ${m[2]}`)
    if (fact) return fact[1] as string
  }
  return null
}

function expert(task: SearchqaTask, state: SearchqaState): string {
  let entity = task.subject
  const hops = QUESTION_TYPES[task.type].hops
  for (let i = 0; i < hops.length; i++) {
    const info = state.infos[i]
    if (info === undefined) return `<search> ${entity} </search>`
    const next = readFact(info, entity, hops[i] as Relation)
    if (next === null) return `<answer> ${entity} </answer>`
    entity = next
  }
  return `<answer> ${entity} </answer>`
}

const INSTRUCTION = [
  'You should first conduct a reasoning process. This process MUST be enclosed within <think> </think> tags.',
  'After completing your reasoning, choose only one of the following actions (do not perform both):',
  '(1) If any required knowledge is missing or uncertain, call the search engine by placing your query within ' +
    '<search> </search> tags, e.g. <search> your query </search>. It returns the top results within <information> </information>.',
  '(2) Only if you have enough information to answer with confidence, give the final answer within <answer> </answer> ' +
    'tags, without explanation, e.g. <answer> Beijing </answer>.',
].join('\n')

function render(view: Parameters<EnvSpec<SearchqaTask, SearchqaState>['render']>[0]): string {
  const { history, stepCount, taskText, observation } = view
  // History pairs each past action with the information it returned (the observation that followed it).
  const first = stepCount - history.length + 1
  const steps = history.map((h, i) => {
    const info = i + 1 < history.length ? (history[i + 1] as { observation: string }).observation : observation
    return `Step ${first + i}:${h.action} ${view.compact ? info.trim() : info}`
  })
  if (view.compact) {
    return [
      `Search QA. Your question: ${taskText}`,
      ...steps,
      "Now it's your turn. Reply <think>…</think> then <search>…</search> or <answer>…</answer>.",
    ].join('\n')
  }
  const parts = [
    'You are an expert agent tasked with answering the given question step-by-step.',
    `Your question: ${taskText}`,
    '',
  ]
  if (stepCount > 0) {
    parts.push(
      `Prior to this step, you have already taken ${stepCount} step(s). Below is the interaction history where ` +
        '<search> </search> wrapped your past search queries and <information> </information> wrapped the ' +
        `corresponding search results returned by the external search engine. History:\n${steps.join('\n')}`,
      '',
    )
  }
  parts.push("Now it's your turn to respond for the current step.", INSTRUCTION)
  return parts.join('\n')
}

function oracle(t: Trajectory): OracleAnalysis {
  const text = `${t.taskText}\n${t.steps.map((s) => `${s.observation}\n${s.response}`).join('\n')}`
  const visible = (e: string) => e.length > 0 && text.includes(e)
  const actions = t.steps.filter((s) => s.valid).map((s) => s.action as string)
  const queries = actions.flatMap((a) => searchQuery(a) ?? [])
  const answered = actions.map((a) => between(a, '<answer>', '</answer>')?.trim()).find((a) => a !== undefined)
  if (t.info.won) {
    const entities = [...queries, ...(answered ? [answered] : [])].filter(visible)
    return {
      output: {
        episode_summary: `Answered "${t.taskText}" correctly with ${answered} after ${queries.length} searches.`,
        episode_skill:
          `Workflow: search for the entity the question names${queries[0] ? ` ("${queries[0]}")` : ''}, read the asked ` +
          'fact in the passage titled with that name, search again for the entity that fact names when the question has ' +
          `two steps${queries[1] ? ` ("${queries[1]}")` : ''}, then answer with only the final name${answered ? ` (${answered})` : ''}.`,
      },
      entities,
    }
  }
  const invalid = t.steps.filter((s) => !s.valid).length
  let rule: string
  let entities: string[] = []
  if (invalid > t.steps.length / 2) {
    rule = `Avoid malformed replies: ${invalid} of ${t.steps.length} responses had no single <search> or <answer> block.`
  } else if (answered !== undefined) {
    entities = [answered, ...queries.slice(-1)].filter(visible)
    rule =
      `Avoid answering before a passage states the fact: "${answered}" was not the answer. Search the exact name ` +
      'from the question, and for two-step questions search the intermediate entity before answering.'
  } else {
    entities = queries.slice(0, 2).filter(visible)
    rule = `Avoid using every turn on searches: after ${queries.length} searches no answer was given; answer by turn ${SEARCHQA_MAX_TURNS}.`
  }
  return {
    output: { episode_summary: `Failed "${t.taskText}" after ${t.steps.length} turns.`, episode_skill: rule },
    entities,
  }
}

export const SEARCHQA_SPEC: EnvSpec<SearchqaTask, SearchqaState> = {
  name: 'searchqa',
  maxSteps: SEARCHQA_MAX_TURNS,
  historyLength: 4,
  generate: generateSearchqa,
  taskText: (t) => t.question,
  family: (t) => (QUESTION_TYPES[t.type].hops.length === 1 ? 'single-hop' : 'two-hop'),
  initial(task) {
    return { state: { infos: [], answer: null }, observation: task.question }
  },
  transition(task, state, action) {
    const q = searchQuery(action)
    const info = q === null ? null : formatInformation(localRetriever().retrieve(q, TOP_K))
    return applySearchqa(task, state, action, info)
  },
  invalid: () => ({ observation: INVALID_MESSAGE, reward: 0, done: false, won: false }),
  admissible: () => null,
  parse: parseSearchqa,
  formatResponse: (action, thought = '') => `<think>${thought}</think>\n${action}`,
  render,
  expert,
  randomAction(task, _state, rng) {
    if (rng.next() < 0.5) {
      const words = task.question.replace(/\?$/, '').split(' ')
      const start = randInt(rng, 0, words.length)
      return `<search> ${words.slice(start, start + randInt(rng, 1, 4)).join(' ')} </search>`
    }
    return `<answer> ${pick(rng, knowledgeBase().entities).name} </answer>`
  },
  oracle,
}

export const searchqa = defineEnv(SEARCHQA_SPEC)

/** An episode whose searches go to an asynchronous retriever (e.g. a Search-R1 `/retrieve` server). */
export interface RemoteSearchqaEpisode extends Omit<Episode, 'step'> {
  step(response: string): Promise<StepResult>
}

/**
 * searchqa over an external retriever: the same tasks, parser, prompts and scoring, with each search's passages
 * fetched before the step is applied. Questions about the generated KB need the local corpus to be answerable, so
 * a real Wikipedia index pairs with questions supplied as tasks of another source (a later issue), or with the
 * corpus served by a Search-R1 server as here.
 */
export function searchqaWithRetriever(
  retriever: AsyncRetriever,
  k = TOP_K,
): { reset(ref: TaskRef): RemoteSearchqaEpisode } {
  let pending: string | null = null
  const env = defineEnv<SearchqaTask, SearchqaState>({
    ...SEARCHQA_SPEC,
    transition(task, state, action) {
      const info = pending
      pending = null
      return applySearchqa(task, state, action, searchQuery(action) === null ? null : info)
    },
  })
  return {
    reset(ref: TaskRef): RemoteSearchqaEpisode {
      const inner = env.reset(ref)
      return {
        env: inner.env,
        task: inner.task,
        taskText: inner.taskText,
        get observation() {
          return inner.observation
        },
        get done() {
          return inner.done
        },
        get stepCount() {
          return inner.stepCount
        },
        get info() {
          return inner.info
        },
        admissible: () => inner.admissible(),
        prompt: (options) => inner.prompt(options),
        reset: () => inner.reset(),
        randomAction: (rng) => inner.randomAction(rng),
        expertAction: () => inner.expertAction(),
        expertThought: () => inner.expertThought(),
        trajectory: () => inner.trajectory(),
        async step(response: string): Promise<StepResult> {
          const parsed = parseSearchqa(response)
          const query = parsed.ok ? searchQuery(parsed.action) : null
          // Set right before the synchronous step, so concurrent episodes cannot take each other's passages.
          if (query !== null && !inner.done) pending = formatInformation(await retriever.retrieve(query, k))
          return inner.step(response)
        },
      }
    },
  }
}
