// WebShop-like shopping (docs/algorithm.md §10.3): search and click pages over the generated catalogue, WebShop's
// reward; training reward 10 when the task score is exactly 1 (verl-agent), and the score reported.
import {
  defineEnv,
  type EnvSpec,
  formatThinkAction,
  parseThinkAction,
  renderHistory,
  THINK_ACTION_INSTRUCTION,
  THINK_ACTION_INSTRUCTION_COMPACT,
  type Transition,
} from '../core.ts'
import { hashString, mixSeed, mulberry32, pick, randInt, shuffled } from '../rng.ts'
import type { OracleAnalysis, Split, TaskRef, Trajectory } from '../types.ts'
import { catalogue, type Product, UNSEEN_CATEGORIES } from './catalogue.ts'
import { type ShopGoal, shopReward } from './reward.ts'
import { RESULTS_PER_PAGE, searchIndex } from './search.ts'

export const SHOP_MAX_STEPS = 15
export const SUCCESS_REWARD = 10
const PRICE_STEPS = [10, 20, 30, 40, 50, 60, 80, 100, 150, 200, 300, 500, 1000]
const SPLIT_BUCKET: Record<Exclude<Split, 'test-unseen'>, (b: number) => boolean> = {
  'test-seen': (b) => b === 0,
  validation: (b) => b === 1,
  train: (b) => b >= 2,
}

export interface ShopState {
  page: 'search' | 'results' | 'item' | 'detail' | 'done'
  query: string
  results: Product[]
  pageNo: number
  product: Product | null
  selected: Record<string, string>
  detail: 'description' | 'features' | 'reviews' | null
  score: number
}

const eligible = new Map<Split, Product[]>()

/** Goal products per split: held-out categories for test-unseen; seen categories split by ASIN hash otherwise. */
export function goalProducts(split: Split): Product[] {
  const cached = eligible.get(split)
  if (cached) return cached
  const list = catalogue().filter((p) => {
    const unseen = UNSEEN_CATEGORIES.includes(p.category)
    if (split === 'test-unseen') return unseen
    return !unseen && SPLIT_BUCKET[split](hashString(p.asin) % 10)
  })
  eligible.set(split, list)
  return list
}

const SPLIT_STREAM: Record<Split, number> = { train: 0, validation: 1, 'test-seen': 2, 'test-unseen': 3 }

export function generateShop(ref: TaskRef): ShopGoal {
  const rng = mulberry32(mixSeed(hashString('shop'), SPLIT_STREAM[ref.split], ref.seed))
  const product = pick(rng, goalProducts(ref.split))
  const attributes = shuffled(rng, product.attributes).slice(0, randInt(rng, 1, 3))
  const options: Record<string, string> = {}
  for (const [kind, values] of Object.entries(product.options)) options[kind] = pick(rng, values)
  const priceUpper = PRICE_STEPS.find((p) => p > product.price) ?? 5000
  const optionText = Object.entries(options)
    .map(([k, v]) => `${k}: ${v}`)
    .join(', and ')
  const instruction =
    `i am looking for ${attributes.join(' and ')} ${product.type}` +
    `${optionText ? ` with ${optionText}` : ''}, and price lower than ${priceUpper.toFixed(2)} dollars`
  return {
    asin: product.asin,
    instruction,
    query: product.type,
    categoryPath: product.categoryPath,
    name: product.title,
    attributes,
    options,
    priceUpper,
  }
}

const quote = (parts: string[]) => parts.map((p) => `'${p}'`).join(' [SEP] ')

function observe(s: ShopState): string {
  switch (s.page) {
    case 'search':
      return quote(['Search'])
    case 'results': {
      const start = (s.pageNo - 1) * RESULTS_PER_PAGE
      const shown = s.results.slice(start, start + RESULTS_PER_PAGE)
      const parts = ['Back to Search', `Page ${s.pageNo} (Total results: ${s.results.length})`]
      if (s.pageNo > 1) parts.push('< Prev')
      if (start + RESULTS_PER_PAGE < s.results.length) parts.push('Next >')
      for (const p of shown) parts.push(p.asin, p.title, `$${p.price.toFixed(2)}`)
      return quote(parts)
    }
    case 'item': {
      const p = s.product as Product
      const parts = ['Back to Search', '< Prev']
      for (const [kind, values] of Object.entries(p.options)) parts.push(kind, ...values)
      const chosen = Object.entries(s.selected).map(([k, v]) => `${k}: ${v}`)
      if (chosen.length > 0) parts.push(`Selected: ${chosen.join(', ')}`)
      parts.push(
        p.title,
        `Price: $${p.price.toFixed(2)}`,
        `Rating: ${p.rating}`,
        'Description',
        'Features',
        'Reviews',
        'Buy Now',
      )
      return quote(parts)
    }
    case 'detail': {
      const p = s.product as Product
      const body =
        s.detail === 'description'
          ? p.description
          : s.detail === 'features'
            ? p.features.join('; ')
            : `Rated ${p.rating} out of 5 by shoppers.`
      return quote(['Back to Search', '< Prev', body])
    }
    case 'done':
      return quote(['Thank you for shopping with us!', 'Your score (min 0.0, max 1.0)', s.score.toFixed(2)])
  }
}

