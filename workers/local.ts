import { fileURLToPath } from 'node:url'
import { NativeConnection, type NativeConnectionOptions, Worker } from '@temporalio/worker'
import { createActivities } from '../activities/index.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { TASK_QUEUES } from './task-queues.ts'

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url))

export interface LocalWorkerOptions {
  connectionOptions: NativeConnectionOptions
  namespace: string
  store: ArtifactStore
  taskQueue?: string
}

/** The all-in-one worker of the embedded default: workflows and every activity on one queue. */
export async function createLocalWorker(
  options: LocalWorkerOptions,
): Promise<{ worker: Worker; connection: NativeConnection }> {
  const connection = await NativeConnection.connect(options.connectionOptions)
  try {
    const worker = await Worker.create({
      connection,
      namespace: options.namespace,
      taskQueue: options.taskQueue ?? TASK_QUEUES.control,
      workflowsPath: WORKFLOWS_PATH,
      activities: createActivities({ store: options.store }),
    })
    return { worker, connection }
  } catch (error) {
    await connection.close()
    throw error
  }
}
