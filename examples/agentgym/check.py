#!/usr/bin/env python3
"""Replays the HTTP requests AgentGym's own environment clients send against a seedflow environment server, and
checks that every reply field each client reads is there, with the type it expects.

AgentGym's client package `agentenv` is not on PyPI in usable form (README.md here says why), so this script
does not import it: it sends the same requests itself, with urllib, as read from AgentGym's source at commit
3ef9235d23e68e7c2920c5422ad957dc8ced5c6c (github.com/WooooDyy/AgentGym, agentenv/agentenv/envs/*.py).

    python3 examples/agentgym/check.py                  # starts `seedflow env serve sokoban` itself, stops it by PID
    python3 examples/agentgym/check.py --base http://127.0.0.1:8765   # a server that is already running
    python3 examples/agentgym/check.py --strict         # also fail when an AgentGym client would break

Exit status: 0 when the AgentGym-compatible core seedflow promises holds (docs/environment-protocol.md: `/create`,
`/reset` with `data_idx`, `state`, `/observation`, `/available_actions`, `/close`); with --strict, also every client
profile below must get through. Standard library only.
"""
import argparse
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

NUM = "number"  # an int or a float, not a bool (Python's json reads both 0 and 0.0; the clients do arithmetic)

# How each AgentGym client talks to its server (agentenv/agentenv/envs/<file> at the commit above):
#   key     the body field and query parameter that carries the episode id ("id" or "env_idx")
#   create  the /create body (None: no body) and what the client reads from the reply (a bare int for some)
#   reset   the /reset body for task index k, and the reply fields read
#   get     GET routes called after reset (observe() or __init__), with what is read from the reply
#   action  "bare": the client parses the model output itself and sends only the action ("up");
#           "whole": it sends the model's whole output, as seedflow's server expects
#   step    the step reply fields read;  close: whether the client has close() (POST /close)
PROFILES = [
    dict(name="BabyAIEnvClient", file="babyai.py", key="id", create=(None, {"id": int}),
         reset=(lambda k: {"data_idx": k}, {"observation": str, "reward": NUM, "score": NUM, "done": bool}),
         get=[], action="bare", step={"observation": str, "reward": NUM, "score": NUM, "done": bool}, close=True),
    dict(name="SciworldEnvClient", file="sciworld.py", key="id", create=(None, {"id": int}),
         reset=(lambda k: {"data_idx": k}, {"task_description": str, "observation": str}),
         get=[], action="bare", step={"observation": str, "reward": NUM, "score": NUM, "done": bool}, close=True),
    dict(name="TextCraftEnvClient", file="textcraft.py", key="id",
         create=({"minecraft_dir": "agentenv_textcraft/", "commands": None, "goal": None},
                 {"id": int, "observation": str}),
         reset=(lambda k: {"data_idx": k}, {"observation": str}),
         get=[], action="bare", step={"observation": str, "reward": NUM, "done": bool}, close=True),
    dict(name="MazeEnvClient", file="lmrlgym.py", key="id", create=(None, {"id": int}),
         reset=(lambda k: {"game": k}, {"observation": str}),
         get=[], action="bare", step={"observation": str, "reward": NUM, "done": bool}, close=False),
    dict(name="WordleEnvClient", file="lmrlgym.py", key="id", create=(None, {"id": int}),
         reset=(lambda k: {"seed": k}, {}),
         get=[("filtered_vocab", list)], action="bare", step={"observation": str, "reward": NUM, "done": bool},
         close=False),
    dict(name="AlfWorldEnvClient", file="alfworld.py", key="id", create=(None, {"id": int}),
         reset=(lambda k: {"game": k, "world_type": "Text"}, {"observation": str, "available_actions": list}),
         get=[], action="bare",
         step={"observation": str, "available_actions": list, "reward": NUM, "done": bool}, close=True),
    dict(name="WebshopEnvClient", file="webshop.py", key="env_idx", create=(None, int),
         reset=(lambda k: {"session_id": k}, {}),
         get=[("observation", str)], action="bare", step={"state": str, "reward": NUM, "done": bool}, close=True),
    dict(name="SqlGymEnvClient", file="sqlgym.py", key="env_idx", create=(None, int),
         reset=(lambda k: {"item_id": k}, {}),
         get=[("observation", None)], action="bare", step={"state": str, "reward": NUM, "done": bool}, close=False),
    dict(name="SearchQAEnvClient / WeatherEnvClient", file="searchqa.py, weather.py", key="env_idx",
         create=({"id": 0}, int), reset=(lambda k: {"id": k}, {}),
         get=[("observation", None)], action="whole", step={"observation": str, "reward": NUM, "done": bool},
         close=True),
]


