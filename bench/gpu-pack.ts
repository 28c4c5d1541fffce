// `npm run bench:gpu -- --pack DIR`: the GPU check (bench/gpu-check.ts) made to travel to an offline Linux machine
// with an NVIDIA GPU and no Node (the H200 machines seedflow is checked on: Python and the CUDA 13 runtime, no
// network), in parts small enough to send one per command (≤ 60 MiB each, docs/benchmarks.md §6.9):
//   DIR/part1  this Node binary and the PyPI wheel's ORT library (xz; Python's lzma unpacks them there), the
//              onnxruntime-node binding, the native engine's addon, and the check bundled by esbuild into one .mjs; `sh part1/run.sh` unpacks
//              them into a stash folder ($SEEDFLOW_STASH, default /root/stash) and, given arguments, runs the check
//              with them (on the CPU provider: how CI proves the pack);
//   DIR/part2  the CUDA provider (`--cuda`; its cubins for one architecture only, other architectures' bytes
//              zeroed so it compresses: ../shared/tools/gpu/fatbin_keep_arch.py, for the check machine only, never
//              for users), an empty libcurand.so.10 (see below), and `sh part2/run.sh`, which adds the provider to
//              the stash, finds the CUDA 13 runtime the machine has, and runs the check on CUDA. Sent right after
//              part 1, while the machine holds the stash.
// On the check machine (the device tool: each command gets the working tree and the carried part):
//   npm run bench:gpu -- --pack .gpu-pack --cuda            # here; .gpu-pack ignored by .git/info/exclude
//   1. carry .gpu-pack/part1: sh .gpu-pack/part1/run.sh && sh .gpu-pack/part1/run.sh torch h200 "$OUT/torch.json"
//   2. carry .gpu-pack/part2, at once: sh .gpu-pack/part2/run.sh --plan h200 --out "$OUT/gpu.json"
//   node --import tsx bench/gpu-report.ts gpu.json torch.json   # here: bench/results/gpu.json and the table
//   node --import tsx bench/gpu-pack.ts DIR [--cuda [--arch 90]]
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chmod, copyFile, cp, mkdir, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { ensureCudaLibraries } from '../infra/cuda.ts'
import { cacheDir } from '../infra/models.ts'
import { ensureNativeAddon } from '../infra/native.ts'
import { PROJECT_ROOT } from '../infra/tools.ts'
import { PLANS, torchPlan } from './gpu-check.ts'

const PART_LIMIT = 60 * 2 ** 20
const BINDING_DIR = join('node_modules', 'onnxruntime-node', 'bin', 'napi-v6', 'linux', 'x64')
const FATBIN_TOOL = join(PROJECT_ROOT, '..', 'shared', 'tools', 'gpu', 'fatbin_keep_arch.py')
const say = (line: string) => process.stdout.write(`gpu-pack: ${line}\n`)

/** `file` compressed with xz into `out`, through a cache outside the clone keyed by the source's size and time. */
async function xz(file: string, out: string, key: string): Promise<void> {
  const { size, mtimeMs } = await stat(file)
  const cached = join(cacheDir(), 'gpu-pack', `${key}-${size}-${Math.round(mtimeMs)}.xz`)
  if (!existsSync(cached)) {
    await mkdir(dirname(cached), { recursive: true })
    say(`compressing ${file} (${(size / 2 ** 20).toFixed(0)} MiB) ...`)
    execFileSync('sh', ['-c', `xz -T0 -6 -c "$1" > "$2.tmp" && mv "$2.tmp" "$2"`, 'xz', file, cached])
  }
  await copyFile(cached, out)
}

const UNPACK = `unpack() { python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst: shutil.copyfileobj(src, dst, 1 << 20)' "$1" "$2"; }`

