// Scene layouts and tasks. Seen splits (train, validation, test-seen) share one pool of layouts; test-unseen draws
// from a second pool whose layout signatures and goal combinations are partitioned away from the first by hash,
// so no unseen layout or (family, object, receptacle) combination ever occurs in train.
import { hashString, mixSeed, mulberry32, pick, type Rng, randInt } from '../rng.ts'
import type { Split, TaskRef } from '../types.ts'
import {
  type Appliance,
  FAMILIES,
  FAMILY_APPLIANCE,
  FAMILY_SCENES,
  type Family,
  LAMPS,
  type LampName,
  OBJECTS,
  type ObjectName,
  RECEPTACLES,
  type ReceptacleName,
  SCENE_TYPES,
  SCENES,
  type SceneType,
} from './catalogue.ts'

/** Layouts per scene type in each pool. */
export const LAYOUTS_PER_SCENE = 100
const UNSEEN_LAYOUT_MODULUS = 4
const UNSEEN_COMBO_MODULUS = 5

export interface Receptacle {
  type: ReceptacleName
  id: string
}

export interface Thing {
  type: ObjectName | LampName
  id: string
  /** Index of the receptacle it starts in. */
  at: number
  lamp: boolean
}

export interface Layout {
  scene: SceneType
  receptacles: Receptacle[]
  objects: Thing[]
}

export interface HouseholdTask {
  family: Family
  layout: Layout
  object: ObjectName
  /** The receptacle type to put it in, or the lamp type for look tasks. */
  target: ReceptacleName | LampName
  appliance?: Appliance
  text: string
}

const APPLIANCE_RECEPTACLES: Record<Appliance, readonly ReceptacleName[]> = {
  heat: ['microwave'],
  cool: ['fridge'],
  clean: ['sinkbasin', 'bathtubbasin'],
}

export function applianceReceptacles(a: Appliance): readonly ReceptacleName[] {
  return APPLIANCE_RECEPTACLES[a]
}

const unseenLayout = (l: Layout): boolean => hashString(layoutSignature(l)) % UNSEEN_LAYOUT_MODULUS === 0
export const unseenCombo = (family: Family, object: string, target: string): boolean =>
  hashString(`${family}|${object}|${target}`) % UNSEEN_COMBO_MODULUS === 0

/** The receptacle counts and object kinds of a layout: two layouts with the same signature count as the same scene. */
export function layoutSignature(l: Layout): string {
  const count = (items: { type: string }[]) => {
    const m = new Map<string, number>()
    for (const i of items) m.set(i.type, (m.get(i.type) ?? 0) + 1)
    return [...m.entries()]
      .sort()
      .map(([k, v]) => `${k}${v}`)
      .join(',')
  }
  return `${l.scene}:${count(l.receptacles)}:${count(l.objects)}`
}

function drawLayout(scene: SceneType, rng: Rng): Layout {
  const receptacles: Receptacle[] = []
  for (const [type, min, max] of SCENES[scene]) {
    const n = randInt(rng, min, max + 1)
    for (let k = 1; k <= n; k++) receptacles.push({ type, id: `${type} ${k}` })
  }
  receptacles.sort((a, b) =>
    a.type < b.type ? -1 : a.type > b.type ? 1 : a.id.length - b.id.length || (a.id < b.id ? -1 : 1),
  )
  const present = new Set(receptacles.map((r) => r.type))
  const indexOfType = (types: readonly ReceptacleName[]) =>
    receptacles.flatMap((r, i) => (types.includes(r.type) ? [i] : []))
  const objects: Thing[] = []
  if (scene === 'livingroom' || scene === 'bedroom') {
    const lamps: LampName[] =
      scene === 'bedroom' ? ['desklamp'] : rng.next() < 0.5 ? ['floorlamp'] : ['desklamp', 'floorlamp']
    for (const lamp of lamps) {
      const spots = indexOfType(LAMPS[lamp])
      if (spots.length > 0) objects.push({ type: lamp, id: `${lamp} 1`, at: pick(rng, spots), lamp: true })
    }
  }
  const kinds = (Object.keys(OBJECTS) as ObjectName[]).filter(
    (o) => (OBJECTS[o].scenes as readonly SceneType[]).includes(scene) && OBJECTS[o].places.some((p) => present.has(p)),
  )
  const chosen = new Set<ObjectName>()
  const want = Math.min(kinds.length, randInt(rng, 6, 13))
  while (chosen.size < want) chosen.add(pick(rng, kinds))
  for (const o of [...chosen].sort()) {
    const u = rng.next()
    const n = u < 0.55 ? 1 : u < 0.85 ? 2 : 3
    const spots = indexOfType(OBJECTS[o].places)
    for (let k = 1; k <= n; k++) objects.push({ type: o, id: `${o} ${k}`, at: pick(rng, spots), lamp: false })
  }
  return { scene, receptacles, objects }
}

const layoutCache = new Map<string, Layout>()

