// ALFWorld-like household tasks (docs/algorithm.md §10.2): ALFWorld's command grammar, feedback texts and reward over
// generated rooms. State is PDDL-like: where the agent is, what it holds, which containers are open, where each
// object is and whether it is hot, cool or clean, and which lamps are on.
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
import type { OracleAnalysis, Trajectory } from '../types.ts'
import { type Appliance, LAMPS, type LampName, OBJECTS, RECEPTACLES } from './catalogue.ts'
import { applianceReceptacles, generateHousehold, type HouseholdTask, isOpenable } from './world.ts'

export const HOUSEHOLD_MAX_STEPS = 30
export const WIN_REWARD = 10
export const NOTHING_HAPPENS = 'Nothing happens.'
const HELD = -2
const MIDDLE = -1

export interface HouseholdData {
  task: HouseholdTask
  receptacleIndex: Map<string, number>
  objectIndex: Map<string, number>
  intro: string
}

export interface HouseState {
  at: number
  holding: number
  open: boolean[]
  loc: Int16Array
  hot: Uint8Array
  cool: Uint8Array
  clean: Uint8Array
  lit: Uint8Array
}

/** ALFWorld's list phrasing: "a apple 1.", "a apple 1, and a mug 2.", "nothing." */
export function seeList(ids: string[]): string {
  if (ids.length === 0) return 'nothing.'
  if (ids.length === 1) return `a ${ids[0]}.`
  return `${ids
    .slice(0, -1)
    .map((i) => `a ${i}`)
    .join(', ')}, and a ${ids[ids.length - 1]}.`
}

const middleOfRoom = (d: HouseholdData | HouseholdTask): string => {
  const task = 'task' in d ? d.task : d
  return `You are in the middle of a room. Looking quickly around you, you see ${seeList(task.layout.receptacles.map((r) => r.id))}`
}

/** ALFWorld's examineObject feedback: the object's state words, or the default sentence. */
function examineObject(s: HouseState, o: number, id: string, lamp: boolean): string {
  if (lamp) return `This ${id} is ${s.lit[o] ? 'on' : 'off'}.`
  if (s.clean[o] && s.hot[o]) return `This is a hot and clean ${id}.`
  if (s.clean[o] && s.cool[o]) return `This is a cool and clean ${id}.`
  if (s.hot[o]) return `This is a hot ${id}.`
  if (s.clean[o]) return `This is a clean ${id}.`
  if (s.cool[o]) return `This is a cold ${id}.`
  return `There's nothing special about ${id}.`
}

function prepare(task: HouseholdTask): HouseholdData {
  const receptacleIndex = new Map(task.layout.receptacles.map((r, i) => [r.id, i]))
  const objectIndex = new Map(task.layout.objects.map((o, i) => [o.id, i]))
  const intro = `-= Welcome to TextWorld, ALFRED! =-\n\n${middleOfRoom(task)}\n\nYour task is to: ${task.text}`
  return { task, receptacleIndex, objectIndex, intro }
}

const accessible = (d: HouseholdData, s: HouseState, r: number): boolean =>
  !isOpenable(d.task.layout.receptacles[r] as HouseholdTask['layout']['receptacles'][number]) || (s.open[r] as boolean)

/** The per-object flags an appliance sets: hot for heat, cool for cool, clean for clean. */
const treatedFlags = (s: HouseState, appliance: Appliance) =>
  appliance === 'heat' ? s.hot : appliance === 'cool' ? s.cool : s.clean

function contentsIds(d: HouseholdData, s: HouseState, r: number): string[] {
  const ids: string[] = []
  for (let i = 0; i < s.loc.length; i++) if (s.loc[i] === r) ids.push((d.task.layout.objects[i] as { id: string }).id)
  return ids
}

/** What the agent sees at a receptacle: its contents, or that it is closed. */
function describe(d: HouseholdData, s: HouseState, r: number): string {
  const rec = d.task.layout.receptacles[r] as { id: string; type: keyof typeof RECEPTACLES }
  if (RECEPTACLES[rec.type].openable) {
    if (!s.open[r]) return `The ${rec.id} is closed.`
    return `The ${rec.id} is open. In it, you see ${seeList(contentsIds(d, s, r))}`
  }
  return `On the ${rec.id}, you see ${seeList(contentsIds(d, s, r))}`
}

