// BM25 over the catalogue (wink-bm25-text-search), as WebShop ranks its search results page.
import { createBm25 } from '../bm25.ts'
import { catalogue, type Product } from './catalogue.ts'

/** WebShop shows at most 50 results, 10 per page. */
export const MAX_RESULTS = 50
export const RESULTS_PER_PAGE = 10

export interface SearchIndex {
  search(query: string): Product[]
  byAsin(asin: string): Product | undefined
}

function build(products: Product[]): SearchIndex {
  const engine = createBm25({ title: 2, body: 1 })
  const byId = new Map<string, Product>()
  for (const p of products) {
    byId.set(p.asin.toLowerCase(), p)
    engine.addDoc(
      { title: p.title, body: [p.type, p.categoryPath, ...p.attributes, p.description, ...p.features].join(' ') },
      p.asin.toLowerCase(),
    )
  }
  engine.consolidate()
  return {
    search(query: string): Product[] {
      const cleaned = query.replace(/[^\p{L}\p{N}\s-]/gu, ' ').slice(0, 500)
      if (cleaned.trim().length === 0) return []
      return engine.search(cleaned, MAX_RESULTS).flatMap(([id]) => byId.get(id) ?? [])
    },
    byAsin: (asin) => byId.get(asin.toLowerCase()),
  }
}

let index: SearchIndex | null = null

export function searchIndex(): SearchIndex {
  index ??= build(catalogue())
  return index
}
