// The project's import graph, built with the TypeScript compiler API over every file tsconfig.json includes
// (all the source directories and test/: a helper of the tests that closed a circle with the code it tests, or
// source that imported a test, would be as wrong as a circle in the source). Type-only imports count: an
// `import type`, `import { type X }`, `export … from` and `import('…')` types tie two modules together for the
// reader and for tsc just as a value import does. Three rules:
//   - no import cycle, except the engine's op table (the builder, the op definitions and the ops written with
//     the builder: inherent to rules written with it), named file by file below;
//   - the source folders stand on floors (FLOORS below, docs/design.md §2): a folder imports only folders on
//     lower floors, never one on its own floor or above (the readers of a finished run, report/ and exports/,
//     read it through records/, not through the activities that wrote it);
//   - nothing in store/, compute/, records/ or activities/ imports infra/ (fault injection and servers are wired
//     in by the workers' composition roots, not called from inside the layers they exercise).
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** The one cycle allowed: the engine's op table, file by file (a new member must be added here by name). */
const OP_TABLE = new Set([
  'engine/builder.ts',
  'engine/op-def.ts',
  'engine/ops/elementwise.ts',
  'engine/ops/generators.ts',
  'engine/ops/index-ops.ts',
  'engine/ops/index.ts',
  'engine/ops/nn.ts',
  'engine/ops/reduce.ts',
  'engine/ops/shape-ops.ts',
])

/**
 * The floor of each top-level source folder: an import runs from a higher floor to a lower one only. A new
 * folder must be given its floor here by name. test/ stands above them all and is not listed.
 */
const FLOORS: Readonly<Record<string, number>> = {
  engine: 1,
  store: 1,
  envs: 1,
  infra: 2,
  policy: 2,
  seed: 3,
  compute: 4,
  records: 5,
  serve: 5,
  activities: 6,
  report: 6,
  workers: 7,
  exports: 7,
  workflows: 8,
  cli: 9,
  bench: 10,
}

/** Layers that must not import infra/. */
const NO_INFRA = ['store/', 'compute/', 'records/', 'activities/']

interface Edge {
  from: string
  to: string
  line: number
  /** The importing statement, on one line. */
  text: string
  typeOnly: boolean
}

interface Graph {
  files: string[]
  edges: Edge[]
  /** from → to → the first edge between them. */
  out: Map<string, Map<string, Edge>>
}

function buildGraph(): Graph {
  const configPath = join(ROOT, 'tsconfig.json')
  const config = ts.readConfigFile(configPath, ts.sys.readFile)
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'))
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT, undefined, configPath)
  const name = (path: string) => relative(ROOT, path).split(sep).join('/')
  const inProject = new Set(parsed.fileNames.map((f) => resolve(f)))
  const files = [...inProject].map(name).sort()
  const edges: Edge[] = []
  for (const path of inProject) {
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true)
    const add = (specifier: ts.Node | undefined, statement: ts.Node, typeOnly: boolean) => {
      if (!specifier || !ts.isStringLiteralLike(specifier)) return
      const resolved = ts.resolveModuleName(specifier.text, path, parsed.options, ts.sys).resolvedModule
      if (!resolved || resolved.isExternalLibraryImport) return
      const target = resolve(resolved.resolvedFileName)
      if (!inProject.has(target)) return
      const { line } = source.getLineAndCharacterOfPosition(statement.getStart(source))
      const text = statement.getText(source).replace(/\s+/g, ' ')
      edges.push({
        from: name(path),
        to: name(target),
        line: line + 1,
        text: text.length > 120 ? `${text.slice(0, 117)}...` : text,
        typeOnly,
      })
    }
    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node)) {
        const clause = node.importClause
        const named = clause?.namedBindings
        const allTypes =
          clause !== undefined &&
          (clause.isTypeOnly ||
            (clause.name === undefined &&
              named !== undefined &&
              ts.isNamedImports(named) &&
              named.elements.length > 0 &&
              named.elements.every((e) => e.isTypeOnly)))
        add(node.moduleSpecifier, node, allTypes)
      } else if (ts.isExportDeclaration(node)) {
        const named = node.exportClause
        const allTypes =
          node.isTypeOnly ||
          (named !== undefined &&
            ts.isNamedExports(named) &&
            named.elements.length > 0 &&
            named.elements.every((e) => e.isTypeOnly))
        add(node.moduleSpecifier, node, allTypes)
      } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
        add(node.moduleReference.expression, node, node.isTypeOnly)
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        add(node.arguments[0], node, false)
      } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
        add(node.argument.literal, node, true)
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
  }
  const out = new Map<string, Map<string, Edge>>()
  for (const edge of edges) {
    const targets = out.get(edge.from) ?? new Map<string, Edge>()
    if (!targets.has(edge.to)) targets.set(edge.to, edge)
    out.set(edge.from, targets)
  }
  return { files, edges, out }
}

