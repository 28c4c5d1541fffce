// Sokoban as gym-sokoban plays it (docs/algorithm.md §10.5), with verl-agent's text symbols and prompt.
import {
  between,
  defineEnv,
  type EnvSpec,
  formatThinkAction,
  renderHistory,
  THINK_ACTION_INSTRUCTION,
  THINK_ACTION_INSTRUCTION_COMPACT,
  type Transition,
  verlAgentSeed,
} from '../core.ts'
import { hashString, mixSeed, mulberry32 } from '../rng.ts'
import type { OracleAnalysis, ParseResult, TaskRef, Trajectory } from '../types.ts'
import { DIM, generateRoom, neighbour, type Room, solve, TARGET, WALL } from './room.ts'

export const SOKOBAN_MAX_STEPS = 15
/** Shortest solutions outside this range are regenerated (short ones are solved by chance: docs/benchmarks.md §8). */
export const MIN_SOLUTION_STEPS = 4
export const MAX_SOLUTION_STEPS = 12

export const STEP_REWARD = -0.1
export const BOX_ON_TARGET_REWARD = 1
export const BOX_OFF_TARGET_REWARD = -1
export const SOLVED_REWARD = 10

export const ACTIONS = ['up', 'down', 'left', 'right'] as const
const NO_OP = 'still'

/** Text symbols (docs/algorithm.md §10.5). */
export const SYMBOLS = {
  wall: '#',
  floor: '_',
  target: 'O',
  box: 'X',
  boxOnTarget: '√',
  player: 'P',
  playerOnTarget: 'S',
}

export interface SokobanTask {
  room: Room
  target: number
  optimal: number[]
}

export interface SokobanState {
  box: number
  player: number
}

export function generateSokoban(ref: TaskRef): SokobanTask {
  const rng = mulberry32(mixSeed(hashString('sokoban'), verlAgentSeed(ref.split, ref.seed)))
  for (;;) {
    const room = generateRoom(rng)
    if (!room) continue
    const optimal = solve(room.structure, room.box, room.player)
    if (!optimal || optimal.length < MIN_SOLUTION_STEPS || optimal.length > MAX_SOLUTION_STEPS) continue
    return { room, target: room.structure.indexOf(TARGET), optimal }
  }
}

/** RAGEN / verl-agent text rendering: each cell is ` c \t`, rows end with a newline. */
export function renderRoom(task: SokobanTask, state: SokobanState): string {
  const rows: string[] = []
  for (let r = 0; r < DIM; r++) {
    const cells: string[] = []
    for (let c = 0; c < DIM; c++) {
      const i = r * DIM + c
      const onTarget = i === task.target
      if (i === state.player) cells.push(onTarget ? SYMBOLS.playerOnTarget : SYMBOLS.player)
      else if (i === state.box) cells.push(onTarget ? SYMBOLS.boxOnTarget : SYMBOLS.box)
      else if (task.room.structure[i] === WALL) cells.push(SYMBOLS.wall)
      else cells.push(onTarget ? SYMBOLS.target : SYMBOLS.floor)
    }
    rows.push(cells.map((c) => ` ${c} \t`).join(''))
  }
  return rows.join('\n')
}

/** First of up/down/left/right/still inside the first <action>…</action> (verl-agent's sokoban projection). */
export function parseSokoban(response: string): ParseResult {
  if (typeof response !== 'string') return { ok: false, reason: 'response is not a string' }
  const inner = between(response.toLowerCase(), '<action>', '</action>')
  if (inner === null) return { ok: false, reason: 'missing <action>...</action>' }
  let best = -1
  let found = ''
  for (const word of [...ACTIONS, NO_OP]) {
    const at = inner.indexOf(word)
    if (at >= 0 && (best < 0 || at < best)) {
      best = at
      found = word
    }
  }
  if (best < 0)
    return { ok: false, reason: `no action among up/down/left/right/still in ${JSON.stringify(inner.slice(0, 40))}` }
  return { ok: true, action: found }
}

