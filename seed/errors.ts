/** Inputs to a SEED computation that do not fit together (lengths, shapes, dtypes, missing terms). */
export class SeedInputError extends Error {
  override name = 'SeedInputError'
}

/** A loss configuration that cannot be built: a term switched on without its inputs, a bad constant. */
export class LossConfigError extends Error {
  override name = 'LossConfigError'
}
