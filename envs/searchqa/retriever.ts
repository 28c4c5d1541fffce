// Retrieval: BM25 over the local passage corpus, or a Search-R1 `/retrieve` server (e.g. an e5 Wikipedia index).
import { createBm25 } from '../bm25.ts'
import { knowledgeBase, type Passage } from './kb.ts'

export const TOP_K = 3

export interface Retriever {
  retrieve(query: string, k: number): Passage[]
}

export interface AsyncRetriever {
  retrieve(query: string, k: number): Promise<Passage[]>
}

/** Search-R1's information block: `\n<information>Doc 1(Title: …) …\nDoc 2…\n</information>\n`. */
export function formatInformation(passages: Passage[]): string {
  const docs = passages.map((p, i) => `Doc ${i + 1}(Title: ${p.title}) ${p.text}`).join('\n')
  return `\n<information>${docs}\n</information>\n`
}

let local: Retriever | null = null

export function localRetriever(): Retriever {
  if (local) return local
  const { passages } = knowledgeBase()
  const engine = createBm25({ title: 3, text: 1 })
  passages.forEach((p, i) => {
    engine.addDoc({ title: p.title, text: p.text }, String(i))
  })
  engine.consolidate()
  local = {
    retrieve(query: string, k: number): Passage[] {
      const cleaned = query.replace(/[^\p{L}\p{N}\s-]/gu, ' ').slice(0, 500)
      if (cleaned.trim().length === 0) return []
      return engine.search(cleaned, k).flatMap(([id]) => passages[Number(id)] ?? [])
    },
  }
  return local
}

export class RetrieverError extends Error {
  override name = 'RetrieverError'
}

/**
 * A client for Search-R1's retrieval server: POST {url}/retrieve with `{queries, topk, return_scores}`; each hit's
 * `document.contents` is `"Title"\ntext`.
 */
export function searchR1Retriever(url: string, options: { timeoutMs?: number; retries?: number } = {}): AsyncRetriever {
  const timeoutMs = options.timeoutMs ?? 10_000
  const retries = options.retries ?? 2
  return {
    async retrieve(query: string, k: number): Promise<Passage[]> {
      let last: unknown
      for (let attempt = 0; attempt <= retries; attempt++) {
        try {
          const res = await fetch(`${url.replace(/\/$/, '')}/retrieve`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ queries: [query], topk: k, return_scores: true }),
            signal: AbortSignal.timeout(timeoutMs),
          })
          if (!res.ok) throw new RetrieverError(`POST ${url}/retrieve: HTTP ${res.status}`)
          const body = (await res.json()) as {
            result?: Array<Array<{ document?: { contents?: string } } | { contents?: string }>>
          }
          const hits = body.result?.[0]
          if (!Array.isArray(hits)) throw new RetrieverError(`POST ${url}/retrieve: no result list in the response`)
          return hits.slice(0, k).map((h) => {
            const contents = ('document' in h ? h.document?.contents : (h as { contents?: string }).contents) ?? ''
            const newline = contents.indexOf('\n')
            const title = (newline < 0 ? contents : contents.slice(0, newline)).replace(/^"|"$/g, '')
            return { title, text: newline < 0 ? '' : contents.slice(newline + 1) }
          })
        } catch (error) {
          last = error
        }
      }
      throw new RetrieverError(`POST ${url}/retrieve failed after ${retries + 1} attempts: ${String(last)}`)
    },
  }
}