function won(d: HouseholdData, s: HouseState): boolean {
  const { task } = d
  const objects = task.layout.objects
  if (task.family === 'look_at_obj_in_light') {
    if (s.holding < 0 || objects[s.holding]?.type !== task.object) return false
    for (let i = 0; i < objects.length; i++) {
      if (objects[i]?.type === task.target && s.loc[i] === s.at && s.lit[i]) return true
    }
    return false
  }
  const flag = task.appliance ? s[task.appliance === 'heat' ? 'hot' : task.appliance] : null
  let n = 0
  for (let i = 0; i < objects.length; i++) {
    if (objects[i]?.type !== task.object) continue
    const at = s.loc[i] as number
    if (at < 0 || task.layout.receptacles[at]?.type !== task.target) continue
    if (flag && !flag[i]) continue
    n++
  }
  return n >= (task.family === 'pick_two_obj_and_place' ? 2 : 1)
}

const APPLIANCE_VERB: Record<Appliance, string> = { heat: 'heat', cool: 'cool', clean: 'clean' }

function act(d: HouseholdData, s: HouseState, command: string): string {
  const { receptacleIndex: R, objectIndex: O } = d
  const objects = d.task.layout.objects
  const receptacles = d.task.layout.receptacles
  const go = /^go to (.+)$/.exec(command)
  if (go) {
    const r = R.get(go[1] as string)
    if (r === undefined || r === s.at) return NOTHING_HAPPENS
    s.at = r
    return `You arrive at ${go[1]}. ${describe(d, s, r)}`
  }
  const door = /^(open|close) (.+)$/.exec(command)
  if (door) {
    const r = R.get(door[2] as string)
    if (r === undefined || r !== s.at || !isOpenable(receptacles[r] as (typeof receptacles)[number]))
      return NOTHING_HAPPENS
    const opening = door[1] === 'open'
    if (s.open[r] === opening) return NOTHING_HAPPENS
    s.open[r] = opening
    return opening ? `You open the ${door[2]}. ${describe(d, s, r)}` : `You close the ${door[2]}.`
  }
  const take = /^take (.+) from (.+)$/.exec(command)
  if (take) {
    const o = O.get(take[1] as string)
    const r = R.get(take[2] as string)
    if (o === undefined || r === undefined || r !== s.at || s.holding >= 0) return NOTHING_HAPPENS
    if (s.loc[o] !== r || !accessible(d, s, r) || objects[o]?.lamp) return NOTHING_HAPPENS
    s.loc[o] = HELD
    s.holding = o
    return `You pick up the ${take[1]} from the ${take[2]}.`
  }
  const put = /^move (.+) to (.+)$/.exec(command)
  if (put) {
    const o = O.get(put[1] as string)
    const r = R.get(put[2] as string)
    if (o === undefined || r === undefined || r !== s.at || s.holding !== o || !accessible(d, s, r))
      return NOTHING_HAPPENS
    s.loc[o] = r
    s.holding = -1
    return `You move the ${put[1]} to the ${put[2]}.`
  }
  const treat = /^(heat|cool|clean) (.+) with (.+)$/.exec(command)
  if (treat) {
    const verb = treat[1] as Appliance
    const o = O.get(treat[2] as string)
    const r = R.get(treat[3] as string)
    if (o === undefined || r === undefined || r !== s.at || s.holding !== o) return NOTHING_HAPPENS
    if (!applianceReceptacles(verb).includes((receptacles[r] as (typeof receptacles)[number]).type))
      return NOTHING_HAPPENS
    treatedFlags(s, verb)[o] = 1
    if (verb === 'heat') s.cool[o] = 0
    if (verb === 'cool') s.hot[o] = 0
    return `You ${APPLIANCE_VERB[verb]} the ${treat[2]} using the ${treat[3]}.`
  }
  const use = /^use (.+)$/.exec(command)
  if (use) {
    const o = O.get(use[1] as string)
    if (o === undefined || !objects[o]?.lamp || s.loc[o] !== s.at) return NOTHING_HAPPENS
    // ALFWorld's toggle: "use" switches the lamp; the look task is won while it is on.
    s.lit[o] = s.lit[o] ? 0 : 1
    return s.lit[o] ? `You turn on the ${use[1]}.` : `You turn off the ${use[1]}.`
  }
  const exam = /^examine (.+)$/.exec(command)
  if (exam) {
    const r = R.get(exam[1] as string)
    if (r !== undefined) return r === s.at ? describe(d, s, r) : NOTHING_HAPPENS
    const o = O.get(exam[1] as string)
    if (o === undefined) return NOTHING_HAPPENS
    const visible = s.loc[o] === HELD || (s.at >= 0 && s.loc[o] === s.at && accessible(d, s, s.at))
    return visible ? examineObject(s, o, exam[1] as string, objects[o]?.lamp === true) : NOTHING_HAPPENS
  }
  if (command === 'inventory') {
    return s.holding >= 0 ? `You are carrying: a ${objects[s.holding]?.id}.` : 'You are not carrying anything.'
  }
  if (command === 'look') {
    if (s.at === MIDDLE) return middleOfRoom(d)
    return `You are facing the ${receptacles[s.at]?.id}. Next to it, you see nothing.`
  }
  return NOTHING_HAPPENS
}

