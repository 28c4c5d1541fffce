// Seeded randomness for task generation and random policies. Never Math.random() in domain code (docs/design.md §11.1).

/** A seeded source of uniform numbers in [0, 1). */
export interface Rng {
  next(): number
}

/** mulberry32: 32-bit state, fast, good enough for procedural generation (not cryptographic). */
export function mulberry32(seed: number): Rng {
  let a = seed >>> 0
  return {
    next(): number {
      a = (a + 0x6d2b79f5) >>> 0
      let t = a
      t = Math.imul(t ^ (t >>> 15), t | 1)
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296
    },
  }
}

/** Mixes several integers into one 32-bit seed (splitmix-style finalizer), so (env, split, seed) streams differ. */
export function mixSeed(...parts: number[]): number {
  let h = 0x9e3779b9
  for (const p of parts) {
    h = (h ^ (p >>> 0)) >>> 0
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0
    h = (h ^ (h >>> 16)) >>> 0
  }
  return h
}

/** Hashes a string to 32 bits (FNV-1a), for seeding from names. */
export function hashString(s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h
}

export function randInt(rng: Rng, lo: number, hiExclusive: number): number {
  return lo + Math.floor(rng.next() * (hiExclusive - lo))
}

export function pick<T>(rng: Rng, items: readonly T[]): T {
  if (items.length === 0) throw new RangeError('pick: empty list')
  return items[Math.floor(rng.next() * items.length)] as T
}

/** Fisher-Yates on a copy. */
export function shuffled<T>(rng: Rng, items: readonly T[]): T[] {
  const out = items.slice()
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1))
    const t = out[i] as T
    out[i] = out[j] as T
    out[j] = t
  }
  return out
}
