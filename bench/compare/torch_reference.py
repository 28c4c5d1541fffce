"""PyTorch side of `npm run bench:engine -- --compare torch` (bench/engine-compare.ts).

A long-lived worker speaking JSON lines on stdin/stdout, so the TypeScript driver can interleave its runs with
seedflow's. Its model is a plain-torch Llama/Qwen2 forward (RMSNorm, rotary, GQA through
F.scaled_dot_product_attention, SwiGLU) over the Hugging Face weights of a checkpoint folder, float32,
`torch.set_num_threads` threads; decoding uses a preallocated KV cache updated in place and greedy argmax.

Commands (one JSON object a line; the reply is one JSON object a line, `error` on failure):
  {"cmd": "load", "folder": "..."}
  {"cmd": "train", "ids": [[...]], "optimizer": false}   -> seconds, loss, logp_sum, grad_norm
  {"cmd": "decode", "prompts": [[...]], "new_tokens": N} -> seconds, tokens
  {"cmd": "rss"}                                         -> peak RSS of this process (MiB)

`python torch_reference.py --self-test FOLDER` checks this model's logits and greedy tokens against transformers.
"""

import json
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

torch.set_num_threads(int(os.environ.get("SEEDFLOW_THREADS", "2")))


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class Llama:
    def __init__(self, cfg, weights, device="cpu"):
        self.device = torch.device(device)
        self.C = cfg["hidden_size"]
        self.H = cfg["num_attention_heads"]
        self.KV = cfg.get("num_key_value_heads", self.H)
        self.D = cfg.get("head_dim") or self.C // self.H
        self.L = cfg["num_hidden_layers"]
        self.V = cfg["vocab_size"]
        self.eps = cfg["rms_norm_eps"]
        self.w = {k: v.float().contiguous().to(self.device) for k, v in weights.items()}
        if "lm_head.weight" not in self.w:
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]  # tied: one tensor, one gradient
        theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
        inv = 1.0 / (theta ** (torch.arange(0, self.D, 2, dtype=torch.float64) / self.D))
        freqs = torch.outer(torch.arange(cfg.get("max_position_embeddings", 4096), dtype=torch.float64), inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos, self.sin = emb.cos().float().to(self.device), emb.sin().float().to(self.device)
        self.params = list({id(v): v for v in self.w.values()}.values())
        self.lora = {}  # "<layer prefix><module>" -> (A (r, in), B (out, r), scale)
        self.optimizer = None

    @classmethod
    def from_folder(cls, folder, device="cpu"):
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        return cls(cfg, load_file(os.path.join(folder, "model.safetensors")), device)

    @classmethod
    def random(cls, cfg, seed=1, device="cpu"):
        """Random weights of a Hugging Face config's shape, made in this process (N(0, 0.02), norms 1)."""
        g = torch.Generator().manual_seed(seed)
        C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
        H, KV = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        D = cfg.get("head_dim") or C // H
        shapes = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
        if not cfg.get("tie_word_embeddings", True):
            shapes["lm_head.weight"] = (V, C)
        for l in range(cfg["num_hidden_layers"]):
            pre = f"model.layers.{l}."
            a = pre + "self_attn."
            shapes.update({
                pre + "input_layernorm.weight": (C,),
                pre + "post_attention_layernorm.weight": (C,),
                a + "q_proj.weight": (H * D, C),
                a + "k_proj.weight": (KV * D, C),
                a + "v_proj.weight": (KV * D, C),
                a + "o_proj.weight": (C, H * D),
                pre + "mlp.gate_proj.weight": (I, C),
                pre + "mlp.up_proj.weight": (I, C),
                pre + "mlp.down_proj.weight": (C, I),
            })
            if cfg.get("qkv_bias", False):
                shapes.update({a + "q_proj.bias": (H * D,), a + "k_proj.bias": (KV * D,), a + "v_proj.bias": (KV * D,)})
        weights = {}
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                weights[name] = torch.ones(shape)
            else:
                weights[name] = torch.randn(shape, generator=g) * 0.02
        return cls(cfg, weights, device)

    def add_lora(self, rank, alpha, targets=LORA_TARGETS, seed=2):
        """LoRA adapters on `targets` (PEFT's shapes and init: A random, B zero); they become the trained tensors."""
        g = torch.Generator().manual_seed(seed)
        self.params = []
        for l in range(self.L):
            for t in targets:
                module = f"model.layers.{l}.{'mlp' if t in ('gate_proj', 'up_proj', 'down_proj') else 'self_attn'}.{t}"
                out_dim, in_dim = self.w[module + ".weight"].shape
                A = (torch.randn(rank, in_dim, generator=g) / in_dim**0.5).to(self.device)
                B = torch.zeros(out_dim, rank, device=self.device)
                self.lora[module] = (A, B, alpha / rank)
                self.params += [A, B]
        self.optimizer = None

    def linear(self, h, module):
        """The projection `module` (…q_proj) of h, with its adapter when it has one."""
        y = F.linear(h, self.w[module + ".weight"], self.w.get(module + ".bias"))
        adapter = self.lora.get(module)
        if adapter is not None:
            A, B, scale = adapter
            y = y + scale * F.linear(F.linear(h, A), B)
        return y

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def rope(self, x, cos, sin):  # x (B, H, T, D)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def hidden(self, ids, start=0, cache=None):
        B, T = ids.shape
        x = F.embedding(ids, self.w["model.embed_tokens.weight"])  # (B, T, C)
        cos = self.cos[start : start + T][None, None]
        sin = self.sin[start : start + T][None, None]
        for l in range(self.L):
            pre = f"model.layers.{l}."
            h = F.rms_norm(x, (self.C,), self.w[pre + "input_layernorm.weight"], self.eps)
            a = pre + "self_attn."
            q = self.linear(h, a + "q_proj")
            k = self.linear(h, a + "k_proj")
            v = self.linear(h, a + "v_proj")
            q = self.rope(q.view(B, T, self.H, self.D).transpose(1, 2), cos, sin)  # (B, H, T, D)
            k = self.rope(k.view(B, T, self.KV, self.D).transpose(1, 2), cos, sin)  # (B, KV, T, D)
            v = v.view(B, T, self.KV, self.D).transpose(1, 2)
            if cache is not None:
                kc, vc = cache[l]  # (B, KV, S, D), written in place
                kc[:, :, start : start + T] = k
                vc[:, :, start : start + T] = v
                k, v = kc[:, :, : start + T], vc[:, :, : start + T]
            # a single query attends to every filled slot; a prompt from slot 0 is causal
            att = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, enable_gqa=self.KV != self.H)
            x = x + self.linear(att.transpose(1, 2).reshape(B, T, self.H * self.D), a + "o_proj")
            h = F.rms_norm(x, (self.C,), self.w[pre + "post_attention_layernorm.weight"], self.eps)
            m = pre + "mlp."
            gate = F.silu(self.linear(h, m + "gate_proj")) * self.linear(h, m + "up_proj")
            x = x + self.linear(gate, m + "down_proj")
        return F.rms_norm(x, (self.C,), self.w["model.norm.weight"], self.eps)

    def logits(self, hidden):
        return F.linear(hidden, self.w["lm_head.weight"])

    def train(self, ids, with_optimizer):
        """Loss (mean NLL of every next token), per-token log-probs and every gradient; AdamW after clipping."""
        for p in self.params:
            p.requires_grad_(True)
            p.grad = None
        ids = ids.to(self.device)
        self.sync()
        started = time.perf_counter()
        logits = self.logits(self.hidden(ids[:, :-1]))  # (B, T-1, V)
        nll = F.cross_entropy(logits.reshape(-1, self.V), ids[:, 1:].reshape(-1), reduction="none")
        loss = nll.mean()
        loss.backward()
        logp_sum = -nll.detach().sum().item()
        if with_optimizer:
            if self.optimizer is None:
                self.optimizer = make_adamw(self.params)
            norm = torch.nn.utils.clip_grad_norm_(self.params, 1.0).item()
            self.optimizer.step()
        else:
            norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in self.params])).item()
        self.sync()
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "loss": loss.item(), "logp_sum": logp_sum, "grad_norm": norm}

    @torch.inference_mode()
    def decode(self, prompts, new_tokens):
        """Greedy tokens: one prefill of the (equal-length) prompts, then one step per token over a static cache."""
        self.sync()
        started = time.perf_counter()
        ids = torch.tensor(prompts, dtype=torch.long, device=self.device)
        B, P = ids.shape
        S = P + new_tokens
        cache = [
            (torch.empty(B, self.KV, S, self.D, device=self.device), torch.empty(B, self.KV, S, self.D, device=self.device))
            for _ in range(self.L)
        ]
        h = self.hidden(ids, 0, cache)
        token = self.logits(h[:, -1]).argmax(-1)  # (B,)
        out = torch.empty(B, new_tokens, dtype=torch.long, device=self.device)
        out[:, 0] = token
        for i in range(1, new_tokens):
            h = self.hidden(token[:, None], P + i - 1, cache)
            token = self.logits(h[:, -1]).argmax(-1)
            out[:, i] = token
        self.sync()
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "tokens": out.tolist()}


