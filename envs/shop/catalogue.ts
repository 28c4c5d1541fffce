// A generated product catalogue in WebShop's shape: category path, product type, attributes, options, price,
// description and feature bullets. Fixed seed: every process builds the same 1,200 products.
import { hashString, mulberry32, pick, type Rng, randInt, shuffled } from '../rng.ts'

export interface ProductType {
  name: string
  /** Category path below the top-level category, WebShop style ("electronics › audio › headphones"). */
  path: readonly string[]
  options: Partial<Record<'color' | 'size' | 'flavor' | 'scent' | 'pack', readonly string[]>>
  price: readonly [number, number]
}

export interface Category {
  attributes: readonly string[]
  types: readonly ProductType[]
}

const COLORS = ['black', 'white', 'navy blue', 'red', 'grey', 'green', 'pink', 'beige', 'brown', 'purple']
const CLOTH_SIZES = ['x-small', 'small', 'medium', 'large', 'x-large', 'xx-large']

export const CATEGORIES: Record<string, Category> = {
  electronics: {
    attributes: [
      'wireless',
      'noise cancelling',
      'fast charging',
      'long battery life',
      'water resistant',
      'bluetooth 5.0',
      'usb c',
      'lightweight',
    ],
    types: [
      { name: 'headphones', path: ['audio', 'headphones'], options: { color: COLORS }, price: [15, 250] },
      { name: 'portable speaker', path: ['audio', 'speakers'], options: { color: COLORS }, price: [20, 180] },
      {
        name: 'phone charger',
        path: ['accessories', 'chargers'],
        options: { color: COLORS, pack: ['1 pack', '2 pack', '3 pack'] },
        price: [8, 45],
      },
      { name: 'keyboard', path: ['computers', 'keyboards'], options: { color: COLORS }, price: [20, 150] },
    ],
  },
  fashion: {
    attributes: [
      'machine washable',
      'slim fit',
      'cotton',
      'breathable',
      'quick drying',
      'long sleeve',
      'relaxed fit',
      'stretch',
    ],
    types: [
      { name: 't-shirt', path: ['men', 'shirts'], options: { color: COLORS, size: CLOTH_SIZES }, price: [9, 40] },
      {
        name: 'hoodie',
        path: ['women', 'sweatshirts'],
        options: { color: COLORS, size: CLOTH_SIZES },
        price: [20, 70],
      },
      {
        name: 'running shoes',
        path: ['shoes', 'athletic'],
        options: { color: COLORS, size: ['6', '7', '8', '9', '10', '11', '12'] },
        price: [35, 160],
      },
      {
        name: 'jeans',
        path: ['men', 'pants'],
        options: { color: ['dark wash', 'light wash', 'black', 'grey'], size: ['28w', '30w', '32w', '34w', '36w'] },
        price: [25, 90],
      },
    ],
  },
  beauty: {
    attributes: [
      'long lasting',
      'cruelty free',
      'paraben free',
      'sensitive skin',
      'natural ingredients',
      'fragrance free',
      'vegan',
      'travel size',
    ],
    types: [
      {
        name: 'shampoo',
        path: ['hair care', 'shampoo'],
        options: { scent: ['lavender', 'coconut', 'citrus', 'unscented'], size: ['8 fl oz', '12 fl oz', '16 fl oz'] },
        price: [6, 35],
      },
      {
        name: 'moisturizer',
        path: ['skin care', 'face'],
        options: { size: ['1.7 oz', '2.5 oz', '4 oz'] },
        price: [10, 60],
      },
      {
        name: 'lipstick',
        path: ['makeup', 'lips'],
        options: { color: ['ruby red', 'nude', 'coral', 'berry', 'mauve'] },
        price: [5, 30],
      },
      {
        name: 'deodorant',
        path: ['personal care', 'deodorants'],
        options: { scent: ['fresh', 'citrus', 'cedar', 'unscented'], pack: ['1 pack', '2 pack', '4 pack'] },
        price: [4, 20],
      },
    ],
  },
  grocery: {
    attributes: [
      'gluten free',
      'organic',
      'non gmo',
      'sugar free',
      'low calorie',
      'keto friendly',
      'high protein',
      'caffeine free',
    ],
    types: [
      {
        name: 'coffee beans',
        path: ['beverages', 'coffee'],
        options: { flavor: ['dark roast', 'medium roast', 'hazelnut', 'vanilla'], size: ['12 oz', '2 lb', '5 lb'] },
        price: [8, 45],
      },
      {
        name: 'green tea',
        path: ['beverages', 'tea'],
        options: { flavor: ['jasmine', 'mint', 'lemon', 'original'], pack: ['20 count', '50 count', '100 count'] },
        price: [4, 25],
      },
      {
        name: 'protein bar',
        path: ['snacks', 'bars'],
        options: { flavor: ['chocolate', 'peanut butter', 'berry', 'cookie dough'], pack: ['12 count', '24 count'] },
        price: [12, 45],
      },
      {
        name: 'olive oil',
        path: ['pantry', 'oils'],
        options: { size: ['500 ml', '1 liter', '3 liter'] },
        price: [7, 40],
      },
    ],
  },
  home: {
    attributes: [
      'easy to clean',
      'machine washable',
      'space saving',
      'eco friendly',
      'heavy duty',
      'non slip',
      'hypoallergenic',
      'soft',
    ],
    types: [
      {
        name: 'throw pillow',
        path: ['decor', 'pillows'],
        options: { color: COLORS, size: ['16x16 inch', '18x18 inch', '20x20 inch'] },
        price: [10, 45],
      },
      {
        name: 'bath towel',
        path: ['bath', 'towels'],
        options: { color: COLORS, pack: ['2 pack', '4 pack', '6 pack'] },
        price: [15, 60],
      },
      {
        name: 'storage basket',
        path: ['organization', 'baskets'],
        options: { color: COLORS, size: ['small', 'medium', 'large'] },
        price: [12, 50],
      },
      {
        name: 'curtains',
        path: ['decor', 'window'],
        options: { color: COLORS, size: ['52x63 inch', '52x84 inch', '52x96 inch'] },
        price: [18, 80],
      },
    ],
  },
  sports: {
    attributes: [
      'non slip',
      'lightweight',
      'durable',
      'bpa free',
      'adjustable',
      'portable',
      'sweat resistant',
      'foldable',
    ],
    types: [
      {
        name: 'yoga mat',
        path: ['fitness', 'yoga'],
        options: { color: COLORS, size: ['4mm', '6mm', '8mm'] },
        price: [15, 70],
      },
      {
        name: 'water bottle',
        path: ['outdoor', 'hydration'],
        options: { color: COLORS, size: ['18 oz', '24 oz', '32 oz', '40 oz'] },
        price: [10, 45],
      },
      {
        name: 'dumbbells',
        path: ['fitness', 'weights'],
        options: { size: ['5 lb', '10 lb', '15 lb', '20 lb'] },
        price: [15, 120],
      },
      {
        name: 'resistance bands',
        path: ['fitness', 'accessories'],
        options: { color: COLORS, pack: ['3 pack', '5 pack'] },
        price: [8, 35],
      },
    ],
  },
  garden: {
    attributes: [
      'weather resistant',
      'rust proof',
      'solar powered',
      'easy to assemble',
      'uv resistant',
      'heavy duty',
      'ergonomic',
      'waterproof',
    ],
    types: [
      {
        name: 'garden hose',
        path: ['watering', 'hoses'],
        options: { color: ['green', 'black', 'blue'], size: ['25 ft', '50 ft', '100 ft'] },
        price: [20, 90],
      },
      {
        name: 'solar lights',
        path: ['lighting', 'outdoor'],
        options: { color: ['warm white', 'cool white', 'multicolor'], pack: ['4 pack', '8 pack', '12 pack'] },
        price: [15, 60],
      },
      {
        name: 'planter pot',
        path: ['planters', 'pots'],
        options: { color: COLORS, size: ['6 inch', '8 inch', '12 inch'] },
        price: [8, 50],
      },
      {
        name: 'pruning shears',
        path: ['tools', 'hand tools'],
        options: { color: ['red', 'orange', 'green'] },
        price: [10, 45],
      },
    ],
  },
  toys: {
    attributes: [
      'educational',
      'bpa free',
      'non toxic',
      'battery operated',
      'for toddlers',
      'stem',
      'washable',
      'durable',
    ],
    types: [
      {
        name: 'building blocks',
        path: ['learning', 'construction'],
        options: { pack: ['100 pieces', '250 pieces', '500 pieces'] },
        price: [15, 80],
      },
      {
        name: 'plush toy',
        path: ['stuffed animals', 'plush'],
        options: { color: ['brown', 'white', 'pink', 'grey'], size: ['small', 'medium', 'large'] },
        price: [8, 40],
      },
      { name: 'puzzle', path: ['games', 'puzzles'], options: { pack: ['500 pieces', '1000 pieces'] }, price: [10, 35] },
      {
        name: 'remote control car',
        path: ['vehicles', 'rc'],
        options: { color: ['red', 'blue', 'yellow', 'black'] },
        price: [25, 120],
      },
    ],
  },
}
export type CategoryName = keyof typeof CATEGORIES