/** Strongly connected components with a cycle in them (Tarjan), members sorted, components sorted. */
function cyclicComponents(graph: Graph): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  let next = 0
  const connect = (v: string): void => {
    index.set(v, next)
    low.set(v, next)
    next++
    stack.push(v)
    onStack.add(v)
    for (const w of graph.out.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        connect(w)
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number))
    }
    if (low.get(v) !== index.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop() as string
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || graph.out.get(v)?.has(v)) found.push(component.sort())
  }
  for (const file of graph.files) if (!index.has(file)) connect(file)
  return found.sort((a, b) => (a[0] as string).localeCompare(b[0] as string))
}

/** A shortest cycle through `start` inside `component`, as its edges. */
function shortestCycle(graph: Graph, component: Set<string>, start: string): Edge[] {
  const previous = new Map<string, Edge>()
  const queue = [start]
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i] as string
    for (const [w, edge] of graph.out.get(v) ?? []) {
      if (!component.has(w)) continue
      if (w === start) {
        const path = [edge]
        for (let at = v; at !== start; ) {
          const back = previous.get(at) as Edge
          path.unshift(back)
          at = back.from
        }
        return path
      }
      if (!previous.has(w)) {
        previous.set(w, edge)
        queue.push(w)
      }
    }
  }
  throw new Error(`no cycle through ${start}`)
}

/** Cycles that together pass through every member of a component, each written out with its imports. */
function describeComponent(graph: Graph, component: string[]): string {
  const members = new Set(component)
  const covered = new Set<string>()
  const lines = [`cycle among ${component.length} files: ${component.join(', ')}`]
  for (const file of component) {
    if (covered.has(file)) continue
    const cycle = shortestCycle(graph, members, file)
    for (const edge of cycle) covered.add(edge.from)
    lines.push(`  ${[...cycle.map((e) => e.from), file].join(' → ')}`)
    for (const edge of cycle) lines.push(`      ${edge.from}:${edge.line}  ${edge.text}`)
  }
  return lines.join('\n')
}

describe('import graph (type-only imports included)', () => {
  const graph = buildGraph()

  it('sees the whole project, type-only imports too', () => {
    assert.ok(graph.files.length > 100, `only ${graph.files.length} files`)
    for (const dir of ['activities/', 'records/', 'compute/', 'store/', 'infra/', 'workflows/', 'engine/', 'test/'])
      assert.ok(
        graph.files.some((f) => f.startsWith(dir)),
        `no file under ${dir}`,
      )
    assert.ok(
      graph.edges.some((e) => e.typeOnly),
      'no type-only import found',
    )
  })

  it('has no import cycle but the engine op table', () => {
    const problems = cyclicComponents(graph)
      .filter((component) => !component.every((file) => OP_TABLE.has(file)))
      .map((component) => describeComponent(graph, component))
    assert.equal(
      problems.length,
      0,
      `${problems.length} import cycle${problems.length === 1 ? '' : 's'} outside the engine op table:\n${problems.join('\n')}`,
    )
  })

  it('gives every source folder a floor', () => {
    const folders = new Set(graph.files.map((f) => f.split('/')[0] as string).filter((d) => d !== 'test'))
    const unplaced = [...folders].filter((d) => !d.endsWith('.ts') && FLOORS[d] === undefined)
    assert.deepEqual(unplaced, [], `folders without a floor in FLOORS: ${unplaced.join(', ')}`)
  })

  it('has no import from a folder into one on its own floor or above', () => {
    const upward = graph.edges
      .filter((e) => {
        const from = FLOORS[e.from.split('/')[0] as string]
        const to = FLOORS[e.to.split('/')[0] as string]
        return from !== undefined && to !== undefined && e.from.split('/')[0] !== e.to.split('/')[0] && from <= to
      })
      .map((e) => {
        const [a, b] = [e.from.split('/')[0] as string, e.to.split('/')[0] as string]
        return `  ${e.from}:${e.line} (floor ${FLOORS[a]}) → ${e.to} (floor ${FLOORS[b]})  ${e.text}`
      })
    assert.equal(
      upward.length,
      0,
      `${upward.length} import${upward.length === 1 ? '' : 's'} not pointing down a floor:\n${upward.join('\n')}`,
    )
  })

  it('has no import from store/, compute/, records/ or activities/ into infra/', () => {
    const offending = graph.edges
      .filter((e) => NO_INFRA.some((dir) => e.from.startsWith(dir)) && e.to.startsWith('infra/'))
      .map((e) => `  ${e.from}:${e.line} → ${e.to}  ${e.text}`)
    assert.equal(
      offending.length,
      0,
      `${offending.length} import${offending.length === 1 ? '' : 's'} into infra/ from store/, compute/, records/ or activities/:\n${offending.join('\n')}`,
    )
  })
})
