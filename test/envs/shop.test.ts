import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { CATEGORIES, catalogue, UNSEEN_CATEGORIES } from '../../envs/shop/catalogue.ts'
import { generateShop, goalProducts, shop } from '../../envs/shop/index.ts'
import { nouns, type ShopGoal, shopReward, typeReward } from '../../envs/shop/reward.ts'
import { searchIndex } from '../../envs/shop/search.ts'

const say = (a: string) => shop.formatResponse(a, '')

describe('shop', () => {
  it('generates at least 1,000 products with unique ASINs across all categories', () => {
    const products = catalogue()
    assert.ok(products.length >= 1000)
    assert.equal(new Set(products.map((p) => p.asin)).size, products.length)
    assert.deepEqual([...new Set(products.map((p) => p.category))].sort(), Object.keys(CATEGORIES).sort())
  })

  it('holds out whole categories for test-unseen and keeps seen splits on disjoint products', () => {
    const unseen = new Set(goalProducts('test-unseen').map((p) => p.category))
    assert.deepEqual([...unseen].sort(), [...UNSEEN_CATEGORIES].sort())
    const train = new Set(goalProducts('train').map((p) => p.asin))
    for (const split of ['validation', 'test-seen', 'test-unseen'] as const) {
      for (const p of goalProducts(split)) assert.ok(!train.has(p.asin), `${split} ${p.asin}`)
      for (const p of goalProducts('train')) assert.ok(!UNSEEN_CATEGORIES.includes(p.category))
    }
  })

  it('ranks the product whose title is searched first with BM25', () => {
    const p = catalogue()[123]
    assert.ok(p)
    assert.equal(searchIndex().search(p.title.toLowerCase())[0]?.asin, p.asin)
    assert.deepEqual(searchIndex().search('   '), [])
  })

  it('scores the goal product with its options 1 and pays 10', () => {
    const ref = shop.task('train', 11)
    const goal = generateShop(ref)
    const product = searchIndex().byAsin(goal.asin)
    assert.ok(product)
    assert.equal(shopReward(goal, product, goal.options).score, 1)
  })

  it('applies the WebShop formula: (attributes + options + price) / (|attrs| + |options| + 1) × r_type', () => {
    const goal = generateShop(shop.task('train', 11))
    const product = searchIndex().byAsin(goal.asin)
    assert.ok(product)
    const nOptions = Object.keys(goal.options).length
    const parts = shopReward(goal, product, {})
    assert.equal(parts.score, (goal.attributes.length + 1) / (goal.attributes.length + nOptions + 1))
    const cheap: ShopGoal = { ...goal, priceUpper: 0 }
    assert.equal(
      shopReward(cheap, product, goal.options).score,
      (goal.attributes.length + nOptions) / (goal.attributes.length + nOptions + 1),
    )
  })

  it('gives r_type 0 for a product of another kind with no shared nouns', () => {
    const goal = generateShop(shop.task('train', 11))
    const other = catalogue().find(
      (p) =>
        p.category !== searchIndex().byAsin(goal.asin)?.category &&
        nouns(p.title).every((n) => !nouns(goal.name).includes(n)),
    )
    assert.ok(other)
    assert.equal(typeReward(goal, other), 0)
  })

  it('reports the task score and pays 0 below a score of 1', () => {
    const ep = shop.reset(shop.task('train', 11))
    const goal = generateShop(shop.task('train', 11))
    ep.step(say(`search[${searchIndex().byAsin(goal.asin)?.title.toLowerCase()}]`))
    ep.step(say(`click[${goal.asin.toLowerCase()}]`))
    const r = ep.step(say('click[buy now]'))
    assert.equal(r.done, true)
    assert.equal(r.reward, 0)
    assert.ok(Object.keys(goal.options).length > 0)
    assert.ok(r.info.score > 0 && r.info.score < 1, `score ${r.info.score}`)
    assert.equal(r.info.won, false)
  })

  it('keeps the page for a click that is not on it', () => {
    const ep = shop.reset(shop.task('train', 1))
    const r = ep.step(say('click[buy now]'))
    assert.deepEqual([r.observation, r.reward, r.valid, r.done], ["'Search'", 0, true, false])
  })
})