/** Categories whose products only test-unseen goals ask for. */
export const UNSEEN_CATEGORIES: readonly string[] = ['garden', 'toys']

export const PRODUCTS_PER_TYPE = 40

const BRANDS = [
  'Acme',
  'Novaro',
  'Brightline',
  'Kestrel',
  'Lumio',
  'Oakridge',
  'Vantio',
  'Zephyr',
  'Harbor & Co',
  'Pinecrest',
  'Solace',
  'Trailmark',
  'Everwell',
  'Quillon',
  'Meridia',
  'Fernhill',
]
const STYLE_WORDS = [
  'classic',
  'premium',
  'everyday',
  'pro',
  'essential',
  'deluxe',
  'compact',
  'modern',
  'ultra',
  'signature',
]

export interface Product {
  asin: string
  title: string
  category: string
  /** Full category path, joined with " › ". */
  categoryPath: string
  type: string
  attributes: string[]
  options: Record<string, string[]>
  price: number
  description: string
  features: string[]
  rating: number
}

function asin(rng: Rng): string {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
  let s = 'B0'
  for (let i = 0; i < 8; i++) s += chars[randInt(rng, 0, chars.length)]
  return s
}

function makeProduct(rng: Rng, category: string, cat: Category, type: ProductType, used: Set<string>): Product {
  let id = asin(rng)
  while (used.has(id)) id = asin(rng)
  used.add(id)
  const attributes = shuffled(rng, cat.attributes).slice(0, randInt(rng, 2, 5))
  const options: Record<string, string[]> = {}
  for (const [kind, values] of Object.entries(type.options)) {
    const vs = shuffled(rng, values as readonly string[]).slice(
      0,
      randInt(rng, 2, Math.min(6, (values as readonly string[]).length + 1)),
    )
    options[kind] = vs
  }
  const [lo, hi] = type.price
  const price = Math.round((lo + rng.next() * (hi - lo)) * 100) / 100 - 0.01
  const brand = pick(rng, BRANDS)
  const title = `${brand} ${pick(rng, STYLE_WORDS)} ${attributes.slice(0, 2).join(' ')} ${type.name}`
  const description =
    `The ${brand} ${type.name} is ${attributes.join(', ')}. ` +
    `Designed for ${pick(rng, ['daily use', 'home and travel', 'gifting', 'busy days', 'every season'])}, it comes ` +
    `${pick(rng, ['ready to use', 'with a one-year warranty', 'in recyclable packaging', 'with a satisfaction guarantee'])}.`
  const features = attributes.map(
    (a) =>
      `${a[0]?.toUpperCase()}${a.slice(1)}: ${pick(rng, ['tested for quality', 'built to last', 'made with care', 'customer favourite'])}`,
  )
  return {
    asin: id,
    title: title.replace(/\s+/g, ' '),
    category,
    categoryPath: [category, ...type.path].join(' › '),
    type: type.name,
    attributes,
    options,
    price: Math.max(0.99, Math.round(price * 100) / 100),
    description,
    features,
    rating: Math.round((3 + rng.next() * 2) * 10) / 10,
  }
}

let cached: Product[] | null = null

/** The whole catalogue: 8 categories × 4 types × 40 products = 1,280 products. */
export function catalogue(): Product[] {
  if (cached) return cached
  const rng = mulberry32(hashString('shop-catalogue-v1'))
  const used = new Set<string>()
  const products: Product[] = []
  for (const [name, cat] of Object.entries(CATEGORIES)) {
    for (const type of cat.types) {
      for (let i = 0; i < PRODUCTS_PER_TYPE; i++) products.push(makeProduct(rng, name, cat, type, used))
    }
  }
  cached = products
  return products
}

/** Every word the catalogue uses as an adjective-like modifier (attributes, options, style words, brands). */
export function modifierVocabulary(): Set<string> {
  const words = new Set<string>()
  const add = (s: string) => {
    for (const w of s.toLowerCase().split(/[^a-z0-9-]+/)) if (w) words.add(w)
  }
  for (const cat of Object.values(CATEGORIES)) {
    cat.attributes.forEach(add)
    for (const t of cat.types) for (const vs of Object.values(t.options)) (vs as readonly string[]).forEach(add)
  }
  STYLE_WORDS.forEach(add)
  BRANDS.forEach(add)
  return words
}