function move(task: SokobanTask, state: SokobanState, action: string): Transition {
  let reward = STEP_REWARD
  const d = ACTIONS.indexOf(action as (typeof ACTIONS)[number])
  if (d >= 0) {
    const next = neighbour(state.player, d)
    const walkable = (i: number) => i >= 0 && task.room.structure[i] !== WALL
    if (walkable(next)) {
      if (next === state.box) {
        const beyond = neighbour(state.box, d)
        if (walkable(beyond)) {
          const wasOn = state.box === task.target
          state.box = beyond
          state.player = next
          const isOn = beyond === task.target
          if (isOn && !wasOn) reward += BOX_ON_TARGET_REWARD
          if (wasOn && !isOn) reward += BOX_OFF_TARGET_REWARD
        }
      } else {
        state.player = next
      }
    }
  }
  const won = state.box === task.target
  if (won) reward += SOLVED_REWARD
  return { observation: renderRoom(task, state), reward, done: won, won }
}

function render(view: Parameters<EnvSpec<SokobanTask, SokobanState>['render']>[0]): string {
  const { history, stepCount, observation } = view
  if (view.compact) {
    // small models trained from scratch: no legend, and the grid last, right before the answer, so that each
    // row is at the same distance from the action token in every prompt (with or without a skill block or
    // history). Rows stay dense (`##OX_#`): a byte-level BPE learns most rows as single tokens, which the tiny
    // model reads far sooner than one token per cell (48% vs 4.5% validation success after 160 behaviour-
    // cloning steps of 256). The last action on the step line, so that a history window of 0 (the run setting
    // drops `Last:` entries) still says where the player came from.
    const past = history.length > 0 ? `Last: ${renderHistory(history, stepCount)}\n` : ''
    const last = history.at(-1)
    return [
      'Sokoban. Your goal is to push the box X onto the target O.',
      `${past}Step ${stepCount + 1}${last ? `, last action ${last.action}` : ''}. Now it's your turn: up, down, left or right. ${THINK_ACTION_INSTRUCTION_COMPACT}`,
      observation.replace(/ (\S) \t/g, '$1'),
    ].join('\n')
  }
  const current =
    stepCount === 0 || history.length === 0
      ? `Your current observation is:\n${observation}`
      : `Prior to this step, you have already taken ${stepCount} step(s). Below are the most recent ${history.length} ` +
        `observations and the corresponding actions you took:\n${renderHistory(history, stepCount)}\n` +
        `You are now at step ${stepCount + 1} and your current observation is:\n${observation}`
  return [
    'You are an expert agent operating in the Sokoban environment.',
    '',
    '# Symbols and their meaning',
    '- Walls (#): cannot be crossed.',
    '- Floor (_): free to walk on.',
    '- Targets (O): where the box has to go.',
    '- Boxes (X): move only when you push them.',
    '- Player (P): you. On a target you are shown as S; a box on a target is shown as √.',
    '',
    '# Your goal',
    'Your goal is to push all the boxes (X) onto the target spots (O). Once every box is on a target, you win.',
    '',
    '# Rules',
    'You can only push a box, never pull it, so a box pushed against a wall or into a corner may be stuck for good.',
    '',
    '# Current step',
    current,
    'Your admissible actions are ["up", "down", "left", "right"].',
    '',
    "Now it's your turn to make a move (choose ONE action only for the current step).",
    THINK_ACTION_INSTRUCTION,
  ].join('\n')
}

/** Cells of a rendered grid (tab- or un-separated rows), as the analyzer could read them. */
function parseGrid(text: string): string[][] {
  return text.split('\n').map((row) => (row.includes('\t') ? row.split('\t').map((c) => c.trim()) : [...row]))
}

