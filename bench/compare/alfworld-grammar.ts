// Checks household's commands and feedback texts against ALFWorld's own grammar file (alfred.twl2 from the
// `alfworld` package's data files). Not part of CI: needs the file, e.g.
//   pip download --no-deps alfworld && unzip -j alfworld-*.whl alfworld/data/alfred.twl2 -d /tmp/alf
//   node --import tsx bench/compare/alfworld-grammar.ts /tmp/alf/alfred.twl2 [tasks]
import { readFileSync } from 'node:fs'
import { household, NOTHING_HAPPENS } from '../../envs/household/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { SPLITS } from '../../envs/types.ts'

const file = process.argv[2]
if (!file) {
  console.error('usage: alfworld-grammar.ts <path to alfred.twl2> [tasks per split]')
  process.exit(2)
}
const TASKS = Number(process.argv[3] ?? 100)
const text = readFileSync(file, 'utf8')

// Every grammar symbol with its right-hand sides (top-level and per-action grammar blocks alike).
const symbols = new Map<string, string[]>()
for (const m of text.matchAll(/"([A-Za-z_.-]+)": \[((?:.|\n)*?)\n\s*\]/g)) {
  const rhs = [...(m[2] as string).matchAll(/"rhs": "((?:[^"\\]|\\.)*)"/g)].map(
    (r) => JSON.parse(`"${r[1]}"`) as string,
  )
  symbols.set(m[1] as string, [...(symbols.get(m[1] as string) ?? []), ...rhs])
}
const templates = [...text.matchAll(/template :: "([^"]+)";/g)].map((m) => m[1] as string)

const NAME = '[a-z]+ \\d+'
const LIST = `(?:nothing|an? ${NAME}(?:, an? ${NAME})*(?:, and an? ${NAME})?)`
const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Turns one right-hand side into a regex source: #symbols# expand, {names} and [lists] become patterns. */
function rhsToRegex(rhs: string, depth = 0): string {
  let out = ''
  for (let i = 0; i < rhs.length; ) {
    const c = rhs[i] as string
    if (c === '#') {
      const j = rhs.indexOf('#', i + 1)
      const name = rhs.slice(i + 1, j)
      const alts = depth < 4 ? (symbols.get(name) ?? []).map((r) => rhsToRegex(r, depth + 1)) : ['.*']
      out += `(?:${alts.join('|') || '.*'})`
      i = j + 1
    } else if (c === '[') {
      const j = rhs.indexOf(']', i)
      out += /indefinite|#overview/.test(rhs.slice(i, j)) ? LIST : `${NAME}(?:, ${NAME})*`
      i = j + 1
    } else if (c === '{') {
      const j = rhs.indexOf('}', i)
      out += rhs.slice(i, j).includes('indefinite') ? 'an?' : NAME
      i = j + 1
    } else {
      out += escapeRegex(c)
      i++
    }
  }
  return out
}

const FEEDBACK = [
  'intro',
  'GotoLocation.feedback',
  'OpenObject.feedback',
  'CloseObject.feedback',
  'PickupObject.feedback',
  'PutObject.feedback',
  'inventory.feedback',
  'examineReceptacle.feedback',
  'examineObject.feedback',
  'toggleObject.feedback',
  'heatObject.feedback',
  'cleanObject.feedback',
  'coolObject.feedback',
  'look.feedback',
]
const feedback = FEEDBACK.flatMap((k) =>
  (symbols.get(k) ?? []).map((r) => ({ key: k, re: new RegExp(`^${rhsToRegex(r)}$`, 's') })),
)
const missing = FEEDBACK.filter((k) => !symbols.has(k))
const commandRes = templates.map(
  (t) =>
    new RegExp(
      `^${escapeRegex(t)
        .replace(/\\\[\\\{[^\]]*\\\]/g, NAME)
        .replace(/\\\{[a-z]+\\\}/g, NAME)}$`,
    ),
)

let observations = 0
let commands = 0
const badObs = new Map<string, number>()
const badCmd = new Map<string, number>()
const used = new Set<string>()
const rng = mulberry32(3)
for (const split of SPLITS) {
  for (let seed = 0; seed < TASKS; seed++) {
    for (const policy of ['expert', 'random'] as const) {
      const ep = household.reset(household.task(split, seed))
      const check = (obs: string) => {
        if (obs === NOTHING_HAPPENS) return
        observations++
        // The intro carries a concrete task line where the grammar has a placeholder.
        const probe = obs.replace(/\n\nYour task is to: .*$/s, '\n\nYour task is to: UNKNOWN GOAL.')
        const hit = feedback.find((f) => f.re.test(probe))
        if (hit) used.add(hit.key)
        else badObs.set(obs.slice(0, 120), (badObs.get(obs.slice(0, 120)) ?? 0) + 1)
      }
      check(ep.observation)
      while (!ep.done) {
        for (const cmd of ep.admissible() ?? []) {
          commands++
          if (!commandRes.some((re) => re.test(cmd))) badCmd.set(cmd, (badCmd.get(cmd) ?? 0) + 1)
        }
        const action = policy === 'expert' ? ep.expertAction() : ep.randomAction(rng)
        check(ep.step(household.formatResponse(action)).observation)
      }
    }
  }
}
console.log(
  `alfred.twl2: ${symbols.size} grammar symbols, ${templates.length} command templates; missing symbols: ${missing.join(', ') || 'none'}`,
)
console.log(
  `observations checked: ${observations}, not matching any ALFWorld feedback: ${[...badObs.values()].reduce((a, b) => a + b, 0)}`,
)
console.log(
  `admissible commands checked: ${commands}, not matching any ALFWorld template: ${[...badCmd.values()].reduce((a, b) => a + b, 0)}`,
)
console.log(`feedback kinds seen: ${[...used].sort().join(', ')}`)
for (const [o, n] of [...badObs].slice(0, 10)) console.log(`  obs ×${n}: ${JSON.stringify(o)}`)
for (const [c, n] of [...badCmd].slice(0, 10)) console.log(`  cmd ×${n}: ${c}`)
process.exit(badObs.size + badCmd.size + missing.length > 0 ? 1 : 0)