const PART1_RUN = `#!/bin/sh
# Part 1 of seedflow's GPU check (bench/gpu-pack.ts): unpacks Node, the ORT library and the check into the stash;
# with arguments, runs the check (e.g. --execution-provider cpu --plan smoke --out FILE); with \`torch PLAN OUT\`,
# runs the torch side of plan PLAN (smoke, h200) on DEVICE (default cuda) with this machine's python3 and torch.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
stash=\${SEEDFLOW_STASH:-/root/stash}
if [ "\${1:-}" = torch ]; then
  exec python3 "$here/torch/gpu-torch.py" --plan "$here/plan-$2.json" --device "\${DEVICE:-cuda}" --out "$3"
fi
${UNPACK}
mkdir -p "$stash"
cp -R "$here/node_modules" "$here/gpu-check.mjs" "$here/seedflow_ort.node" "$stash/"
unpack "$here/node.xz" "$stash/node" && chmod +x "$stash/node"
unpack "$here/libonnxruntime.so.1.xz" "$stash/${BINDING_DIR}/libonnxruntime.so.1"
echo "gpu-pack: part 1 unpacked into $stash ($("$stash/node" --version))"
if [ "$#" -gt 0 ]; then cd "$stash" && exec ./node gpu-check.mjs --addon "$stash/seedflow_ort.node" "$@"; fi
`

const PART2_RUN = `#!/bin/sh
# Part 2 of seedflow's GPU check (bench/gpu-pack.ts): adds the CUDA provider to part 1's stash and runs the check
# on CUDA with the CUDA 13 runtime this machine has (the folders of its libcublasLt.so.13 and libcudnn.so.9).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
stash=\${SEEDFLOW_STASH:-/root/stash}
[ -x "$stash/node" ] || { echo "gpu-pack: no stash at $stash: run part 1 first, on the same machine"; exit 3; }
${UNPACK}
lib="$stash/${BINDING_DIR}"
cp "$here/libonnxruntime_providers_shared.so" "$lib/"
unpack "$here/libonnxruntime_providers_cuda.so.xz" "$lib/libonnxruntime_providers_cuda.so"
dirs=""
for name in libcublasLt.so.13 libcudart.so.13 libcudnn.so.9 libcufft.so.12 libcurand.so.10 libnvrtc.so.13; do
  found=$(find / -xdev -name "$name" -not -path '/proc/*' 2>/dev/null | head -n 1)
  [ -n "$found" ] && dirs="$dirs:$(dirname "$found")"
done
# an empty libcurand.so.10 where the machine has none (see gpu-pack.ts): last on the path
[ -n "$(find / -xdev -name libcurand.so.10 -not -path "$here/*" -not -path '/proc/*' 2>/dev/null | head -n 1)" ] ||
  dirs="$dirs:$here/stubs"
export LD_LIBRARY_PATH="\${dirs#:}\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "gpu-pack: CUDA libraries from $LD_LIBRARY_PATH"
cd "$stash" && exec ./node gpu-check.mjs --execution-provider cuda --addon "$stash/seedflow_ort.node" "$@"
`

async function bundle(out: string): Promise<void> {
  const esbuild = join(PROJECT_ROOT, 'node_modules', '.bin', 'esbuild')
  execFileSync(
    esbuild,
    [
      join(PROJECT_ROOT, 'bench', 'gpu-check.ts'),
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node20',
      '--external:onnxruntime-node',
      '--log-level=warning',
      "--banner:js=import { createRequire as __seedflowRequire } from 'node:module'; const require = __seedflowRequire(import.meta.url);",
      `--outfile=${out}`,
    ],
    { stdio: 'inherit' },
  )
}

async function partSize(dir: string): Promise<number> {
  return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0])
}

