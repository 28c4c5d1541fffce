// A worker's profile (SEEDFLOW_PROFILE=<file.json> on `seedflow run` or `seedflow worker`): where its wall time and
// memory go, per activity type and per model the engine ran under it. The file is rewritten after every activity,
// so a run that is killed keeps what it had; bench/main-job-profile.ts reads it.
import { AsyncLocalStorage } from 'node:async_hooks'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { ActivityInterceptorsFactory } from '@temporalio/worker'
import { type Engine, type ModelTraffic, meteredEngine } from '../engine/index.ts'

/** How often the process's resident set is sampled. */
const RSS_SAMPLE_MS = 250

export interface ActivityProfile {
  activity: string
  executions: number
  /** Wall milliseconds from the worker's start of an execution to its end, summed. */
  ms: number
  /** The process's largest resident set sampled while one of them ran (other activities running at once included). */
  peakRssBytes: number
}

export interface WorkerProfile {
  pid: number
  startedAt: string
  /** Milliseconds since the profile was made. */
  wallMs: number
  /** The largest resident set sampled over the whole profile. */
  peakRssBytes: number
  /** Slowest first. */
  activities: ActivityProfile[]
  /** Per activity type (`tag`) and model, slowest first. */
  models: ModelTraffic[]
}

export interface ProfileRecorder {
  /** The engine every activity runs on, metered per activity and model. */
  wrap(engine: Engine): Engine
  activityInterceptor: ActivityInterceptorsFactory
  /** What the file holds now. */
  snapshot(): WorkerProfile
  /** Stops sampling and writes the file a last time. */
  close(): void
}

export function profileRecorder(path: string): ProfileRecorder {
  mkdirSync(dirname(path), { recursive: true })
  const started = performance.now()
  const startedAt = new Date().toISOString()
  const current = new AsyncLocalStorage<string>()
  const activities = new Map<string, ActivityProfile>()
  const running = new Map<string, number>()
  let metered: ReturnType<typeof meteredEngine> | undefined
  let peakRssBytes = 0

  const sample = () => {
    const rss = process.memoryUsage.rss()
    peakRssBytes = Math.max(peakRssBytes, rss)
    for (const [type, n] of running) {
      const a = activities.get(type)
      if (a && n > 0) a.peakRssBytes = Math.max(a.peakRssBytes, rss)
    }
  }
  const timer = setInterval(sample, RSS_SAMPLE_MS)
  timer.unref()

  const snapshot = (): WorkerProfile => ({
    pid: process.pid,
    startedAt,
    wallMs: performance.now() - started,
    peakRssBytes,
    activities: [...activities.values()].sort((a, b) => b.ms - a.ms),
    models: [...(metered?.traffic.models.values() ?? [])].sort((a, b) => b.ms - a.ms),
  })
  let warned = false
  const write = () => {
    try {
      writeFileSync(path, `${JSON.stringify(snapshot(), null, 1)}\n`)
    } catch (error) {
      // an observation, never a reason to fail the activity
      if (!warned) console.error(`seedflow: the profile could not be written to ${path}: ${String(error)}`)
      warned = true
    }
  }

  return {
    wrap(engine) {
      metered = meteredEngine(engine, { tag: () => current.getStore() })
      return metered
    },
    activityInterceptor: (ctx) => ({
      inbound: {
        async execute(input, next) {
          const type = ctx.info.activityType
          let a = activities.get(type)
          if (!a) {
            a = { activity: type, executions: 0, ms: 0, peakRssBytes: 0 }
            activities.set(type, a)
          }
          running.set(type, (running.get(type) ?? 0) + 1)
          sample()
          const t0 = performance.now()
          try {
            return await current.run(type, () => next(input))
          } finally {
            sample()
            a.executions++
            a.ms += performance.now() - t0
            running.set(type, (running.get(type) ?? 1) - 1)
            write()
          }
        },
      },
    }),
    snapshot,
    close() {
      clearInterval(timer)
      sample()
      write()
    },
  }
}
