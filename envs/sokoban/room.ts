// gym-sokoban's room generation (docs/algorithm.md §10.5): random-walk topology, reverse play from the solved state.
import type { Rng } from '../rng.ts'
import { pick, randInt } from '../rng.ts'

export const WALL = 0
export const FLOOR = 1
export const TARGET = 2

export const DIM = 6
export const NUM_GEN_STEPS = Math.floor(1.7 * (DIM + DIM))
export const P_CHANGE_DIRECTION = 0.35
export const SEARCH_DEPTH = 30
export const MAX_EXPLORED_STATES = 300_000
export const TOPOLOGY_TRIES = 4

/** A room: the fixed structure (walls, floor, target) and the movable parts (one box, the player). */
export interface Room {
  /** Row-major DIM×DIM cells of WALL / FLOOR / TARGET. */
  structure: Uint8Array
  box: number
  player: number
}

const MASKS: readonly (readonly number[])[] = [
  [0, 0, 0, 1, 1, 1, 0, 0, 0],
  [0, 1, 0, 0, 1, 0, 0, 1, 0],
  [0, 0, 0, 1, 1, 0, 0, 1, 0],
  [0, 0, 0, 1, 1, 0, 1, 1, 0],
  [0, 0, 0, 0, 1, 1, 0, 1, 0],
]

/** up, down, left, right as (drow, dcol). */
export const MOVES: readonly (readonly [number, number])[] = [
  [-1, 0],
  [1, 0],
  [0, -1],
  [0, 1],
]

export const idx = (r: number, c: number): number => r * DIM + c
export const rowOf = (i: number): number => Math.floor(i / DIM)
export const colOf = (i: number): number => i % DIM

/** The neighbour of `cell` in direction `d`, or -1 outside the grid. */
export function neighbour(cell: number, d: number): number {
  const [dr, dc] = MOVES[d] as readonly [number, number]
  const r = rowOf(cell) + dr
  const c = colOf(cell) + dc
  return r < 0 || r >= DIM || c < 0 || c >= DIM ? -1 : idx(r, c)
}

function topology(rng: Rng): Uint8Array {
  const level = new Uint8Array(DIM * DIM)
  const directions: readonly (readonly [number, number])[] = [
    [1, 0],
    [0, 1],
    [-1, 0],
    [0, -1],
  ]
  let dir = pick(rng, directions)
  let r = randInt(rng, 1, DIM - 1)
  let c = randInt(rng, 1, DIM - 1)
  for (let s = 0; s < NUM_GEN_STEPS; s++) {
    if (rng.next() < P_CHANGE_DIRECTION) dir = pick(rng, directions)
    r = Math.max(1, Math.min(DIM - 2, r + dir[0]))
    c = Math.max(1, Math.min(DIM - 2, c + dir[1]))
    const mask = pick(rng, MASKS)
    for (let i = 0; i < 9; i++) {
      if (mask[i] === 1) level[idx(r - 1 + Math.floor(i / 3), c - 1 + (i % 3))] = FLOOR
    }
  }
  for (let i = 0; i < DIM; i++) {
    level[idx(0, i)] = WALL
    level[idx(DIM - 1, i)] = WALL
    level[idx(i, 0)] = WALL
    level[idx(i, DIM - 1)] = WALL
  }
  return level
}

const free = (structure: Uint8Array, cell: number): boolean => cell >= 0 && structure[cell] !== WALL

/**
 * Reverse play: DFS over reverse moves from the solved state (box on its target), where the player may pull the box.
 * Keeps the state with the best box_swaps × Manhattan displacement, as gym-sokoban does (including its quirk that
 * every pull counts as a swap, and that a state is explored once, by whichever path reaches it first).
 */
