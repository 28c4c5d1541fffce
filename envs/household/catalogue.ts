// The household catalogue: receptacle and object types, the scene types they occur in, and which task families
// each supports. Type names follow ALFWorld's lowercase names (countertop, sinkbasin, desklamp, …).

export const SCENE_TYPES = ['kitchen', 'livingroom', 'bedroom', 'bathroom'] as const
export type SceneType = (typeof SCENE_TYPES)[number]

export const FAMILIES = [
  'pick_and_place',
  'look_at_obj_in_light',
  'pick_clean_then_place_in_recep',
  'pick_heat_then_place_in_recep',
  'pick_cool_then_place_in_recep',
  'pick_two_obj_and_place',
] as const
export type Family = (typeof FAMILIES)[number]

export type Appliance = 'heat' | 'cool' | 'clean'

export interface ReceptacleType {
  openable: boolean
  appliance?: Appliance
}

export const RECEPTACLES = {
  cabinet: { openable: true },
  drawer: { openable: true },
  fridge: { openable: true, appliance: 'cool' },
  microwave: { openable: true, appliance: 'heat' },
  safe: { openable: true },
  countertop: { openable: false },
  diningtable: { openable: false },
  sinkbasin: { openable: false, appliance: 'clean' },
  bathtubbasin: { openable: false, appliance: 'clean' },
  stoveburner: { openable: false },
  coffeemachine: { openable: false },
  toaster: { openable: false },
  garbagecan: { openable: false },
  shelf: { openable: false },
  sofa: { openable: false },
  armchair: { openable: false },
  coffeetable: { openable: false },
  sidetable: { openable: false },
  tvstand: { openable: false },
  dresser: { openable: false },
  desk: { openable: false },
  bed: { openable: false },
  laundryhamper: { openable: false },
  ottoman: { openable: false },
  toilet: { openable: false },
  towelholder: { openable: false },
  handtowelholder: { openable: false },
  toiletpaperhanger: { openable: false },
} as const satisfies Record<string, ReceptacleType>
export type ReceptacleName = keyof typeof RECEPTACLES

/** Receptacles of a scene: [type, min count, max count]; min 0 means optional. */
export const SCENES: Record<SceneType, readonly (readonly [ReceptacleName, number, number])[]> = {
  kitchen: [
    ['cabinet', 2, 8],
    ['drawer', 1, 5],
    ['countertop', 1, 3],
    ['fridge', 1, 1],
    ['microwave', 1, 1],
    ['sinkbasin', 1, 1],
    ['stoveburner', 2, 4],
    ['garbagecan', 1, 1],
    ['coffeemachine', 0, 1],
    ['toaster', 0, 1],
    ['diningtable', 0, 1],
    ['shelf', 0, 3],
  ],
  livingroom: [
    ['sofa', 1, 1],
    ['coffeetable', 1, 2],
    ['sidetable', 1, 3],
    ['garbagecan', 1, 1],
    ['armchair', 0, 2],
    ['tvstand', 0, 1],
    ['drawer', 0, 4],
    ['cabinet', 0, 4],
    ['shelf', 0, 4],
    ['dresser', 0, 1],
    ['ottoman', 0, 1],
  ],
  bedroom: [
    ['bed', 1, 1],
    ['desk', 1, 2],
    ['drawer', 1, 6],
    ['dresser', 1, 1],
    ['garbagecan', 1, 1],
    ['sidetable', 0, 2],
    ['shelf', 0, 5],
    ['safe', 0, 1],
    ['laundryhamper', 0, 1],
    ['armchair', 0, 1],
  ],
  bathroom: [
    ['countertop', 1, 1],
    ['sinkbasin', 1, 2],
    ['toilet', 1, 1],
    ['garbagecan', 1, 1],
    ['cabinet', 1, 4],
    ['bathtubbasin', 0, 1],
    ['towelholder', 0, 1],
    ['handtowelholder', 0, 1],
    ['toiletpaperhanger', 0, 1],
    ['drawer', 0, 4],
    ['shelf', 0, 2],
  ],
}

