// The engine's interface: what the local, worker and native engines (engine/runtime.ts, engine/native-engine.ts)
// all are, apart from any of them so that what they share (engine/kept.ts) needs none of them.
import type { DType } from './dtype.ts'
import type { ModelFile } from './model-files.ts'
import type { Feeds, Fetches } from './tensor.ts'

/** A model loaded into an engine; `id` is the sha256 of its bytes. */
export interface ModelHandle {
  readonly id: string
  readonly inputNames: readonly string[]
  readonly outputNames: readonly string[]
}

export interface RunOptions {
  /** Outputs to compute (default: every output). */
  fetches?: readonly string[]
  /** Worker engine only: move the feeds' buffers to the worker instead of copying (the caller loses them). */
  transfer?: boolean
  /** Tensors this engine keeps (`keep`, `allocate`), fed to the run as if they were among the feeds. */
  kept?: KeptFeeds | readonly KeptFeeds[]
  /**
   * Outputs the run writes into the memory of a kept feed (output name → that feed's name), in place: ORT binds
   * the feed's memory as the output's, which a kernel may share with the feed itself (GroupQueryAttention's
   * present_key over its past_key). The kept tensor holds the result; the output is not returned.
   */
  inPlace?: Readonly<Record<string, string>>
  /** Outputs written into kept tensors after the run instead of being returned (see `KeptWrite`). */
  writes?: Readonly<Record<string, KeptWrite>>
}

/**
 * Tensors an engine keeps for runs to name, so that they are not sent with every run. With `rows`, a run is
 * fed only the first `rows` entries of each along axis 0 (views: nothing copied), as `{ ...handle, rows }`.
 */
export interface KeptFeeds {
  readonly id: number
  readonly names: readonly string[]
  readonly rows?: number
}

/**
 * Where a run's output goes in a kept tensor: entry `from` of the output (along axis 0) is written into entry
 * `row` of the kept tensor, starting at index `at` along `axis` and spanning the output's extent there. Every
 * other axis (but 0) has the same size in both: a KV cache's new columns, written where each row is.
 */
export interface KeptWrite {
  readonly kept: KeptFeeds
  readonly name: string
  readonly axis: number
  readonly slices: readonly { readonly from: number; readonly row: number; readonly at: number }[]
}

export interface Engine {
  /**
   * Builds (or reuses) the session for these model bytes, or for a model on disk (engine/model-files.ts: one with
   * external data, over protobuf's 2 GB). Identical models share one session (policies of the same shape build
   * identical graphs), so each load takes a reference that `release` gives back.
   */
  load(model: Uint8Array | ModelFile): Promise<ModelHandle>
  run(model: ModelHandle, feeds: Feeds, options?: RunOptions): Promise<Fetches>
  /**
   * Keeps these tensors in the engine for runs to name (`RunOptions.kept`) instead of sending them each time:
   * a decode step's weights, the same for thousands of runs. The worker engine keeps a copy in its thread, the
   * local engine the caller's arrays (nothing copied): after changing them, keep them again and forget the old.
   */
  keep(feeds: Feeds): Promise<KeptFeeds>
  /**
   * Keeps zero-filled tensors of these shapes, made in the engine (nothing is sent): state that runs read and
   * update where the model runs (`RunOptions.inPlace`, `RunOptions.writes`), such as a decode batch's KV cache.
   */
  allocate(shapes: Readonly<Record<string, { dtype: DType; dims: readonly number[] }>>): Promise<KeptFeeds>
  /** Copies of kept tensors (every one of the handle, or those named), for the caller to own. */
  read(kept: KeptFeeds, names?: readonly string[]): Promise<Feeds>
  /** Frees what `keep` kept; a run that names it afterwards fails. */
  forget(kept: KeptFeeds): Promise<void>
  /** Gives back one reference of `load`; the session (and its memory arena) goes when none remain. */
  release(model: ModelHandle): Promise<void>
  close(): Promise<void>
}
