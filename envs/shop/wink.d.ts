// Minimal typings for the two wink packages the shop's search engine uses (they ship none).
declare module 'wink-bm25-text-search' {
  interface Bm25Engine {
    defineConfig(config: {
      fldWeights: Record<string, number>
      bm25Params?: { k1?: number; b?: number; k?: number }
    }): boolean
    definePrepTasks(tasks: Array<(input: never) => unknown>, field?: string): number
    addDoc(doc: Record<string, string>, id: string | number): number
    consolidate(fp?: number): boolean
    search(text: string, limit?: number): Array<[string, number]>
  }
  function bm25(): Bm25Engine
  export default bm25
}

declare module 'wink-nlp-utils' {
  const nlp: {
    string: Record<'lowerCase' | 'removePunctuations' | 'tokenize0' | 'removeExtraSpaces', (s: never) => never>
    tokens: Record<'removeWords' | 'stem', (t: never) => never>
  }
  export default nlp
}
