// Every document the code and the READMEs cite is in the repository, and so is every section they cite:
// `docs/design.md §7` needs a `## 7.` heading in docs/design.md, a path like `envs/README.md` needs the file, and
// the team's notes outside the repository (which a clone cannot see) are never cited. This file names those notes
// itself, so it leaves itself out of the checks of source files. Source files cite the reference documents only,
// never the dated lab notes of docs/journal/ (the reference links to those), and docs/benchmarks.md stays a
// reference: at most REFERENCE_MAX_LINES lines.
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { PROJECT_ROOT } from '../../infra/tools.ts'

const SELF = relative(PROJECT_ROOT, fileURLToPath(import.meta.url))
const SKIP_DIRS = new Set(['node_modules', '.git', '.tools', '.seedflow', 'dist', 'tmp'])
const SOURCE = /\.(ts|js|mjs|cjs|py|sh)$/
/** Scripts without an extension. */
const SCRIPTS = new Set(['.ci/run'])

/** Documents that live outside the repository, and the ways the code used to cite them. */
const EXTERNAL: ReadonlyArray<readonly [RegExp, string]> = [
  [/\bDESIGN\.md\b/, 'DESIGN.md (cite docs/design.md)'],
  [/\bSTYLE\.md\b/, 'STYLE.md (cite docs/design.md §11)'],
  [/seed-algorithm/, 'seed-algorithm.md (cite docs/algorithm.md)'],
  [/\b(engine|infra|cpu-scale)[- ]notes\b/i, 'the team notes (cite docs/benchmarks.md or docs/design.md)'],
  [/\breference sections? \d/i, '"reference section N" (cite docs/algorithm.md §N)'],
  [/\breference \d+(\.\d+)*\b/i, '"reference N" (cite docs/algorithm.md §N)'],
  [/\/work\/shared|shared\/reference/, 'the shared folder'],
]

function walk(dir: string, keep: (path: string) => boolean, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name)) walk(join(dir, entry.name), keep, out)
    } else if (entry.isFile()) {
      const path = relative(PROJECT_ROOT, join(dir, entry.name))
      if (keep(path)) out.push(path)
    }
  }
  return out
}

const sources = walk(PROJECT_ROOT, (p) => (SOURCE.test(p) || SCRIPTS.has(p)) && p !== SELF).sort()
const markdown = walk(PROJECT_ROOT, (p) => p.endsWith('.md') && !p.startsWith('bench/results/')).sort()
const docs = markdown.filter((p) => p.startsWith('docs/'))

/** A citation of the dated lab notes: `docs/journal/…`, also relative (`../docs/journal/…`). */
const JOURNAL = /(?:^|[^\w-])docs\/journal\b/
const REFERENCE_MAX_LINES = 400

/** The problem with `line` of a source file if it cites a journal entry, or none. */
function journalCitation(where: string, line: string): string[] {
  return JOURNAL.test(line)
    ? [`${where}: cites docs/journal/, a dated lab note (cite a docs/benchmarks.md section)`]
    : []
}

const HEADING = /^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s/

/** The section numbers of a document, in order: `## 7. Title` → 7, `### 7.2 Title` → 7.2. */
function numbersOf(path: string): string[] {
  return readFileSync(join(PROJECT_ROOT, path), 'utf8')
    .split('\n')
    .flatMap((line) => {
      const m = HEADING.exec(line)
      return m ? [m[1] as string] : []
    })
}

const sections = new Map(docs.map((d) => [d, new Set(numbersOf(d))]))