export interface ObjectType {
  scenes: readonly SceneType[]
  /** Receptacle types where it is found and where a goal may ask to put it. */
  places: readonly ReceptacleName[]
  /** Appliance steps that make sense for it. */
  can: readonly Appliance[]
  /** Whether "look at it under a lamp" tasks may use it. */
  lookable?: boolean
}

const FOOD: readonly ReceptacleName[] = [
  'countertop',
  'diningtable',
  'fridge',
  'cabinet',
  'shelf',
  'garbagecan',
  'microwave',
]
const DISH: readonly ReceptacleName[] = [
  'countertop',
  'diningtable',
  'cabinet',
  'shelf',
  'sinkbasin',
  'fridge',
  'microwave',
]
const UTENSIL: readonly ReceptacleName[] = ['countertop', 'diningtable', 'drawer', 'sinkbasin', 'cabinet']
const SMALL: readonly ReceptacleName[] = [
  'sidetable',
  'coffeetable',
  'desk',
  'dresser',
  'drawer',
  'shelf',
  'bed',
  'sofa',
  'armchair',
  'safe',
  'tvstand',
  'ottoman',
  'cabinet',
  'garbagecan',
]
const BATH: readonly ReceptacleName[] = [
  'countertop',
  'cabinet',
  'drawer',
  'shelf',
  'toilet',
  'garbagecan',
  'bathtubbasin',
  'sinkbasin',
]

