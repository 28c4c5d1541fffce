// A worker module for thread.test.ts.
import { serveThread } from '../../engine/thread.ts'

serveThread({
  echo: async (payload: { text: string }, { progress }) => {
    progress({ half: true })
    return `echo ${payload.text}`
  },
  fail: async () => {
    throw Object.assign(new Error('bad config: lr -1'), { name: 'ApplicationFailure', type: 'InvalidRunConfig' })
  },
})
