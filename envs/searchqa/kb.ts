// A generated knowledge base rendered as a passage corpus: invented people, places, companies, books and films,
// each with one encyclopedia-style passage stating its facts. Fixed seed: every process builds the same corpus.
import { hashString, mulberry32, pick, type Rng, randInt } from '../rng.ts'

export type Kind = 'country' | 'city' | 'person' | 'company' | 'book' | 'film'

export interface Entity {
  id: number
  kind: Kind
  name: string
  /** relation → object entity id */
  facts: Partial<Record<Relation, number>>
  occupation?: string
}

export const RELATIONS = [
  'located_in',
  'capital',
  'born_in',
  'works_for',
  'founded_by',
  'headquartered_in',
  'written_by',
  'directed_by',
] as const
export type Relation = (typeof RELATIONS)[number]

export interface Passage {
  title: string
  text: string
}

const SYLLABLES = [
  'al',
  'ar',
  'bel',
  'cor',
  'da',
  'el',
  'fen',
  'gar',
  'hal',
  'is',
  'jor',
  'ka',
  'lin',
  'mar',
  'nor',
  'or',
  'pel',
  'quin',
  'ros',
  'sel',
  'tor',
  'ul',
  'ven',
  'wen',
  'yar',
  'zel',
  'bran',
  'cal',
  'dor',
  'mir',
]
const CITY_SUFFIX = ['burg', 'ford', 'haven', 'mouth', 'ton', 'vale', 'port', 'stead']
const COMPANY_SUFFIX = ['Industries', 'Labs', 'Works', 'Systems', 'Group', 'Foods', 'Motors', 'Media']
const BOOK_NOUNS = [
  'Orchard',
  'Lantern',
  'River',
  'Harbor',
  'Mirror',
  'Garden',
  'Tower',
  'Winter',
  'Compass',
  'Meadow',
  'Signal',
  'Ember',
]
const BOOK_ADJS = [
  'Glass',
  'Silent',
  'Crimson',
  'Hollow',
  'Distant',
  'Golden',
  'Broken',
  'Quiet',
  'Northern',
  'Last',
  'Paper',
  'Salt',
]
const OCCUPATIONS = [
  'novelist',
  'engineer',
  'film director',
  'physicist',
  'entrepreneur',
  'painter',
  'economist',
  'architect',
]

const cap = (s: string) => `${s[0]?.toUpperCase()}${s.slice(1)}`

function word(rng: Rng, parts: number): string {
  let s = ''
  for (let i = 0; i < parts; i++) s += pick(rng, SYLLABLES)
  return cap(s)
}

export interface KnowledgeBase {
  entities: Entity[]
  passages: Passage[]
  byKind: Record<Kind, Entity[]>
}

const COUNTS: Record<Kind, number> = { country: 24, city: 96, person: 320, company: 80, book: 160, film: 100 }

function passageOf(e: Entity, name: (id: number | undefined) => string): Passage {
  const f = e.facts
  switch (e.kind) {
    case 'country':
      return { title: e.name, text: `${e.name} is a country. Its capital is ${name(f.capital)}.` }
    case 'city':
      return { title: e.name, text: `${e.name} is a city in ${name(f.located_in)}.` }
    case 'company':
      return {
        title: e.name,
        text: `${e.name} is a company founded by ${name(f.founded_by)}. It is headquartered in ${name(f.headquartered_in)}.`,
      }
    case 'person':
      return {
        title: e.name,
        text: `${e.name} is ${/^[aeiou]/.test(e.occupation ?? '') ? 'an' : 'a'} ${e.occupation} who was born in ${name(f.born_in)}. ${e.name} works for ${name(f.works_for)}.`,
      }
    case 'book':
      return { title: e.name, text: `${e.name} is a novel written by ${name(f.written_by)}.` }
    case 'film':
      return { title: e.name, text: `${e.name} is a film directed by ${name(f.directed_by)}.` }
  }
}

let cached: KnowledgeBase | null = null

export function knowledgeBase(): KnowledgeBase {
  if (cached) return cached
  const rng = mulberry32(hashString('searchqa-kb-v1'))
  const used = new Set<string>()
  const entities: Entity[] = []
  const byKind: Record<Kind, Entity[]> = { country: [], city: [], person: [], company: [], book: [], film: [] }
  const add = (kind: Kind, make: () => string): Entity => {
    let name = make()
    while (used.has(name.toLowerCase())) name = make()
    used.add(name.toLowerCase())
    const e: Entity = { id: entities.length, kind, name, facts: {} }
    entities.push(e)
    byKind[kind].push(e)
    return e
  }
  for (let i = 0; i < COUNTS.country; i++) add('country', () => `${word(rng, 2)}ia`)
  for (let i = 0; i < COUNTS.city; i++) {
    const c = add('city', () => `${word(rng, randInt(rng, 1, 3))}${pick(rng, CITY_SUFFIX)}`)
    c.facts.located_in = (byKind.country[i % COUNTS.country] as Entity).id
  }
  for (const country of byKind.country) {
    const cities = byKind.city.filter((c) => c.facts.located_in === country.id)
    country.facts.capital = (pick(rng, cities) as Entity).id
  }
  for (let i = 0; i < COUNTS.company; i++) {
    const co = add('company', () => `${word(rng, 2)} ${pick(rng, COMPANY_SUFFIX)}`)
    co.facts.headquartered_in = pick(rng, byKind.city).id
  }
  for (let i = 0; i < COUNTS.person; i++) {
    const p = add('person', () => `${word(rng, 2)} ${word(rng, 2)}`)
    p.facts.born_in = pick(rng, byKind.city).id
    p.facts.works_for = pick(rng, byKind.company).id
    p.occupation = pick(rng, OCCUPATIONS)
  }
  for (const co of byKind.company) co.facts.founded_by = pick(rng, byKind.person).id
  for (let i = 0; i < COUNTS.book; i++) {
    const b = add('book', () => `The ${pick(rng, BOOK_ADJS)} ${pick(rng, BOOK_NOUNS)} of ${word(rng, 2)}`)
    b.facts.written_by = pick(rng, byKind.person).id
  }
  for (let i = 0; i < COUNTS.film; i++) {
    const f = add('film', () => `${pick(rng, BOOK_ADJS)} ${word(rng, 2)}`)
    f.facts.directed_by = pick(rng, byKind.person).id
  }
  const name = (id: number | undefined) => (id === undefined ? '' : (entities[id] as Entity).name)
  const passages = entities.map((e) => passageOf(e, name))
  cached = { entities, passages, byKind }
  return cached
}
