// EZPoints as gym-cards plays it (docs/algorithm.md §10.6): make 12 from two cards, one formula element per step.
import { defineEnv, type EnvSpec, renderHistory, type Transition, verlAgentSeed } from '../core.ts'
import { hashString, mixSeed, mulberry32, randInt } from '../rng.ts'
import type { OracleAnalysis, ParseResult, TaskRef, Trajectory } from '../types.ts'

export const EZPOINTS_MAX_STEPS = 8
export const TARGET_POINTS = 12
export const WIN_REWARD = 10
/** The formula may hold at most this many elements; one more truncates the episode. */
export const MAX_FORMULA_ELEMENTS = 5

export const EZPOINTS_ACTIONS = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '+', '*', '='] as const
const RANK_NAMES: Record<number, string> = { 1: 'A', 11: 'J', 12: 'Q', 13: 'K' }
const SUITS = ['spades', 'hearts', 'diamonds', 'clubs'] as const

export interface Card {
  rank: number
  suit: (typeof SUITS)[number]
}

export interface EzpointsTask {
  cards: [Card, Card]
}

export interface EzpointsState {
  formula: string[]
}

export const cardValue = (c: Card): number => Math.min(c.rank, 10)
export const cardName = (c: Card): string => RANK_NAMES[c.rank] ?? String(c.rank)

export function generateEzpoints(ref: TaskRef): EzpointsTask {
  const rng = mulberry32(mixSeed(hashString('ezpoints'), verlAgentSeed(ref.split, ref.seed)))
  const rank1 = randInt(rng, 2, 14)
  const v1 = cardValue({ rank: rank1, suit: 'spades' })
  const multiply = [1, 2, 3, 4, 6].includes(v1) && rng.next() < 0.5
  const v2 = multiply ? Math.floor(TARGET_POINTS / v1) : TARGET_POINTS - v1
  // A second card worth 10 may be any of 10, J, Q, K.
  const rank2 = v2 === 10 ? randInt(rng, 10, 14) : v2
  const c1: Card = { rank: rank1, suit: SUITS[randInt(rng, 0, 4)] as Card['suit'] }
  const c2: Card = { rank: rank2, suit: SUITS[randInt(rng, 0, 4)] as Card['suit'] }
  return { cards: rng.next() < 0.5 ? [c2, c1] : [c1, c2] }
}

/** Evaluates digits, + and * with the usual precedence; null when the formula is malformed. */
export function evaluateFormula(formula: string): number | null {
  if (!/^\d+([+*]\d+)*$/.test(formula)) return null
  return formula
    .split('+')
    .map((term) => term.split('*').reduce((p, f) => p * Number(f), 1))
    .reduce((s, t) => s + t, 0)
}

function observe(task: EzpointsTask, state: EzpointsState): string {
  const [a, b] = task.cards
  return `Cards: ${cardName(a)} of ${a.suit}, ${cardName(b)} of ${b.suit}\nFormula: ${state.formula.join(' ') || '(empty)'}`
}

function numbersLeft(task: EzpointsTask, state: EzpointsState): Map<string, number> {
  const left = new Map<string, number>()
  for (const c of task.cards) left.set(String(cardValue(c)), (left.get(String(cardValue(c))) ?? 0) + 1)
  for (const e of state.formula) if (left.has(e)) left.set(e, (left.get(e) as number) - 1)
  return left
}

function transition(task: EzpointsTask, state: EzpointsState, action: string): Transition {
  const noOp = { observation: observe(task, state), reward: 0, done: false, won: false }
  if (action === '=') {
    const value = evaluateFormula(state.formula.join(''))
    const allUsed = [...numbersLeft(task, state).values()].every((n) => n === 0)
    const won = value === TARGET_POINTS && allUsed
    return { observation: observe(task, state), reward: won ? WIN_REWARD : 0, done: true, won }
  }
  if (/^\d+$/.test(action) && (numbersLeft(task, state).get(action) ?? 0) <= 0) return noOp
  state.formula.push(action)
  const truncated = state.formula.length > MAX_FORMULA_ELEMENTS
  return { observation: observe(task, state), reward: 0, done: truncated, won: false }
}

/**
 * gym-cards answers in JSON: the text after `"action":`. Valid only when that value is exactly one of the
 * action tokens (quoted or bare).
 */
export function parseEzpoints(response: string): ParseResult {
  if (typeof response !== 'string') return { ok: false, reason: 'response is not a string' }
  const at = response.indexOf('"action"')
  if (at < 0) return { ok: false, reason: 'no "action" key' }
  const rest = response.slice(at + 8, at + 8 + 64)
  const m = /^\s*:\s*(?:"\s*([^"]*?)\s*"|([0-9]+|[+*=]))/.exec(rest)
  if (!m) return { ok: false, reason: `no value after "action": ${JSON.stringify(rest.slice(0, 20))}` }
  const value = (m[1] ?? m[2] ?? '').trim()
  if (!(EZPOINTS_ACTIONS as readonly string[]).includes(value)) {
    return {
      ok: false,
      reason: `action ${JSON.stringify(value.slice(0, 20))} is not one of ${EZPOINTS_ACTIONS.join(' ')}`,
    }
  }
  return { ok: true, action: value }
}