function clickables(s: ShopState): string[] {
  switch (s.page) {
    case 'search':
      return []
    case 'results': {
      const start = (s.pageNo - 1) * RESULTS_PER_PAGE
      const out = ['back to search']
      if (s.pageNo > 1) out.push('< prev')
      if (start + RESULTS_PER_PAGE < s.results.length) out.push('next >')
      for (const p of s.results.slice(start, start + RESULTS_PER_PAGE)) out.push(p.asin.toLowerCase())
      return out
    }
    case 'item': {
      const p = s.product as Product
      const values = Object.values(p.options).flat()
      return ['back to search', '< prev', ...values, 'description', 'features', 'reviews', 'buy now']
    }
    case 'detail':
      return ['back to search', '< prev']
    case 'done':
      return []
  }
}

function transition(goal: ShopGoal, s: ShopState, action: string): Transition {
  const stay = (): Transition => ({ observation: observe(s), reward: 0, done: false, won: false })
  const search = /^search\[(.*)\]$/s.exec(action)
  if (search) {
    if (s.page !== 'search') return stay()
    s.query = (search[1] as string).trim()
    s.results = searchIndex().search(s.query)
    s.pageNo = 1
    s.page = 'results'
    return stay()
  }
  const click = /^click\[(.*)\]$/s.exec(action)
  if (!click) return stay()
  const target = (click[1] as string).trim()
  if (!clickables(s).includes(target)) return stay()
  if (target === 'back to search') {
    Object.assign(s, { page: 'search', query: '', results: [], pageNo: 1, product: null, selected: {}, detail: null })
  } else if (target === 'next >') s.pageNo++
  else if (target === '< prev') {
    if (s.page === 'results') s.pageNo--
    else if (s.page === 'item') Object.assign(s, { page: 'results', product: null, selected: {} })
    else Object.assign(s, { page: 'item', detail: null })
  } else if (s.page === 'results') {
    Object.assign(s, { page: 'item', product: searchIndex().byAsin(target), selected: {} })
  } else if (target === 'description' || target === 'features' || target === 'reviews') {
    Object.assign(s, { page: 'detail', detail: target })
  } else if (target === 'buy now') {
    const parts = shopReward(goal, s.product as Product, s.selected)
    s.score = parts.score
    s.page = 'done'
    const won = parts.score === 1
    return { observation: observe(s), reward: won ? SUCCESS_REWARD : 0, done: true, won, score: parts.score }
  } else {
    const p = s.product as Product
    const kind = Object.keys(p.options).find((k) => (p.options[k] as string[]).includes(target))
    if (kind) s.selected = { ...s.selected, [kind]: target }
  }
  return stay()
}

function admissible(s: ShopState): string[] {
  if (s.page === 'search') return ['search[<your query>]']
  return clickables(s).map((c) => `click[${c}]`)
}

function expert(goal: ShopGoal, s: ShopState): string {
  const asin = goal.asin.toLowerCase()
  if (s.page === 'search') return `search[${searchIndex().byAsin(asin)?.title.toLowerCase()}]`
  if (s.page === 'results') {
    const options = clickables(s)
    if (options.includes(asin)) return `click[${asin}]`
    return options.includes('next >') ? 'click[next >]' : 'click[back to search]'
  }
  if (s.page === 'item') {
    if (s.product?.asin.toLowerCase() !== asin) return 'click[< prev]'
    for (const [kind, value] of Object.entries(goal.options)) if (s.selected[kind] !== value) return `click[${value}]`
    return 'click[buy now]'
  }
  return 'click[< prev]'
}