export const OBJECTS = {
  apple: { scenes: ['kitchen'], places: FOOD, can: ['heat', 'cool', 'clean'] },
  bread: { scenes: ['kitchen'], places: FOOD, can: ['heat', 'cool'] },
  egg: { scenes: ['kitchen'], places: FOOD, can: ['heat', 'cool', 'clean'] },
  lettuce: { scenes: ['kitchen'], places: FOOD, can: ['cool', 'clean'] },
  potato: { scenes: ['kitchen'], places: FOOD, can: ['heat', 'cool', 'clean'] },
  tomato: { scenes: ['kitchen'], places: FOOD, can: ['heat', 'cool', 'clean'] },
  mug: {
    scenes: ['kitchen', 'bedroom'],
    places: [...DISH, 'coffeemachine', 'desk', 'sidetable'],
    can: ['heat', 'cool', 'clean'],
    lookable: true,
  },
  cup: { scenes: ['kitchen'], places: DISH, can: ['heat', 'cool', 'clean'] },
  plate: { scenes: ['kitchen'], places: DISH, can: ['heat', 'cool', 'clean'] },
  bowl: {
    scenes: ['kitchen', 'bedroom', 'livingroom'],
    places: [...DISH, 'desk', 'sidetable', 'coffeetable'],
    can: ['cool', 'clean'],
    lookable: true,
  },
  pan: {
    scenes: ['kitchen'],
    places: ['stoveburner', 'countertop', 'cabinet', 'sinkbasin', 'fridge'],
    can: ['cool', 'clean'],
  },
  pot: {
    scenes: ['kitchen'],
    places: ['stoveburner', 'countertop', 'cabinet', 'sinkbasin', 'fridge', 'shelf'],
    can: ['cool', 'clean'],
  },
  knife: { scenes: ['kitchen'], places: UTENSIL, can: ['clean'] },
  butterknife: { scenes: ['kitchen'], places: UTENSIL, can: ['clean'] },
  fork: { scenes: ['kitchen'], places: UTENSIL, can: ['clean'] },
  spoon: { scenes: ['kitchen'], places: UTENSIL, can: ['clean'] },
  spatula: { scenes: ['kitchen'], places: UTENSIL, can: ['clean'] },
  ladle: { scenes: ['kitchen'], places: UTENSIL, can: ['clean'] },
  winebottle: {
    scenes: ['kitchen'],
    places: ['countertop', 'diningtable', 'fridge', 'cabinet', 'shelf', 'garbagecan'],
    can: ['cool'],
  },
  saltshaker: { scenes: ['kitchen'], places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'drawer'], can: [] },
  peppershaker: { scenes: ['kitchen'], places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'drawer'], can: [] },
  dishsponge: {
    scenes: ['kitchen', 'bathroom'],
    places: ['countertop', 'sinkbasin', 'cabinet', 'drawer', 'shelf'],
    can: ['clean'],
  },
  book: { scenes: ['livingroom', 'bedroom'], places: SMALL, can: [], lookable: true },
  cellphone: { scenes: ['livingroom', 'bedroom'], places: SMALL, can: [], lookable: true },
  creditcard: { scenes: ['livingroom', 'bedroom'], places: SMALL, can: [], lookable: true },
  keychain: { scenes: ['livingroom', 'bedroom'], places: SMALL, can: [], lookable: true },
  remotecontrol: { scenes: ['livingroom'], places: SMALL, can: [], lookable: true },
  watch: { scenes: ['livingroom', 'bedroom'], places: SMALL, can: [], lookable: true },
  statue: { scenes: ['livingroom'], places: SMALL, can: [], lookable: true },
  vase: { scenes: ['livingroom'], places: SMALL, can: [], lookable: true },
  newspaper: { scenes: ['livingroom'], places: SMALL, can: [], lookable: true },
  pillow: {
    scenes: ['livingroom', 'bedroom'],
    places: ['sofa', 'armchair', 'bed', 'ottoman'],
    can: [],
    lookable: true,
  },
  pen: { scenes: ['bedroom'], places: SMALL, can: [], lookable: true },
  pencil: { scenes: ['bedroom'], places: SMALL, can: [], lookable: true },
  cd: { scenes: ['bedroom'], places: SMALL, can: [], lookable: true },
  alarmclock: { scenes: ['bedroom'], places: SMALL, can: [], lookable: true },
  laptop: {
    scenes: ['livingroom', 'bedroom'],
    places: ['desk', 'bed', 'sofa', 'coffeetable', 'dresser', 'sidetable'],
    can: [],
    lookable: true,
  },
  soapbar: { scenes: ['bathroom'], places: BATH, can: ['clean'] },
  soapbottle: { scenes: ['bathroom', 'kitchen'], places: BATH, can: [] },
  spraybottle: { scenes: ['bathroom'], places: BATH, can: [] },
  toiletpaper: { scenes: ['bathroom'], places: [...BATH, 'toiletpaperhanger'], can: [] },
  candle: { scenes: ['bathroom'], places: BATH, can: [] },
  cloth: { scenes: ['bathroom'], places: BATH, can: ['clean'] },
  handtowel: { scenes: ['bathroom'], places: ['handtowelholder', 'countertop', 'cabinet'], can: [] },
  towel: { scenes: ['bathroom'], places: ['towelholder', 'countertop', 'cabinet', 'bathtubbasin'], can: [] },
  tissuebox: { scenes: ['bathroom', 'livingroom'], places: [...BATH, 'sidetable', 'coffeetable', 'dresser'], can: [] },
} as const satisfies Record<string, ObjectType>
export type ObjectName = keyof typeof OBJECTS

/** Lamps are fixed objects standing on furniture; "use" turns them on. */
export const LAMPS = {
  desklamp: ['desk', 'sidetable', 'dresser', 'shelf'],
  floorlamp: ['sidetable', 'coffeetable', 'dresser', 'tvstand'],
} as const satisfies Record<string, readonly ReceptacleName[]>
export type LampName = keyof typeof LAMPS

/** Which scene types each family can be posed in. */
export const FAMILY_SCENES: Record<Family, readonly SceneType[]> = {
  pick_and_place: SCENE_TYPES,
  look_at_obj_in_light: ['livingroom', 'bedroom'],
  pick_clean_then_place_in_recep: ['kitchen', 'bathroom'],
  pick_heat_then_place_in_recep: ['kitchen'],
  pick_cool_then_place_in_recep: ['kitchen'],
  pick_two_obj_and_place: SCENE_TYPES,
}

export const FAMILY_APPLIANCE: Partial<Record<Family, Appliance>> = {
  pick_clean_then_place_in_recep: 'clean',
  pick_heat_then_place_in_recep: 'heat',
  pick_cool_then_place_in_recep: 'cool',
}
