// What an operator can do about a run that waits for one: a hint that fits the failure's type. A retry with a
// smaller learning rate helps a diverged loss, not a missing model folder or an unreachable store.

/** The next step for a run that awaits an operator after a failure of `type`. */
export function operatorHint(type: string, runId: string): string {
  const retry = `seedflow retry ${runId}`
  const abort = `seedflow abort ${runId}`
  switch (type) {
    case 'NonFiniteLossError':
      return `the loss diverged: ${retry} --set stage2.lr=<smaller>   or: ${abort}`
    case 'ModelImportError':
      return `make the model folder above readable where the workers run, then: ${retry}   or: ${abort}`
    case 'IntegrityError':
    case 'CorruptArtifact':
    case 'NotFoundError':
      return `restore the artifact named above (\`seedflow audit ${runId}\` lists every damaged one), then: ${retry}   or: ${abort}`
    case 'StoreUnavailableError':
      return `start (or reconnect) the artifact store named above, then: ${retry}   or: ${abort}`
    case 'StoreAccessError':
      return `give the workers valid credentials for the artifact store (restart them with the fixed settings), then: ${retry}   or: ${abort}`
    case 'StoreFullError':
      return `free space on the disk named above (or move the store, docs/operations.md), then: ${retry}   or: ${abort}`
    case 'StoreMismatch':
      return `stop the worker of the other store named above; serve the run from workers of its own store, then: ${retry}   or: ${abort}`
    case 'StorePermissionError':
      return `let the workers' user read and write the store's folder named above, then: ${retry}   or: ${abort}`
    case 'InvalidRunConfig':
    case 'InvalidHyperparameters':
      return `the configuration cannot run: ${retry} --set <field=value> for a stage2 setting, else ${abort} and start a new run`
    case 'AnnotationShortfall':
      return (
        `fix the annotator (its endpoint; its key variable must be set for the worker: restart \`seedflow worker\` with it), then: ${retry}` +
        `   or accept fewer: ${retry} --set stage1.minAnnotatedShare=<lower>   or: ${abort}`
      )
    case 'AnnotatorConfigError':
      return (
        `set the annotator's key variable named above where the run's workers annotate and restart them with it: a ` +
        `running worker never sees a variable set after it started (\`seedflow worker --run ${runId}\` for a run ` +
        `started by \`seedflow run\`), then: ${retry}   or: ${abort}`
      )
    case 'AnnotatorAuthError':
      return (
        `put a key the annotator accepts in the variable named above and restart the run's workers with it (a running ` +
        `worker keeps the key it started with), then: ${retry}   or: ${abort}`
      )
    case 'LibraryMissing':
      return `this row reads the skill library of a Stage 1 that is missing: ${abort} and start the run again`
    default:
      return `once the cause is fixed: ${retry} [--set stage2.<field>=<value>]   or: ${abort}`
  }
}