function render(view: Parameters<EnvSpec<ShopGoal, ShopState>['render']>[0]): string {
  const { history, stepCount, observation, taskText, admissible: actions } = view
  if (view.compact) {
    const past = history.length > 0 ? `Last: ${renderHistory(history, stepCount)}\n` : ''
    return [
      `WebShop. Your task is to: ${taskText}`,
      `${past}Step ${stepCount + 1}: ${observation}`,
      `Actions: ${(actions ?? []).join(', ')}`,
      `Now it's your turn. ${THINK_ACTION_INSTRUCTION_COMPACT}`,
    ].join('\n')
  }
  const head =
    stepCount === 0 || history.length === 0
      ? `Your current observation is: ${observation}.`
      : `Prior to this step, you have already taken ${stepCount} step(s). Below are the most recent ${history.length} ` +
        `observations and the corresponding actions you took: ${renderHistory(history, stepCount)}\n` +
        `You are now at step ${stepCount + 1} and your current observation is: ${observation}.`
  return [
    'You are an expert autonomous agent operating in the WebShop e-commerce platform.',
    `Your task is to: ${taskText}.`,
    head,
    `Your admissible actions of the current situation are:\n[\n${(actions ?? []).map((a) => `'${a}'`).join(',\n')}\n].`,
    '',
    "Now it's your turn to take one action for the current step.",
    THINK_ACTION_INSTRUCTION,
  ].join('\n')
}

function oracle(t: Trajectory): OracleAnalysis {
  const text = `${t.taskText}\n${t.steps.map((s) => `${s.observation}\n${s.response}`).join('\n')}`
  const visible = (e: string) => e.length > 0 && text.includes(e)
  const actions = t.steps.filter((s) => s.valid).map((s) => s.action as string)
  const inner = (a: string) => a.slice(a.indexOf('[') + 1, -1)
  const query = actions.find((a) => a.startsWith('search['))
  const clicked = actions.filter((a) => a.startsWith('click[')).map(inner)
  const wanted = [...t.taskText.matchAll(/[a-z]+: ([^,]+?)(?:, and|, and price|$)/g)].map((m) =>
    (m[1] as string).trim(),
  )
  const bought = clicked.includes('buy now')
  if (t.info.won) {
    const chosen = clicked.filter((c) => wanted.includes(c))
    const entities = [...(query ? [inner(query)] : []), ...chosen].filter(visible)
    return {
      output: {
        episode_summary: `Bought a product matching "${t.taskText}" with score 1 in ${t.steps.length} steps.`,
        episode_skill:
          `Workflow: search with the product type and its key attributes${query ? ` (here "${inner(query)}")` : ''}, open the ` +
          `result whose title names them, click every option the instruction lists${chosen.length ? ` (${chosen.join(', ')})` : ''}, ` +
          'check the price limit, then click buy now.',
      },
      entities,
    }
  }
  const invalid = t.steps.filter((s) => !s.valid).length
  let rule: string
  let entities: string[] = []
  if (invalid > t.steps.length / 2) {
    rule = `Avoid malformed replies: ${invalid} of ${t.steps.length} responses lacked <think>…</think><action>…</action>.`
  } else if (bought) {
    const missed = wanted.filter((w) => !clicked.includes(w)).filter(visible)
    entities = missed
    rule = missed.length
      ? `Avoid clicking buy now before selecting every option the instruction names: ${missed.join(', ')} was never clicked.`
      : 'Avoid buying the first result blindly: compare the title, attributes and price with the instruction before buy now.'
  } else {
    rule =
      `Avoid browsing until the step limit: after ${actions.length} actions nothing was bought. ` +
      'Search once with the product type, open the best match, pick the options and click buy now within a few steps.'
  }
  return {
    output: { episode_summary: `Failed "${t.taskText}" after ${t.steps.length} steps.`, episode_skill: rule },
    entities,
  }
}

export const SHOP_SPEC: EnvSpec<ShopGoal, ShopState> = {
  name: 'shop',
  maxSteps: SHOP_MAX_STEPS,
  historyLength: 2,
  generate: generateShop,
  taskText: (g) => g.instruction,
  family: (g) => searchIndex().byAsin(g.asin)?.category ?? 'unknown',
  initial() {
    const state: ShopState = {
      page: 'search',
      query: '',
      results: [],
      pageNo: 1,
      product: null,
      selected: {},
      detail: null,
      score: 0,
    }
    return { state, observation: observe(state) }
  },
  transition,
  // WebShop keeps the page as it is for an action it cannot perform.
  invalid: (_g, s) => ({ observation: observe(s), reward: 0, done: false, won: false }),
  admissible: (_g, s) => admissible(s),
  parse: (response) => parseThinkAction(response),
  formatResponse: formatThinkAction,
  render,
  expert,
  randomAction(goal, s, rng) {
    if (s.page === 'search') {
      const words = goal.instruction.split(' ')
      const start = randInt(rng, 0, Math.max(1, words.length - 3))
      return `search[${words.slice(start, start + randInt(rng, 1, 5)).join(' ')}]`
    }
    return pick(rng, admissible(s))
  },
  oracle,
}

export const shop = defineEnv(SHOP_SPEC)
