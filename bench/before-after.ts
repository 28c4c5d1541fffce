// What the before/after benchmarks of issue 42 share (bench/engine-traffic.ts, bench/phases-ab.ts): the tree of
// the code before the trainer, and their command line: `--child <arg>` (one measuring child: its result as a JSON
// line), `--report` (the .md again from the committed .json), else the whole benchmark, which needs that tree.
import { existsSync } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'

/** A checkout of f9489c5, the commit before the trainer (`git worktree add /tmp/seedflow-before f9489c5`). */
export const BEFORE_TREE = process.env.SEEDFLOW_BEFORE_TREE ?? '/tmp/seedflow-before'

export const say = (line: string) => process.stdout.write(`${line}\n`)

/**
 * Runs a child or rewrites the report when the command line asks (returns true then); otherwise checks that the
 * tree before the trainer is there (returns false: the caller runs the benchmark).
 */
export async function childOrReport<R>(
  out: string,
  child: (arg: string) => Promise<unknown>,
  render: (report: R) => string,
): Promise<boolean> {
  const at = process.argv.indexOf('--child')
  if (at >= 0) {
    say(JSON.stringify(await child(process.argv[at + 1] as string)))
    return true
  }
  if (process.argv.includes('--report')) {
    await writeFile(`${out}.md`, render(JSON.parse(await readFile(`${out}.json`, 'utf8')) as R))
    say(`wrote ${out}.md from ${out}.json`)
    return true
  }
  if (!existsSync(`${BEFORE_TREE}/policy/train-step.ts`))
    throw new Error(
      `no tree before the trainer at ${BEFORE_TREE}: git worktree add ${BEFORE_TREE} f9489c5 (see the header)`,
    )
  return false
}
