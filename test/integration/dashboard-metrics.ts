// The metric names a Grafana dashboard's PromQL expressions read, and the names a /metrics page has samples of.
import { readFileSync } from 'node:fs'

const PROMQL_WORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
])

/** Metric names in one PromQL expression: identifiers that are not functions, keywords, labels or durations. */
export function promqlMetricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // label values
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // range selectors
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // label lists
  const names = new Set<string>()
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const word = m[0]
    const next = bare.slice((m.index ?? 0) + word.length).trimStart()
    if (next.startsWith('(') || PROMQL_WORDS.has(word.toLowerCase())) continue
    names.add(word)
  }
  return [...names]
}

/** Every metric name the dashboard's panel targets use (rows' nested panels included). */
export function dashboardMetricNames(path: string): string[] {
  const dashboard = JSON.parse(readFileSync(path, 'utf8'))
  const names = new Set<string>()
  const walk = (panels: Array<{ targets?: Array<{ expr?: string }>; panels?: unknown[] }> = []) => {
    for (const panel of panels) {
      for (const t of panel.targets ?? []) if (t.expr) for (const n of promqlMetricNames(t.expr)) names.add(n)
      walk(panel.panels as typeof panels)
    }
  }
  walk(dashboard.panels)
  return [...names].sort()
}

/** Names with at least one sample in a Prometheus text exposition (HELP/TYPE lines alone do not count). */
export function sampledMetricNames(exposition: string): Set<string> {
  const names = new Set<string>()
  for (const line of exposition.split('\n')) {
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{|\s)/.exec(line)
    if (m?.[1]) names.add(m[1])
  }
  return names
}