export async function pack(dir: string, options: { cuda?: boolean; arch?: string } = {}): Promise<string[]> {
  const ortGpu = ensureCudaLibraries()
  await rm(dir, { recursive: true, force: true })
  const part1 = join(dir, 'part1')
  await mkdir(join(part1, BINDING_DIR), { recursive: true })
  await bundle(join(part1, 'gpu-check.mjs'))
  const ort = join(PROJECT_ROOT, 'node_modules', 'onnxruntime-node')
  await copyFile(join(ort, 'package.json'), join(part1, 'node_modules', 'onnxruntime-node', 'package.json'))
  await cp(join(ort, 'dist'), join(part1, 'node_modules', 'onnxruntime-node', 'dist'), { recursive: true })
  await copyFile(
    join(PROJECT_ROOT, BINDING_DIR, 'onnxruntime_binding.node'),
    join(part1, BINDING_DIR, 'onnxruntime_binding.node'),
  )
  await cp(
    join(PROJECT_ROOT, 'node_modules', 'onnxruntime-common'),
    join(part1, 'node_modules', 'onnxruntime-common'),
    {
      recursive: true,
    },
  )
  await copyFile(ensureNativeAddon(), join(part1, 'seedflow_ort.node'))
  await xz(process.execPath, join(part1, 'node.xz'), `node-${process.version}`)
  await xz(join(ortGpu, 'libonnxruntime.so.1'), join(part1, 'libonnxruntime.so.1.xz'), 'libonnxruntime')
  await mkdir(join(part1, 'torch', 'compare'), { recursive: true })
  await copyFile(join(PROJECT_ROOT, 'bench', 'gpu-torch.py'), join(part1, 'torch', 'gpu-torch.py'))
  await copyFile(
    join(PROJECT_ROOT, 'bench', 'compare', 'torch_reference.py'),
    join(part1, 'torch', 'compare', 'torch_reference.py'),
  )
  for (const [name, plan] of Object.entries(PLANS))
    await writeFile(join(part1, `plan-${name}.json`), `${JSON.stringify(torchPlan(plan), null, 2)}\n`)
  await writeFile(join(part1, 'run.sh'), PART1_RUN)
  await chmod(join(part1, 'run.sh'), 0o755)
  const parts = [part1]
  if (options.cuda) {
    const part2 = join(dir, 'part2')
    await mkdir(part2, { recursive: true })
    if (!existsSync(FATBIN_TOOL)) throw new Error(`--cuda needs ${FATBIN_TOOL} (the workplace's transport helper)`)
    const arch = options.arch ?? '90'
    const slim = join(cacheDir(), 'gpu-pack', `libonnxruntime_providers_cuda.sm${arch}.so`)
    if (!existsSync(slim)) {
      say(`keeping sm_${arch}'s cubins of the CUDA provider ...`)
      execFileSync('python3', [FATBIN_TOOL, join(ortGpu, 'libonnxruntime_providers_cuda.so'), arch, slim], {
        stdio: ['ignore', 'ignore', 'inherit'],
      })
    }
    await xz(slim, join(part2, 'libonnxruntime_providers_cuda.so.xz'), `providers_cuda-sm${arch}`)
    await copyFile(
      join(ortGpu, 'libonnxruntime_providers_shared.so'),
      join(part2, 'libonnxruntime_providers_shared.so'),
    )
    // the provider names libcurand.so.10 but imports none of its symbols (nm -D): where the machine lacks it (torch's
    // CUDA 13 wheels do not bring it), an empty library of that name satisfies the loader; for this check only
    await mkdir(join(part2, 'stubs'))
    execFileSync('gcc', [
      '-shared',
      '-fPIC',
      '-Wl,-soname,libcurand.so.10',
      '-o',
      join(part2, 'stubs', 'libcurand.so.10'),
      '-x',
      'c',
      '/dev/null',
    ])
    await writeFile(join(part2, 'run.sh'), PART2_RUN)
    await chmod(join(part2, 'run.sh'), 0o755)
    parts.push(part2)
  }
  for (const part of parts) {
    const size = await partSize(part)
    if (size > PART_LIMIT)
      throw new Error(
        `${part} is ${(size / 2 ** 20).toFixed(1)} MiB, over the ${PART_LIMIT / 2 ** 20} MiB a part may be`,
      )
    say(`${part}: ${(size / 2 ** 20).toFixed(1)} MiB`)
  }
  return parts
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { cuda: { type: 'boolean', default: false }, arch: { type: 'string', default: '90' } },
  })
  const dir = positionals[0]
  if (!dir) throw new Error('usage: gpu-pack.ts DIR [--cuda [--arch 90]]')
  await pack(dir, { cuda: values.cuda, arch: values.arch })
}