/** `docs/x.md` and the sections after it: `§N`, `§N.M`, lists (`§3, §4 and §5`), ranges (`§6.1–§6.5`). */
const DOC_CITATION = /docs\/([\w-]+\.md)((?:(?:\s*(?:,|and|or|–|-|to)\s*|\s*)§\s?\d+(?:\.\d+)*)*)/g
const SECTION = /§\s?(\d+(?:\.\d+)*)/g
/** A path with at least one folder that ends in `.md`. */
const MD_PATH = /(?<![\w./-])((?:\.\.?\/)*(?:[\w.-]+\/)+[\w.-]+\.md)\b/g
/** `[text](target.md)`, the text possibly naming sections (`[design §3](design.md)`). */
const LINK = /\[([^\]]*)\]\(([^)\s#]+\.md)(#[^)]*)?\)/g

/** Problems with the sections named in `text` of document `doc` (a repository path). */
function sectionProblems(where: string, doc: string, text: string): string[] {
  const known = sections.get(doc)
  return [...text.matchAll(SECTION)]
    .map((s) => s[1] as string)
    .filter((n) => !known?.has(n))
    .map((n) => `${where}: cites ${doc} §${n}, which ${doc} does not have`)
}

/** `docs/x.md §N` citations in a line: the document must exist, and so must each section. */
function docCitationProblems(where: string, line: string): string[] {
  return [...line.matchAll(DOC_CITATION)].flatMap((m) => {
    const doc = `docs/${m[1]}`
    if (!sections.has(doc)) return [`${where}: cites ${doc}, which is not in the repository`]
    return sectionProblems(where, doc, m[2] ?? '')
  })
}

function linesOf(path: string): string[] {
  return readFileSync(join(PROJECT_ROOT, path), 'utf8').split('\n')
}

describe('citations in the code', () => {
  it('finds the source files and the documents', () => {
    assert.ok(sources.length > 100, `only ${sources.length} source files found under ${PROJECT_ROOT}`)
    for (const doc of ['docs/design.md', 'docs/algorithm.md', 'docs/operations.md', 'docs/benchmarks.md'])
      assert.ok(sections.get(doc)?.size, `${doc} is missing or has no numbered sections`)
  })

  it('never cites the team notes outside the repository', () => {
    const found: string[] = []
    for (const file of [...sources, ...markdown.filter((p) => !p.startsWith('docs/'))]) {
      linesOf(file).forEach((line, i) => {
        for (const [pattern, what] of EXTERNAL) if (pattern.test(line)) found.push(`${file}:${i + 1}: ${what}`)
      })
    }
    assert.deepEqual(found, [])
  })

  it('finds a citation of the journal in a line, relative or not', () => {
    assert.deepEqual(journalCitation('a.ts:3', '// measured in docs/journal/2026-12-issue-20-household.md'), [
      'a.ts:3: cites docs/journal/, a dated lab note (cite a docs/benchmarks.md section)',
    ])
    assert.equal(journalCitation('a.ts:4', "import x from '../../docs/journal/x.md'").length, 1)
    assert.deepEqual(journalCitation('a.ts:5', '// docs/benchmarks.md §3.7; my-docs/journal is not it'), [])
  })

  it('never cites the journal (docs/journal/), only reference sections', () => {
    const found: string[] = []
    for (const file of sources)
      linesOf(file).forEach((line, i) => {
        found.push(...journalCitation(`${file}:${i + 1}`, line))
      })
    assert.deepEqual(found, [])
  })

  it('cites only documents and sections that exist', () => {
    const found: string[] = []
    for (const file of sources) {
      const dir = dirname(join(PROJECT_ROOT, file))
      linesOf(file).forEach((line, i) => {
        const where = `${file}:${i + 1}`
        found.push(...docCitationProblems(where, line))
        const rest = line.replace(DOC_CITATION, ' ')
        for (const m of rest.matchAll(MD_PATH)) {
          const path = m[1] as string
          if (!existsSync(join(PROJECT_ROOT, path)) && !existsSync(resolve(dir, path)))
            found.push(`${where}: cites ${path}, which is not in the repository`)
        }
        if (rest.includes('§')) found.push(`${where}: a § without the document it belongs to`)
      })
    }
    assert.deepEqual(found, [])
  })
})

describe('citations in the documents', () => {
  it('links only to documents and sections that exist', () => {
    const found: string[] = []
    for (const file of markdown) {
      const dir = dirname(join(PROJECT_ROOT, file))
      linesOf(file).forEach((line, i) => {
        const where = `${file}:${i + 1}`
        for (const m of line.matchAll(LINK)) {
          const target = relative(PROJECT_ROOT, resolve(dir, m[2] as string))
          if (existsSync(join(PROJECT_ROOT, target))) found.push(...sectionProblems(where, target, m[1] ?? ''))
          else found.push(`${where}: links to ${m[2]}, which does not exist`)
        }
        // outside links, `docs/x.md §N` names another document (also in code spans); in a document of docs/, a
        // bare §N is one of its own sections
        const text = line.replace(LINK, ' ').replace(/`[^`]*`/g, (code) => (/docs\/[\w-]+\.md/.test(code) ? code : ' '))
        found.push(...docCitationProblems(where, text))
        if (file.startsWith('docs/')) found.push(...sectionProblems(where, file, text.replace(DOC_CITATION, ' ')))
      })
    }
    assert.deepEqual(found, [])
  })

  it('keeps docs/benchmarks.md a reference, its lab notes in docs/journal/', () => {
    const lines = linesOf('docs/benchmarks.md').length - 1
    assert.ok(lines <= REFERENCE_MAX_LINES, `docs/benchmarks.md has ${lines} lines, more than ${REFERENCE_MAX_LINES}`)
    assert.ok(
      markdown.some((p) => p.startsWith('docs/journal/')),
      'docs/journal/ holds no entry',
    )
  })

  it('numbers each section of a document once', () => {
    for (const doc of docs) {
      const numbers = numbersOf(doc)
      assert.deepEqual(
        numbers.filter((n, i) => numbers.indexOf(n) !== i),
        [],
        `${doc} numbers a section twice`,
      )
    }
  })
})