def call(base, method, path, body=None):
    """One request as `requests` sends it (json= sets Content-Type; no body: Content-Length 0): (status, JSON)."""
    data = b"" if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data if method == "POST" else None, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


def typed(value, kind):
    if kind is None:
        return True
    if kind == NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def read(what, status, reply, fields):
    """The client's checks on a reply (status 200, then each field it reads, with its type): what fails them."""
    if status != 200:
        return [f"{what}: HTTP {status} {json.dumps(reply)[:150]} (the client asserts status 200)"]
    if not isinstance(fields, dict):  # the reply itself is the value (a bare id, a bare observation)
        if typed(reply, fields):
            return []
        return [f"{what}: the client uses the reply itself as {getattr(fields, '__name__', fields)}, "
                f"got {json.dumps(reply)[:80]}"]
    if not isinstance(reply, dict):
        return [f"{what}: the client reads fields {sorted(fields)} of a {type(reply).__name__}"]
    missing = [f for f in fields if f not in reply]
    wrong = [f for f in fields if f in reply and not typed(reply[f], fields[f])]
    return ([f"{what}: no field {', '.join(map(repr, missing))} in the reply (KeyError in the client); "
             f"it has {sorted(reply)}"] if missing else []) + [
        f"{what}: field {f!r} is {json.dumps(reply[f])[:60]}, not {fields[f]}" for f in wrong]


def replay(base, p, k=3):
    """One episode as the client plays it: create, reset(k), its GETs, two steps, close.
    Returns (problems: where the client would break, first first; notes: what goes wrong without an error)."""
    problems, notes = [], []
    status, reply = call(base, "POST", "/create", p["create"][0])
    problems += read("POST /create", status, reply, p["create"][1])
    episode = reply if isinstance(reply, int) else reply.get("id") if isinstance(reply, dict) else None
    if not isinstance(episode, int):
        return problems, notes
    key = p["key"]  # from here on: the id as the client sends it, even where the client holds a dict instead
    status, reply = call(base, "POST", "/reset", {**p["reset"][0](k), key: episode})
    problems += read(f"POST /reset {json.dumps({**p['reset'][0](k), key: episode})}", status, reply, p["reset"][1])
    if status == 200 and isinstance(reply.get("observation"), str):
        status2, same = call(base, "POST", "/reset", {"id": episode, "split": "test-seen", "seed": k})
        if status2 == 200 and same.get("observation") != reply["observation"]:
            notes.append(f"/reset ignored {sorted(p['reset'][0](k))}: the task is not index {k} "
                         "(seedflow reads seed, or data_idx)")
    for route, kind in p["get"]:
        status, reply = call(base, "GET", f"/{route}?{key}={episode}")
        problems += read(f"GET /{route}?{key}=", status, reply, kind)
    for _ in range(2):
        status, expert = call(base, "GET", f"/expert_action?id={episode}")
        move = expert["action"] if status == 200 else "up"
        action = move if p["action"] == "bare" else f"<think>x</think>\n<action>{move}</action>"
        status, reply = call(base, "POST", "/step", {"action": action, key: episode})
        problems += read(f"POST /step {json.dumps({'action': action, key: episode})}", status, reply, p["step"])
        info = reply.get("info") if isinstance(reply, dict) else None
        if isinstance(info, dict) and info.get("valid") is False and not any("understood" in n for n in notes):
            notes.append(f"the bare action {action!r} was not understood (info.reason: {info.get('reason')}): "
                         "seedflow's server parses the model's whole output")
    if p["close"]:
        status, reply = call(base, "POST", "/close", {key: episode})
        problems += read(f"POST /close {json.dumps({key: episode})}", status, reply, None)
    return list(dict.fromkeys(problems)), notes


