"""The PyTorch side of seedflow's GPU check (bench/gpu-check.ts): the same shapes of the same plan, timed on the same
device, with bench/compare/torch_reference.py's plain-torch model (random weights made in this process, LoRA as
PEFT shapes it), so that each figure of the check has a torch figure beside it. Each step's results are written to
the output file as soon as it finishes. TF32: torch's matmuls follow ORT's CUDA default (TF32 on) unless
NVIDIA_TF32_OVERRIDE=0 turns it off for both.

  python3 bench/gpu-torch.py --plan plan.json --device cuda --out torch.json
(plan.json: `node --import tsx bench/gpu-check.ts --plan h200 --write-plan plan.json`, or the pack's part 1.)
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare"))
from torch_reference import Llama, peak_rss_mib  # noqa: E402


def stat(xs):
    s = sorted(xs)
    return {"min": s[0], "median": s[len(s) // 2], "all": xs}


def random_ids(g, shape, vocab):
    return torch.randint(0, vocab, shape, generator=g).tolist()


def train(shape, device):
    model = Llama.random(shape["config"], seed=1, device=device)
    if shape.get("lora"):
        lora = shape["lora"]
        model.add_lora(lora["rank"], lora["alpha"], lora["targets"])
    g = torch.Generator().manual_seed(3)
    ids = torch.tensor(random_ids(g, (shape["B"], shape["T"]), shape["config"]["vocab_size"]))
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    first = model.train(ids, True)
    first_seconds = time.perf_counter() - started
    runs = [model.train(ids, True) for _ in range(shape["steps"])]
    seconds = [r["seconds"] for r in runs]
    out = {
        "firstStepSeconds": first_seconds,
        "stepSeconds": stat(seconds),
        "tokensPerSecond": shape["B"] * shape["T"] / stat(seconds)["median"],
        "losses": [first["loss"]] + [r["loss"] for r in runs],
        "peakRssMiB": peak_rss_mib(),
    }
    if device.startswith("cuda"):
        out["peakDeviceMiB"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def decode(plan, device):
    model = Llama.random(plan["config"], seed=1, device=device)
    runs = []
    for run in plan["runs"]:
        g = torch.Generator().manual_seed(80)
        prompts = random_ids(g, (run["rows"], run["prompt"]), plan["config"]["vocab_size"])
        model.decode(prompts, 2)  # warm-up
        r = model.decode(prompts, run["tokens"])
        runs.append({**run, "seconds": r["seconds"], "tokensPerSecond": run["rows"] * run["tokens"] / r["seconds"]})
    return {"runs": runs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("SEEDFLOW_THREADS", "2")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tf32 = os.environ.get("NVIDIA_TF32_OVERRIDE") != "0"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    with open(args.plan) as f:
        plan = json.load(f)
    report = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "torch": torch.__version__,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "tf32": tf32,
        "steps": {},
    }

    def record(name, fn):
        started = time.perf_counter()
        print(f"gpu-torch: {name} ...", flush=True)
        try:
            report["steps"][name] = {**fn(), "wallSeconds": time.perf_counter() - started}
        except Exception as e:  # a step that fails (out of memory) is reported, and the next one runs
            report["steps"][name] = {"error": f"{type(e).__name__}: {e}"}
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
        print(f"gpu-torch: {name}: {json.dumps(report['steps'][name])[:300]}", flush=True)

    for shape in plan["train"]:
        record(f"train: {shape['name']}", lambda shape=shape: train(shape, args.device))
    record("decode", lambda: decode(plan["decode"], args.device))


if __name__ == "__main__":
    main()