/** Layout `id` of a scene type in the seen or unseen pool; pure (cached). */
export function getLayout(scene: SceneType, id: number, unseen: boolean): Layout {
  const key = `${scene}/${id}/${unseen}`
  const cached = layoutCache.get(key)
  if (cached) return cached
  const rng = mulberry32(mixSeed(hashString('household-layout'), SCENE_TYPES.indexOf(scene), id, unseen ? 1 : 0))
  let layout = drawLayout(scene, rng)
  while (unseenLayout(layout) !== unseen) layout = drawLayout(scene, rng)
  layoutCache.set(key, layout)
  return layout
}

interface Goal {
  object: ObjectName
  target: ReceptacleName | LampName
}

function goalsFor(family: Family, layout: Layout, unseen: boolean): Goal[] {
  const presentR = new Set(layout.receptacles.map((r) => r.type))
  const counts = new Map<string, number>()
  for (const o of layout.objects) counts.set(o.type, (counts.get(o.type) ?? 0) + 1)
  const appliance = FAMILY_APPLIANCE[family]
  const goals: Goal[] = []
  for (const [type, n] of counts) {
    if (!Object.hasOwn(OBJECTS, type)) continue
    const object = type as ObjectName
    const spec = OBJECTS[object]
    if (family === 'pick_two_obj_and_place' && n < 2) continue
    if (appliance) {
      if (!(spec.can as readonly Appliance[]).includes(appliance)) continue
      if (!APPLIANCE_RECEPTACLES[appliance].some((r) => presentR.has(r))) continue
    }
    if (family === 'look_at_obj_in_light') {
      if (!('lookable' in spec && spec.lookable)) continue
      for (const lamp of layout.objects.filter((o) => o.lamp)) {
        if (unseenCombo(family, object, lamp.type) === unseen) goals.push({ object, target: lamp.type as LampName })
      }
      continue
    }
    for (const target of new Set(spec.places)) {
      if (!presentR.has(target)) continue
      if (appliance && APPLIANCE_RECEPTACLES[appliance].includes(target)) continue
      // Every instance must have somewhere else to start, so the goal never holds at reset.
      if (!spec.places.some((p) => p !== target && presentR.has(p))) continue
      if (unseenCombo(family, object, target) === unseen) goals.push({ object, target })
    }
  }
  return goals
}

const TEMPLATES: Record<Family, readonly ((o: string, r: string) => string)[]> = {
  pick_and_place: [(o, r) => `put a ${o} in ${r}.`, (o, r) => `put some ${o} on ${r}.`],
  look_at_obj_in_light: [(o, r) => `look at ${o} under the ${r}.`, (o, r) => `examine the ${o} with the ${r}.`],
  pick_clean_then_place_in_recep: [
    (o, r) => `put a clean ${o} in ${r}.`,
    (o, r) => `clean some ${o} and put it in ${r}.`,
  ],
  pick_heat_then_place_in_recep: [(o, r) => `put a hot ${o} in ${r}.`, (o, r) => `heat some ${o} and put it in ${r}.`],
  pick_cool_then_place_in_recep: [(o, r) => `put a cool ${o} in ${r}.`, (o, r) => `cool some ${o} and put it in ${r}.`],
  pick_two_obj_and_place: [(o, r) => `put two ${o} in ${r}.`, (o, r) => `find two ${o} and put them in ${r}.`],
}

const SPLIT_STREAM: Record<Split, number> = { train: 0, validation: 1, 'test-seen': 2, 'test-unseen': 3 }

export function generateHousehold(ref: TaskRef): HouseholdTask {
  const rng = mulberry32(mixSeed(hashString('household'), SPLIT_STREAM[ref.split], ref.seed))
  const unseen = ref.split === 'test-unseen'
  const family = FAMILIES[ref.seed % FAMILIES.length] as Family
  for (;;) {
    const scene = pick(rng, FAMILY_SCENES[family])
    const layout = getLayout(scene, randInt(rng, 0, LAYOUTS_PER_SCENE), unseen)
    const goals = goalsFor(family, layout, unseen)
    if (goals.length === 0) continue
    const goal = pick(rng, goals)
    const objects = layout.objects.map((o) => ({ ...o }))
    if (family !== 'look_at_obj_in_light') {
      const others = layout.receptacles.flatMap((r, i) =>
        r.type !== goal.target && (OBJECTS[goal.object].places as readonly string[]).includes(r.type) ? [i] : [],
      )
      for (const o of objects) {
        if (o.type === goal.object && layout.receptacles[o.at]?.type === goal.target) o.at = pick(rng, others)
      }
    }
    const task: HouseholdTask = {
      family,
      layout: { scene, receptacles: layout.receptacles, objects },
      object: goal.object,
      target: goal.target,
      text: pick(rng, TEMPLATES[family])(goal.object, goal.target),
    }
    const appliance = FAMILY_APPLIANCE[family]
    if (appliance) task.appliance = appliance
    return task
  }
}

export function isOpenable(r: Receptacle): boolean {
  return RECEPTACLES[r.type].openable
}