def core(base):
    """What docs/environment-protocol.md promises AgentGym's clients; each failure is a line of text."""
    failures = []

    def need(ok, what):
        if not ok:
            failures.append(what)
    status, created = call(base, "POST", "/create")  # no body, as AgentGym's clients send it
    need(status == 200 and typed(created.get("id"), int), f"POST /create without a body: {status} {created}")
    ep = created.get("id")
    status, a = call(base, "POST", "/reset", {"id": ep, "data_idx": 5})
    status_b, b = call(base, "POST", "/reset", {"id": ep, "seed": 5})
    need(status == 200 and status_b == 200 and a.get("observation") == b.get("observation"),
         "POST /reset reads data_idx as the seed")
    need(a.get("state") == a.get("observation") and typed(a.get("reward"), NUM) and typed(a.get("done"), bool),
         f"the reset reply has state (= observation), reward and done: {sorted(a)}")
    status, obs = call(base, "GET", f"/observation?id={ep}")
    need(status == 200 and obs.get("observation") == a.get("observation"), "GET /observation?id= → {observation}")
    status, acts = call(base, "GET", f"/available_actions?id={ep}")
    need(status == 200 and "available_actions" in acts, "GET /available_actions?id= → {available_actions}")
    # the adapted client: a subclass that wraps its parsed action in <action>...</action> and reads info.score
    total, steps, reply = 0.0, 0, {"done": False}
    while not reply.get("done") and steps < 100:
        _, expert = call(base, "GET", f"/expert_action?id={ep}")
        status, reply = call(base, "POST", "/step", {"id": ep, "action": f"<action>{expert['action']}</action>"})
        need(status == 200 and set(reply) >= {"observation", "state", "reward", "done"}, f"POST /step: {reply}")
        total, steps = total + reply.get("reward", 0), steps + 1
    need(reply.get("info", {}).get("won") is True, "the expert's moves, wrapped in <action>, win the task")
    print(f"  adapted client: expert won data_idx 5 in {steps} steps; last step reward {reply.get('reward')}, "
          f"sum {total:.2f}, info.score {reply.get('info', {}).get('score')}")
    status, _ = call(base, "POST", "/close", {"id": ep})
    need(status == 200, "POST /close {id}")
    status, _ = call(base, "POST", "/step", {"id": ep, "action": "x"})
    need(status == 404, f"a step after /close answers 404, got {status}")
    return failures


def start_server(env, bare_actions=False):
    """`seedflow env serve <env> --port 0 [--bare-actions]` from the repository root; returns (process, base URL)."""
    root = Path(__file__).resolve().parents[2]
    extra = ["--bare-actions"] if bare_actions else []
    proc = subprocess.Popen(["node", "--import", "tsx", "cli/main.ts", "env", "serve", env, "--port", "0", *extra],
                            cwd=root, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "seedflow: serving sokoban at http://127.0.0.1:PORT (...)"
    url = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
    if not url:
        proc.kill()
        sys.exit(f"seedflow env serve did not start: {line!r}")
    return proc, url.group(1)


def main():
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--base", help="a running server's URL (default: start `seedflow env serve <env>`)")
    cli.add_argument("--env", default="sokoban", help="the environment to serve when --base is not given")
    cli.add_argument("--strict", action="store_true", help="fail when any AgentGym client profile breaks")
    cli.add_argument("--bare-actions", action="store_true",
                     help="start the server with --bare-actions (it takes the clients' parsed actions)")
    args = cli.parse_args()
    proc, base = (None, args.base.rstrip("/")) if args.base else start_server(args.env, args.bare_actions)
    try:
        print(f"seedflow server: {base}\ncore (docs/environment-protocol.md):")
        failures = core(base)
        for f in failures:
            print(f"  FAIL {f}")
        print(f"  {'ok' if not failures else f'{len(failures)} failed'}\nAgentGym clients (agentenv/agentenv/envs/):")
        broken = 0
        for p in PROFILES:
            problems, notes = replay(base, p)
            broken += bool(problems or notes)
            verdict = "BREAKS" if problems else "MISPLAYS" if notes else "works"
            print(f"  {verdict:8} {p['name']} ({p['file']})")
            for line in problems + [f"(no error) {n}" for n in notes]:
                print(f"           - {line}")
        print(f"{len(PROFILES) - broken} of {len(PROFILES)} AgentGym client profiles play seedflow's server unchanged")
        return 1 if failures or (args.strict and broken) else 0
    finally:
        if proc is not None:
            proc.terminate()  # our own child, by its PID
            proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
