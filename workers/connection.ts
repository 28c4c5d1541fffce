import { loadClientConnectConfig } from '@temporalio/envconfig'
import type { NativeConnectionOptions } from '@temporalio/worker'

export interface TemporalTarget {
  connectionOptions: NativeConnectionOptions
  namespace: string
  /** True when the user pointed seedflow at a cluster; false for the embedded dev server. */
  remote: boolean
}

const CLUSTER_VARIABLES = ['TEMPORAL_ADDRESS', 'TEMPORAL_PROFILE', 'TEMPORAL_CONFIG_FILE'] as const

/**
 * Where to find Temporal. With TEMPORAL_ADDRESS (or a TEMPORAL_PROFILE / TEMPORAL_CONFIG_FILE), the same
 * settings the `temporal` CLI reads: namespace, API key, mTLS certificates (Temporal's envconfig). Otherwise
 * the embedded dev server at `localAddress`.
 */
export function temporalTarget(localAddress: string, env: NodeJS.ProcessEnv = process.env): TemporalTarget {
  if (!CLUSTER_VARIABLES.some((name) => env[name])) {
    return { connectionOptions: { address: localAddress }, namespace: 'default', remote: false }
  }
  const config = loadClientConnectConfig({ overrideEnvVars: env as Record<string, string> })
  return { connectionOptions: config.connectionOptions, namespace: config.namespace ?? 'default', remote: true }
}
