// One BM25 setup for every environment that ranks text (shop's search page, searchqa's local retriever).
import bm25 from 'wink-bm25-text-search'
import nlp from 'wink-nlp-utils'

/** A wink BM25 engine over the given fields (name → weight), with lower-casing, stop words and stemming. */
export function createBm25(fieldWeights: Record<string, number>): ReturnType<typeof bm25> {
  const engine = bm25()
  engine.defineConfig({ fldWeights: fieldWeights })
  engine.definePrepTasks([
    nlp.string.lowerCase,
    nlp.string.removePunctuations,
    nlp.string.tokenize0,
    nlp.tokens.removeWords,
    nlp.tokens.stem,
  ] as Array<(input: never) => unknown>)
  return engine
}