/** Whether the grid shows the box in a corner formed by two walls, away from any target. */
function boxCornered(grid: string[][]): boolean {
  for (let r = 0; r < grid.length; r++) {
    const row = grid[r] as string[]
    for (let c = 0; c < row.length; c++) {
      if (row[c] !== SYMBOLS.box) continue
      const wall = (rr: number, cc: number) => grid[rr]?.[cc] === SYMBOLS.wall
      const vertical = wall(r - 1, c) || wall(r + 1, c)
      const horizontal = wall(r, c - 1) || wall(r, c + 1)
      if (vertical && horizontal) return true
    }
  }
  return false
}

const WORKFLOW =
  'Workflow: first walk P to the cell on the far side of the box X from the target O without touching the box, ' +
  'then push it in straight lines toward O, turning only when X is level with O'

/**
 * A won episode's oracle skill: the workflow, then its moves. `numbered` writes them "1 down, 2 left, …", so that
 * the step prompt's "Step k" points at its move (issue 46's skill-reading probe, `bench/skill-reading.mts
 * --numbered-moves`); the environment's oracle lists them plain.
 */
export function sokobanSkill(actions: readonly string[], numbered = false): string {
  const moves = numbered ? actions.map((a, i) => `${i + 1} ${a}`) : actions
  return `${WORKFLOW}; here the moves were ${moves.join(', ')}.`
}

/** The moves a trajectory made (its valid steps' actions), as the oracle lists them. */
export const sokobanMoves = (t: Trajectory): string[] => t.steps.filter((s) => s.valid).map((s) => s.action as string)

function oracle(t: Trajectory): OracleAnalysis {
  const actions = sokobanMoves(t)
  const invalid = t.steps.filter((s) => !s.valid).length
  const used = [...new Set(actions.filter((a) => a !== NO_OP))]
  if (t.info.won) {
    return {
      output: {
        episode_summary: `Solved the room in ${t.steps.length} steps by pushing the box X onto the target O with the moves ${actions.join(', ')}.`,
        episode_skill: sokobanSkill(actions),
      },
      entities: ['X', 'O', ...used],
      rule: `${WORKFLOW}.`,
    }
  }
  const stuckAt = t.steps.findIndex((s) => boxCornered(parseGrid(s.observation)))
  let rule: string
  if (stuckAt >= 0) {
    rule =
      `Avoid pushing the box X against two walls: from step ${stuckAt} it sat in a corner and could never reach the target O. ` +
      'Before each push, check that the cell beyond X is on a path to O.'
  } else if (invalid > 0) {
    rule =
      `Avoid unusable replies: ${invalid} of ${t.steps.length} responses gave no move. ` +
      'Always end with exactly one of up, down, left, right inside <action></action>, then push X toward O.'
  } else {
    rule =
      'Avoid wandering: the step limit ran out before the box X reached the target O. ' +
      'Count the pushes X needs toward O, walk straight behind it and push without detours.'
  }
  return {
    output: {
      episode_summary: `Failed after ${t.steps.length} steps; moves: ${actions.join(', ') || 'none'}.`,
      episode_skill: rule,
    },
    entities: ['X', 'O'],
  }
}

export const SOKOBAN_SPEC: EnvSpec<SokobanTask, SokobanState> = {
  name: 'sokoban',
  maxSteps: SOKOBAN_MAX_STEPS,
  historyLength: 2,
  generate: generateSokoban,
  taskText: () => 'push the box (X) onto the target (O)',
  family: () => 'sokoban',
  initial(task) {
    const state = { box: task.room.box, player: task.room.player }
    return { state, observation: renderRoom(task, state) }
  },
  transition: move,
  // Unusable output is gym-sokoban's action 0: no move, the step reward only.
  invalid: (task, state) => move(task, state, NO_OP),
  admissible: () => [...ACTIONS],
  parse: parseSokoban,
  formatResponse: formatThinkAction,
  render,
  expert(task, state) {
    const path = solve(task.room.structure, state.box, state.player)
    return path && path.length > 0 ? (ACTIONS[path[0] as number] as string) : 'up'
  },
  oracle,
}

export const sokoban = defineEnv(SOKOBAN_SPEC)