const ACTION_LIST = `[${EZPOINTS_ACTIONS.map((a) => `'${a}'`).join(', ')}]`

function render(view: Parameters<EnvSpec<EzpointsTask, EzpointsState>['render']>[0]): string {
  if (view.compact) {
    const past = view.history.length > 0 ? `Last: ${renderHistory(view.history, view.stepCount)}\n` : ''
    return [
      'EZPoints. Your goal is to build a formula equal to 12 using each card once (J, Q, K count as 10).',
      `${past}${view.observation}`,
      `Now it's your turn: append one of ${EZPOINTS_ACTIONS.join(' ')}. Reply {"thoughts": "…", "action": "…"}.`,
    ].join('\n')
  }
  return [
    'You are an expert card game player. You are observing two cards and the formula built so far.',
    view.observation,
    `You can choose between ${ACTION_LIST}. The number or operator you choose is appended to the current formula; ` +
      "'J', 'Q' and 'K' count as '10'.",
    "Your goal is to output a formula that evaluates to 12, using the number of each card exactly once, and to finish with '='.",
    '',
    "Now it's your turn to choose the next element.",
    'Your response should be a valid json object in the following format:',
    '{',
    '  "thoughts": "first describe the cards and the formula, then decide the next element",',
    `  "action": "one of ${ACTION_LIST}"`,
    '}',
  ].join('\n')
}

function planFor(task: EzpointsTask): string[] {
  const [a, b] = task.cards.map(cardValue) as [number, number]
  return [String(a), a + b === TARGET_POINTS ? '+' : '*', String(b), '=']
}

function oracle(t: Trajectory): OracleAnalysis {
  const first = t.steps[0]?.observation ?? ''
  const cards = /Cards: (\S+) of \S+, (\S+) of /.exec(first)
  const names = cards ? [cards[1] as string, cards[2] as string] : []
  const pressed = t.steps.filter((s) => s.valid).map((s) => s.action as string)
  const formula = pressed.filter((a) => a !== '=').join(' ')
  if (t.info.won) {
    return {
      output: {
        episode_summary: `Made 12 from ${names.join(' and ')} with the formula ${formula}.`,
        episode_skill:
          'Workflow: read both card values (J, Q, K count as 10); if they add up to 12 enter first + second, ' +
          `if they multiply to 12 enter first * second, then '='. Here ${names.join(' and ')} gave ${formula} =.`,
      },
      entities: names,
    }
  }
  const invalid = t.steps.filter((s) => !s.valid).length
  const rule =
    invalid > 0
      ? `Avoid malformed replies: ${invalid} responses had no usable "action"; answer with JSON whose "action" is one element.`
      : pressed.includes('=')
        ? `Avoid pressing '=' before the formula equals 12 and uses both cards (${names.join(' and ')}): check the sum and the product first.`
        : `Avoid padding the formula: it is cut after ${MAX_FORMULA_ELEMENTS} elements or ${EZPOINTS_MAX_STEPS} steps; with ${names.join(' and ')} enter card, operator, card, '='.`
  return {
    output: {
      episode_summary: `Failed with cards ${names.join(' and ')}; elements entered: ${pressed.join(' ') || 'none'}.`,
      episode_skill: rule,
    },
    entities: names,
  }
}

export const EZPOINTS_SPEC: EnvSpec<EzpointsTask, EzpointsState> = {
  name: 'ezpoints',
  maxSteps: EZPOINTS_MAX_STEPS,
  historyLength: 0,
  generate: generateEzpoints,
  taskText: (task) => `make 12 from the cards ${task.cards.map(cardName).join(' and ')}`,
  family: () => 'ezpoints',
  initial(task) {
    const state: EzpointsState = { formula: [] }
    return { state, observation: observe(task, state) }
  },
  transition,
  // gym-cards maps an unparsable answer to index -1: a no-op with reward 0.
  invalid: (task, state) => ({ observation: observe(task, state), reward: 0, done: false, won: false }),
  admissible: () => [...EZPOINTS_ACTIONS],
  parse: parseEzpoints,
  formatResponse: (action, thought = '') => JSON.stringify({ thoughts: thought, action }),
  render,
  expert(task, state) {
    const plan = planFor(task)
    const prefix = state.formula.every((e, i) => plan[i] === e)
    return prefix ? (plan[state.formula.length] ?? '=') : '='
  },
  oracle,
}

export const ezpoints = defineEnv(EZPOINTS_SPEC)
