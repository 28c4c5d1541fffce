// `seedflow report`'s output folder: index.html (the run report, one run or several side by side) and one skill
// inspection page per inspectable iteration, `<run>/iteration-<kkkk>.html`, all self-contained files that open
// offline. Pages are written as they are made, with progress, so a long run's report shows how far it got. An
// artifact that cannot be read costs what it holds: the pages show the rest and name it.
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { type DamagedArtifact, DamageLog } from './damage.ts'
import { readRunData } from './run-data.ts'
import { listRun, type RunListing } from './run-listing.ts'
import { runPage } from './run-page.ts'
import { readIterationSkills } from './skill-data.ts'
import { skillPage } from './skill-page.ts'

export interface WriteReportOptions {
  /** Trajectories per skill page (evenly spaced beyond it). */
  trajectories: number
  /** Only these iterations get a skill page (default: every inspectable one). */
  iterations?: readonly number[]
  /** Temporal's state of each run and its Web UI page, where known. */
  workflowStatus?: ReadonlyMap<string, string>
  temporalLink?: (runId: string) => string
  onProgress?: (message: string) => void
}

export interface WrittenReport {
  index: string
  pages: string[]
  /** Every artifact that could not be read, per run: left out of the pages and named on them. */
  damaged: Array<DamagedArtifact & { runId: string }>
}

const skillFile = (runId: string, k: number) => `${runId}/iteration-${String(k).padStart(4, '0')}.html`

export async function writeReport(
  store: ArtifactStore,
  runIds: readonly string[],
  outDir: string,
  options: WriteReportOptions,
): Promise<WrittenReport> {
  // one listing per run serves its data and every skill page
  const listings = new Map<string, RunListing>()
  const runs = []
  for (const runId of runIds) {
    const listing = listings.get(runId) ?? (await listRun(store, runId))
    listings.set(runId, listing)
    runs.push(await readRunData(store, runId, listing))
  }
  const pages: string[] = []
  await mkdir(outDir, { recursive: true })
  for (const [i, run] of runs.entries()) {
    const damage = new DamageLog()
    damage.add(run.damaged)
    const wanted = run.iterations.filter(
      (it) => it.inspectable && (!options.iterations || options.iterations.includes(it.iteration)),
    )
    if (wanted.length > 0) await mkdir(join(outDir, run.runId), { recursive: true })
    for (const it of wanted) {
      const data = await readIterationSkills(store, run.runId, it.iteration, {
        limit: options.trajectories,
        listing: listings.get(run.runId),
      })
      const path = join(outDir, skillFile(run.runId, it.iteration))
      await writeFile(path, skillPage(data, { report: '../index.html' }))
      pages.push(path)
      damage.add(data.damaged)
      options.onProgress?.(`skill page of ${run.runId} iteration ${it.iteration}: ${path}`)
    }
    runs[i] = { ...run, damaged: damage.items } // the run page names what its skill pages could not read too
  }
  const index = join(outDir, 'index.html')
  const html = await runPage(runs, {
    links: {
      skills: (runId, k) => (!options.iterations || options.iterations.includes(k) ? skillFile(runId, k) : `#skills`),
      ...(options.temporalLink ? { temporal: options.temporalLink } : {}),
    },
    ...(options.workflowStatus ? { workflowStatus: options.workflowStatus } : {}),
  })
  await writeFile(index, html)
  return { index, pages, damaged: runs.flatMap((run) => run.damaged.map((d) => ({ runId: run.runId, ...d }))) }
}