function transition(d: HouseholdData, s: HouseState, action: string): Transition {
  const observation = act(d, s, action)
  const w = won(d, s)
  return { observation, reward: w ? WIN_REWARD : 0, done: w, won: w }
}

export function admissibleCommands(d: HouseholdData, s: HouseState): string[] {
  const { receptacles, objects } = d.task.layout
  const out: string[] = []
  for (let r = 0; r < receptacles.length; r++)
    if (r !== s.at) out.push(`go to ${(receptacles[r] as { id: string }).id}`)
  const held = s.holding >= 0 ? (objects[s.holding] as { id: string }).id : null
  if (s.at >= 0) {
    const rec = receptacles[s.at] as (typeof receptacles)[number]
    if (isOpenable(rec)) out.push(`${s.open[s.at] ? 'close' : 'open'} ${rec.id}`)
    if (accessible(d, s, s.at)) {
      for (let i = 0; i < objects.length; i++) {
        if (s.loc[i] !== s.at) continue
        const o = objects[i] as (typeof objects)[number]
        if (o.lamp) out.push(`use ${o.id}`)
        else if (!held) out.push(`take ${o.id} from ${rec.id}`)
      }
      if (held) out.push(`move ${held} to ${rec.id}`)
    }
    if (held) {
      for (const verb of ['heat', 'cool', 'clean'] as const) {
        if (applianceReceptacles(verb).includes(rec.type)) out.push(`${verb} ${held} with ${rec.id}`)
      }
    }
    out.push(`examine ${rec.id}`)
  }
  if (held) out.push(`examine ${held}`)
  out.push('inventory', 'look')
  return out
}

/**
 * The household expert, in two modes. `search` (the environment's expert: demonstrations and diagnostics) acts
 * only on what the agent has seen, so a policy can imitate it from its prompt: it visits the receptacles where the
 * wanted thing can be (its catalogue places) in the room's order, starting after the one it stands at, opens closed
 * ones, takes the object when it is in view, treats it with the first fitting appliance and delivers it to the
 * first receptacle of the target type (for look tasks it searches the lamp the same way). Each choice depends on
 * the task, the current location and its contents, what is held and the last action, all of which the compact
 * prompt shows. `know` plans with the whole state (it goes straight to the object and the lamp): the proof that
 * every generated task is solvable within the step limit, which the searcher misses on about 1% of tasks.
 */