def make_adamw(params):
    # seedflow's AdamW: betas (0.9, 0.999), eps 1e-8, weight decay 0.01 on every tensor, lr 1e-4 here
    try:
        return torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=True)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def serve():
    model = None
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        try:
            cmd = msg["cmd"]
            if cmd == "load":
                model = Llama.from_folder(msg["folder"])
                reply = {"ok": True, "threads": torch.get_num_threads(), "torch": torch.__version__}
            elif cmd == "train":
                reply = model.train(torch.tensor(msg["ids"], dtype=torch.long), msg.get("optimizer", False))
            elif cmd == "decode":
                reply = model.decode(msg["prompts"], msg["new_tokens"])
            elif cmd == "rss":
                reply = {"peak_rss_mib": peak_rss_mib()}
            else:
                reply = {"error": f"unknown command {cmd!r}"}
        except Exception as e:  # reported to the driver, which stops the benchmark
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def self_test(folder):
    from transformers import AutoModelForCausalLM

    ours = Llama.from_folder(folder)
    ref = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, ours.V, (2, 33), generator=g)
    with torch.no_grad():
        a = ours.logits(ours.hidden(ids))
        b = ref(ids).logits
        diff = (a - b).abs().max().item()
        print(f"logits vs transformers: max |diff| {diff:.2e} (max |logit| {b.abs().max().item():.1f})")
        full = ref.generate(ids[:, :17], max_new_tokens=16, do_sample=False, min_new_tokens=16)[:, 17:]
    tokens = torch.tensor(ours.decode(ids[:, :17].tolist(), 16)["tokens"])
    same = bool((tokens == full).all())
    print(f"greedy tokens vs transformers generate: {'identical' if same else 'DIFFERENT'}")
    return diff < 1e-3 * max(1.0, b.abs().max().item()) and same


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--self-test":
        sys.exit(0 if self_test(sys.argv[2]) else 1)
    serve()
