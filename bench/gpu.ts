// npm run bench:gpu -- [--pack DIR [--cuda [--arch 90]]] | [check options]: the GPU check of issue 43. With --pack,
// makes its parts for a machine without Node (bench/gpu-pack.ts); otherwise runs it here (bench/gpu-check.ts:
// --execution-provider cpu|cuda[:N] --plan smoke|h200 --out FILE).
const at = process.argv.indexOf('--pack')
if (at >= 0) {
  const dir = process.argv[at + 1]
  if (!dir || dir.startsWith('--')) throw new Error('--pack DIR')
  const { pack } = await import('./gpu-pack.ts')
  const arch = process.argv.indexOf('--arch')
  await pack(dir, {
    cuda: process.argv.includes('--cuda'),
    ...(arch >= 0 ? { arch: process.argv[arch + 1] as string } : {}),
  })
} else {
  // --execution-provider cuda: run again with the CUDA provider's libraries on the loader's path (cli/cuda-exec.ts)
  const { runWithCudaLibraries } = await import('../cli/cuda-exec.ts')
  const status = await runWithCudaLibraries()
  if (status === undefined) await (await import('./gpu-check.ts')).runCheck()
  else process.exitCode = status
}