export function householdPlan(d: HouseholdData, s: HouseState, mode: 'search' | 'know'): string {
  const { task } = d
  const { receptacles, objects } = task.layout
  const idOf = (r: number) => (receptacles[r] as { id: string }).id
  const goTo = (r: number) => `go to ${idOf(r)}`
  const ofTypes = (types: readonly string[]) => receptacles.flatMap((r, i) => (types.includes(r.type) ? [i] : []))
  const reach = (r: number, then: string): string => {
    if (s.at !== r) return goTo(r)
    if (!accessible(d, s, r)) return `open ${idOf(r)}`
    return then
  }
  // The next place to look: the first candidate after the current receptacle in the room's order, wrapping
  // (after random actions moved the object off its places, the searcher may stand at its only candidate).
  const search = (candidates: number[]): string => {
    const next = candidates.find((r) => r > s.at) ?? candidates.find((r) => r !== s.at)
    return next === undefined ? 'look' : goTo(next)
  }
  const inView = (type: string) =>
    s.at >= 0 && accessible(d, s, s.at) ? objects.findIndex((o, i) => o.type === type && s.loc[i] === s.at) : -1
  const held = s.holding >= 0 ? (objects[s.holding] as (typeof objects)[number]) : null
  if (held && held.type !== task.object)
    return reach(Math.max(s.at, 0), `move ${held.id} to ${receptacles[Math.max(s.at, 0)]?.id}`)
  const delivering = task.family !== 'look_at_obj_in_light'
  if (!delivering && held) {
    if (mode === 'know') {
      const lamp = objects.findIndex((o) => o.type === task.target)
      return reach(s.loc[lamp] as number, `use ${objects[lamp]?.id}`)
    }
    const lamp = inView(task.target)
    return lamp >= 0 ? `use ${objects[lamp]?.id}` : search(ofTypes(LAMPS[task.target as LampName]))
  }
  if (held) {
    if (task.appliance) {
      if (!treatedFlags(s, task.appliance)[s.holding]) {
        const r = ofTypes(applianceReceptacles(task.appliance))[0] as number
        return s.at === r ? `${task.appliance} ${held.id} with ${idOf(r)}` : goTo(r)
      }
    }
    const r = ofTypes([task.target])[0] as number
    return reach(r, `move ${held.id} to ${idOf(r)}`)
  }
  // Not holding: fetch an instance that is not delivered yet.
  const fetchable = (r: number) => !delivering || receptacles[r]?.type !== task.target
  if (mode === 'know') {
    let best = -1
    for (let i = 0; i < objects.length; i++) {
      const at = s.loc[i] as number
      if (objects[i]?.type !== task.object || at < 0 || !fetchable(at)) continue
      if (best < 0 || (at === s.at && s.loc[best] !== s.at)) best = i
    }
    if (best < 0) return 'look'
    const at = s.loc[best] as number
    return reach(at, `take ${objects[best]?.id} from ${idOf(at)}`)
  }
  const places = ofTypes(OBJECTS[task.object].places).filter(fetchable)
  if (places.includes(s.at)) {
    if (!accessible(d, s, s.at)) return `open ${idOf(s.at)}`
    const o = inView(task.object)
    if (o >= 0) return `take ${objects[o]?.id} from ${idOf(s.at)}`
  }
  return search(places)
}

/**
 * The searching expert's sub-goal, which its demonstrations think before acting (`<think>find apple</think>`):
 * `find <object>` until it holds one, then `heat|cool|clean <object>` while it needs treating, `find <lamp>` or
 * `put <object> in <target>`; `drop <object>` when it holds the wrong thing. It names the object the acting
 * decision must match against what is in view, right before the action.
 */
export function householdThought(d: HouseholdData, s: HouseState): string {
  const { task } = d
  const held = s.holding >= 0 ? task.layout.objects[s.holding] : undefined
  if (!held) return `find ${task.object}`
  if (held.type !== task.object) return `drop ${held.type}`
  if (task.family === 'look_at_obj_in_light') return `find ${task.target}`
  if (task.appliance && !treatedFlags(s, task.appliance)[s.holding]) return `${task.appliance} ${held.type}`
  return `put ${held.type} in ${task.target}`
}

function render(view: Parameters<EnvSpec<HouseholdData, HouseState>['render']>[0]): string {
  const { history, stepCount, observation, taskText, admissible } = view
  if (view.compact) {
    // The tiny model's prompt: the task once, the last action only (the searcher needs no more), the room's
    // receptacles only in the admissible list, and the observation last, next to the answer.
    const last = history.at(-1)
    const now = stepCount === 0 ? 'You are in the middle of a room.' : observation
    return [
      `Household. Your task is to: ${taskText}`,
      ...(last ? [`Last action: ${last.action}`] : []),
      `Actions: ${(admissible ?? []).join(', ')}`,
      `Now: ${now}`,
      `Now it's your turn. ${THINK_ACTION_INSTRUCTION_COMPACT}`,
    ].join('\n')
  }
  const actions = (admissible ?? []).map((a) => `'${a}'`).join(', ')
  const head =
    stepCount === 0 || history.length === 0
      ? `You are an expert agent operating in the ALFRED Embodied Environment.\nYour current observation is: ${observation}`
      : `You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: ${taskText}\n` +
        `Prior to this step, you have already taken ${stepCount} step(s). Below are the most recent ${history.length} ` +
        `observations and the corresponding actions you took: ${renderHistory(history, stepCount)}\n` +
        `You are now at step ${stepCount + 1} and your current observation is: ${observation}`
  return [
    head,
    `Your admissible actions of the current situation are: [${actions}].`,
    '',
    "Now it's your turn to take an action.",
    THINK_ACTION_INSTRUCTION,
  ].join('\n')
}

