// WebShop's reward (docs/algorithm.md §10.3): attributes, options and price, scaled by a product-type check.
import { token_set_ratio } from 'fuzzball'
import { modifierVocabulary, type Product } from './catalogue.ts'

export const FUZZY_THRESHOLD = 85

export interface ShopGoal {
  asin: string
  instruction: string
  /** The product type asked for (WebShop's goal "query"). */
  query: string
  categoryPath: string
  /** The goal product's title (WebShop's goal "name"), for the noun overlap. */
  name: string
  attributes: string[]
  /** Option kind → wanted value. */
  options: Record<string, string>
  priceUpper: number
}

export interface RewardParts {
  score: number
  attributes: number
  options: number
  priceOk: boolean
  rType: number
}

const STOPWORDS = new Set(['the', 'and', 'for', 'with', 'set', 'of', 'a', 'an', 'in', 'to', 'by'])
let modifiers: Set<string> | null = null

/**
 * Nouns of a product name. WebShop tags them with spaCy; we use a documented heuristic instead: the lowercase
 * words that are not stopwords, numbers or catalogue modifiers (attributes, option values, style words, brands).
 */
export function nouns(name: string): string[] {
  modifiers ??= modifierVocabulary()
  const m = modifiers
  return [...new Set(name.toLowerCase().split(/[^a-z0-9-]+/))].filter(
    (w) => w.length >= 2 && !/^\d/.test(w) && !STOPWORDS.has(w) && !m.has(w),
  )
}

export function typeReward(goal: ShopGoal, bought: Product): number {
  const queryMatch = goal.query === bought.type
  const goalCats = new Set(goal.categoryPath.split('›').map((s) => s.trim()))
  const shared = bought.categoryPath.split('›').filter((s) => goalCats.has(s.trim())).length
  const wanted = nouns(goal.name)
  const got = new Set(nouns(bought.title))
  const titleScore = wanted.length === 0 ? 0.2 : wanted.filter((w) => got.has(w)).length / wanted.length
  let r = queryMatch || shared >= 2 || titleScore > 0.2 ? 1 : 0.5
  if (titleScore < 0.1) r = 0.1
  if (titleScore === 0) r = 0
  return r
}

export function shopReward(goal: ShopGoal, bought: Product, selected: Record<string, string>): RewardParts {
  const text = `${bought.title} ${bought.features.join(' ')} ${bought.description}`.toLowerCase()
  const attributes = goal.attributes.filter(
    (a) => bought.attributes.some((pa) => token_set_ratio(pa, a) > FUZZY_THRESHOLD) || text.includes(a),
  ).length
  const chosen = Object.values(selected)
  const options = Object.values(goal.options).filter((g) =>
    chosen.some((v) => token_set_ratio(v, g) > FUZZY_THRESHOLD),
  ).length
  const priceOk = bought.price <= goal.priceUpper
  const rType = typeReward(goal, bought)
  const total = goal.attributes.length + Object.keys(goal.options).length + 1
  const score = ((attributes + options + (priceOk ? 1 : 0)) / total) * rType
  return { score, attributes, options, priceOk, rType }
}