function reversePlay(structure: Uint8Array, target: number, player: number): { room: Room; score: number } {
  const explored = new Set<number>()
  let best: Room = { structure, box: target, player }
  let bestScore = 0
  const displacement = (box: number) => Math.abs(rowOf(box) - rowOf(target)) + Math.abs(colOf(box) - colOf(target))
  const dfs = (box: number, pl: number, swaps: number, ttl: number): void => {
    ttl -= 1
    if (ttl <= 0 || explored.size >= MAX_EXPLORED_STATES) return
    const key = box * 64 + pl
    if (explored.has(key)) return
    explored.add(key)
    // gym-sokoban scores 0 unless every target is uncovered (no box and no player on it).
    const score = box !== target && pl !== target ? swaps * displacement(box) : 0
    if (score > bestScore) {
      bestScore = score
      best = { structure, box, player: pl }
    }
    for (let action = 0; action < 8; action++) {
      const d = action % 4
      const next = neighbour(pl, d)
      // A blocked reverse move leaves the state as it was, which is already explored.
      if (!free(structure, next) || next === box) continue
      const behind = neighbour(pl, d ^ 1)
      if (action < 4 && behind === box) dfs(pl, next, swaps + 1, ttl)
      else dfs(box, next, swaps, ttl)
    }
  }
  dfs(target, player, 0, SEARCH_DEPTH)
  return { room: best, score: bestScore }
}

/** One gym-sokoban room, or null when the topology and reverse play found nothing (the caller retries). */
export function generateRoom(rng: Rng): Room | null {
  for (let t = 0; t < TOPOLOGY_TRIES; t++) {
    const structure = topology(rng)
    const floors: number[] = []
    for (let i = 0; i < structure.length; i++) if (structure[i] !== WALL) floors.push(i)
    if (floors.length < 3) continue
    const player = pick(rng, floors)
    const target = pick(
      rng,
      floors.filter((f) => f !== player),
    )
    structure[target] = TARGET
    const { room, score } = reversePlay(structure, target, player)
    if (score > 0) return perturbPlayer(rng, room)
  }
  return null
}

/** verl-agent's last touch: the player wanders 0-3 steps, more likely when the box moved only one cell. */
function perturbPlayer(rng: Rng, room: Room): Room {
  let target = -1
  for (let i = 0; i < room.structure.length; i++) if (room.structure[i] === TARGET) target = i
  const disp = Math.abs(rowOf(room.box) - rowOf(target)) + Math.abs(colOf(room.box) - colOf(target))
  let player = room.player
  if (rng.next() < (disp === 1 ? 0.8 : 0.5)) {
    for (let k = 0; k < 3; k++) {
      const next = neighbour(player, randInt(rng, 0, 4))
      if (free(room.structure, next) && next !== room.box) player = next
      if (rng.next() < 0.5) break
    }
  }
  return { structure: room.structure, box: room.box, player }
}

/** Shortest push/move solution from (box, player) by BFS, as action indices (0 up, 1 down, 2 left, 3 right). */
export function solve(structure: Uint8Array, box: number, player: number, maxDepth = 64): number[] | null {
  let target = -1
  for (let i = 0; i < structure.length; i++) if (structure[i] === TARGET) target = i
  if (box === target) return []
  const n = DIM * DIM
  const prev = new Int32Array(n * n).fill(-1)
  const how = new Int8Array(n * n)
  const start = box * n + player
  prev[start] = start
  let frontier = [start]
  for (let depth = 0; depth < maxDepth && frontier.length > 0; depth++) {
    const next: number[] = []
    for (const s of frontier) {
      const b = Math.floor(s / n)
      const p = s % n
      for (let d = 0; d < 4; d++) {
        const np = neighbour(p, d)
        if (!free(structure, np)) continue
        let nb = b
        if (np === b) {
          nb = neighbour(b, d)
          if (!free(structure, nb)) continue
        }
        const ns = nb * n + np
        if (prev[ns] !== -1) continue
        prev[ns] = s
        how[ns] = d
        if (nb === target) {
          const path: number[] = []
          for (let x = ns; x !== start; x = prev[x] as number) path.push(how[x] as number)
          return path.reverse()
        }
        next.push(ns)
      }
    }
    frontier = next
  }
  return null
}