const KEY_ACTION = /^(take|move|heat|cool|clean|use|open) /

function oracle(t: Trajectory): OracleAnalysis {
  const text = `${t.taskText}\n${t.steps.map((s) => `${s.observation}\n${s.response}`).join('\n')}`
  const visible = (e: string) => text.includes(e)
  const actions = t.steps.filter((s) => s.valid).map((s) => s.action as string)
  const nothing = t.steps.filter((s, k) => s.valid && t.steps[k + 1]?.observation === NOTHING_HAPPENS)
  const invalid = t.steps.filter((s) => !s.valid).length
  const idsIn = (a: string) => [...a.matchAll(/([a-z]+ \d+)/g)].map((m) => m[1] as string)
  if (t.info.won) {
    const key = actions.filter((a) => KEY_ACTION.test(a) && !a.startsWith('open '))
    const entities = [...new Set(key.flatMap(idsIn))].filter(visible)
    const found = key.find((a) => a.startsWith('take '))
    const where = found ? ` The object was found by going to ${idsIn(found)[1] ?? 'its place'}.` : ''
    return {
      output: {
        episode_summary: `Completed "${t.taskText}" in ${t.steps.length} steps.${where}`,
        episode_skill: `Workflow for "${t.taskText}": go to where the object is, open closed containers, then ${key.join(', then ')}.`,
      },
      entities,
    }
  }
  const took = actions.find((a) => a.startsWith('take '))
  let rule: string
  let entities: string[] = []
  if (invalid > t.steps.length / 2) {
    rule = `Avoid malformed replies: ${invalid} of ${t.steps.length} responses lacked <think>…</think><action>…</action>; always give one admissible action.`
  } else if (nothing.length > 0 && nothing.length >= t.steps.length / 3) {
    const example = nothing[0]?.action as string
    entities = idsIn(example).filter(visible)
    rule = `Avoid commands outside the admissible list: "${example}" and ${nothing.length - 1} others gave "Nothing happens."; copy an action from the list exactly.`
  } else if (!took) {
    const visited = [...new Set(actions.filter((a) => a.startsWith('go to ')).map((a) => a.slice(6)))].filter(visible)
    entities = visited.slice(0, 4)
    rule =
      `Avoid searching at random: the target object was never picked up${visited.length ? ` after visiting ${visited.slice(0, 4).join(', ')}` : ''}. ` +
      'Visit each likely receptacle once, open closed ones, and take the object as soon as it is seen.'
  } else {
    entities = idsIn(took).filter(visible)
    rule = `Avoid stalling after "${took}": finish the task steps in order (treat the object with the right appliance if the task says hot, cool or clean, then go to the destination and move it there) before the step limit.`
  }
  return {
    output: { episode_summary: `Failed "${t.taskText}" after ${t.steps.length} steps.`, episode_skill: rule },
    entities,
  }
}

export const HOUSEHOLD_SPEC: EnvSpec<HouseholdData, HouseState> = {
  name: 'household',
  maxSteps: HOUSEHOLD_MAX_STEPS,
  historyLength: 5,
  generate: (ref) => prepare(generateHousehold(ref)),
  taskText: (d) => d.task.text,
  family: (d) => d.task.family,
  initial(d) {
    const n = d.task.layout.objects.length
    const state: HouseState = {
      at: MIDDLE,
      holding: -1,
      open: d.task.layout.receptacles.map(() => false),
      loc: Int16Array.from(d.task.layout.objects.map((o) => o.at)),
      hot: new Uint8Array(n),
      cool: new Uint8Array(n),
      clean: new Uint8Array(n),
      lit: new Uint8Array(n),
    }
    return { state, observation: d.intro }
  },
  transition,
  // verl-agent passes the tail of unusable output to ALFWorld, which answers "Nothing happens.".
  invalid: () => ({ observation: NOTHING_HAPPENS, reward: 0, done: false, won: false }),
  admissible: admissibleCommands,
  parse: (response) => parseThinkAction(response),
  formatResponse: formatThinkAction,
  render,
  expert: (d, s) => householdPlan(d, s, 'search'),
  expertThought: householdThought,
  oracle,
}

export const household = defineEnv(HOUSEHOLD_SPEC)
