// The decoding behind `seedflow generate` and `seedflow chat`: the same scheduler, decode batch and generation
// jobs as `seedflow serve` (one row here), with each completion's text handed out as it is sampled.
import type { Engine } from '../engine/index.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { DecodeBatch } from '../policy/decode-batch.ts'
import { Trainer } from '../policy/trainer.ts'
import { ApiError } from '../serve/errors.ts'
import { type ChoiceDelta, generationJobs, type RawParams, samplingParams } from '../serve/generation.ts'
import { Scheduler } from '../serve/scheduler.ts'
import { type ServedModel, servedModel } from '../serve/served-model.ts'
import { RunInputError } from './run-checkpoint.ts'

export interface Completion {
  text: string
  tokens: number[]
  finish: 'stop' | 'length' | 'interrupted'
  seconds: number
}

export interface LocalDecoder {
  model: ServedModel
  context: number
  /** Samples a completion of `prompt`; `onText` gets its text as it becomes final; `interrupt()` ends it early. */
  complete(
    prompt: number[],
    params: RawParams,
    onText: (text: string) => void,
  ): {
    done: Promise<Completion>
    interrupt(): void
  }
  close(): Promise<void>
}

export function localDecoder(engine: Engine, checkpoint: Checkpoint, name: string, context?: number): LocalDecoder {
  const model = servedModel(checkpoint, name)
  const capacity = context ?? Math.min(2048, checkpoint.config.maxPositions)
  if (capacity > checkpoint.config.maxPositions)
    throw new RunInputError(`--context ${capacity} exceeds the model's ${checkpoint.config.maxPositions} positions`)
  const trainer = new Trainer(engine, checkpoint.config, checkpoint.weights)
  const policy = trainer.model
  const batch = new DecodeBatch(policy, { rows: 1, capacity, compact: true })
  const scheduler = new Scheduler(batch, { maxQueue: 1 })
  return {
    model,
    context: capacity,
    complete(prompt, raw, onText) {
      let params: ReturnType<typeof samplingParams>
      try {
        params = samplingParams(
          { ...raw, n: 1 },
          { longest: prompt.length, count: 1, param: 'prompt' },
          { context: capacity, rows: 1 },
          undefined,
        )
      } catch (error) {
        throw error instanceof ApiError ? new RunInputError(error.message.replace('max_tokens', '--max-tokens')) : error
      }
      const started = performance.now()
      let text = ''
      const tokens: number[] = []
      let interrupted = false
      let finish: (c: Completion) => void = () => {}
      let fail: (e: Error) => void = () => {}
      const done = new Promise<Completion>((resolve, reject) => {
        finish = resolve
        fail = reject
      })
      const end = (reason: Completion['finish']) =>
        finish({ text, tokens, finish: reason, seconds: (performance.now() - started) / 1000 })
      const generation = generationJobs(model, [prompt], params, {
        delta(d: ChoiceDelta) {
          tokens.push(...d.tokens)
          if (d.text.length > 0 && !interrupted) {
            text += d.text
            onText(d.text)
          }
          if (d.finish) end(d.finish)
        },
        done() {},
      })
      scheduler.submit({
        jobs: generation.jobs,
        cancelled: () => interrupted,
        onFail: (error) => fail(new Error(error.message)),
      })
      return {
        done,
        interrupt() {
          interrupted = true
          end('interrupted')
        },
      }
    },
    async close() {
      await scheduler.close(0)
      await batch.close()
      await trainer.release()
    },
  }
}
