#!/usr/bin/env python3
"""text-game: a tiny key-and-door game over seedflow's AgentGym-style HTTP protocol (routes: README.md).
Standard library only (Python 3.11). Run:  python3 server.py --port 8766 [--host 127.0.0.1]
Copy this file and edit the GAME part to make your own environment; the PROTOCOL part can stay as it is.
Deliberately there is NO /prompt and NO /trajectory route (both are seedflow extensions): seedflow renders the
prompt from the observation itself and records the trajectory on its own side."""
import argparse, json, random, re, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

NAME, VERSION, MAX_STEPS = "text-game", "1.0.0", 12
SPLITS = ("train", "validation", "test-seen", "test-unseen")

# ------------------------------------------------------------------ GAME: edit from here to make your own game
ROOMS = 4  # a row of rooms 1..4: the expert needs at most 3 + 1 + 3 + 1 = 8 moves
class Game:
    """One episode: walk to the key, take it, walk to the locked door, open it. Same (split, seed), same task."""

    def __init__(self, split, seed):
        rng = random.Random(f"{split}:{seed}")
        self.split, self.seed = split, seed
        self.door = rng.choice([1, ROOMS])  # the door is at one end of the row
        self.key, self.pos = rng.randint(1, ROOMS), rng.randint(1, ROOMS)
        self.has_key, self.won, self.steps = False, False, 0
    @property
    def done(self):
        return self.won or self.steps >= MAX_STEPS
    def where(self, room, thing):
        """Where a thing is, relative to the player: what the policy acts on."""
        d = room - self.pos
        if d == 0: return f"The {thing} is here."
        return f"The {thing} is {abs(d)} room{'s' if abs(d) > 1 else ''} to your {'right' if d > 0 else 'left'}."
    def observation(self):
        """The whole state in one short text (at most about 130 characters)."""
        if self.won: return "You open the door and step outside. You won!"
        text = [f"You are in room {self.pos} of {ROOMS}.",
                "You hold the key." if self.has_key else self.where(self.key, "key"),
                self.where(self.door, "locked door"), f"Actions: {', '.join(self.actions())}."]
        return " ".join(text + (["You are out of moves."] if self.done else []))
    def actions(self):
        """The admissible actions now."""
        return ((["left"] if self.pos > 1 else []) + (["right"] if self.pos < ROOMS else [])
                + (["take key"] if not self.has_key and self.pos == self.key else [])
                + (["open door"] if self.has_key and self.pos == self.door else []))
    def play(self, action):
        """Applies an admissible action (None: an unusable reply, a lost move); returns the reward, 1.0 on a win."""
        self.steps += 1
        self.pos += {"left": -1, "right": 1}.get(action, 0)
        self.has_key = self.has_key or action == "take key"
        self.won = action == "open door"
        return 1.0 if self.won else 0.0
    def expert(self):
        """The expert's next action, and its sub-goal in a few words."""
        goal, last, thought = ((self.door, "open door", "open the door") if self.has_key
                               else (self.key, "take key", "get the key"))
        if goal == self.pos: return last, thought
        return ("right" if goal > self.pos else "left"), thought

def oracle(traj):
    """A hindsight skill for a finished trajectory (seedflow's Trajectory JSON): the rule and this task's moves."""
    task, steps, info = traj.get("task"), traj.get("steps"), traj.get("info")
    if not isinstance(task, dict) or not isinstance(steps, list): raise Bad(400, "trajectory needs task and steps")
    game, moves = Game(*task_of(task, "train", 0)), []
    while not game.done:  # replay the expert on a fresh copy of the task
        moves.append(game.expert()[0])
        game.play(moves[-1])
    won = isinstance(info, dict) and info.get("won") is True
    invalid = sum(isinstance(s, dict) and s.get("valid") is False for s in steps)
    summary = (f"{'Won' if won else 'Did not win'} in {len(steps)} steps ({invalid} unusable replies); "
               f"the shortest solution is {len(moves)} moves: {', '.join(moves)}.")
    skill = ("Walk toward the key until it is here, take key, then walk toward the locked door until it is here "
             f"and open door; always answer one admissible action in <action></action>. Here: {', '.join(moves)}.")
    return {"episode_summary": summary, "episode_skill": skill, "entities": ["key", "locked door"]}

# ------------------------------------------------------------------ PROTOCOL: usually left as it is
EPISODES, LOCK, MAX_OPEN, MAX_BODY = {}, threading.Lock(), 1024, 1 << 20
NEXT_ID = iter(range(2**53))  # episode ids 0, 1, 2, ...

class Bad(Exception):
    """Bad(status, message): a refused request, answered as {"error": message} with that HTTP status."""

def as_int(x, what):
    """A non-negative integer written as a JSON number; "3", true, 3.5 and -1 are refused, never coerced."""
    if type(x) is float and x.is_integer(): x = int(x)  # JSON's 3.0 is the number 3, as in JavaScript
    if type(x) is not int or not 0 <= x < 2**53:
        raise Bad(400, f"{what} must be a non-negative integer written as a JSON number, got {json.dumps(x)}")
    return x

def task_of(body, split, seed):
    """(split, seed) from a body; AgentGym's clients send data_idx, read as the seed when seed is absent."""
    split = body["split"] if body.get("split") is not None else split
    seed = next((body[k] for k in ("seed", "data_idx") if body.get(k) is not None), seed)
    if split not in SPLITS: raise Bad(400, f"unknown split {json.dumps(split)}; one of {', '.join(SPLITS)}")
    return split, as_int(seed, "seed")

def episode(raw_id):
    """(id, game) of an open episode; 400 for a badly written id, 404 for an unknown or closed one."""
    game = EPISODES.get(as_int(raw_id, "id"))
    if game is None: raise Bad(404, f"no episode with id {raw_id}: unknown or closed")
    return as_int(raw_id, "id"), game
def query_episode(query):
    ids = query.get("id", [])
    if len(ids) != 1 or not re.fullmatch(r"0|[1-9][0-9]*", ids[0]):
        raise Bad(400, f"?id= must be one non-negative integer in plain decimal, got {ids}")
    return episode(int(ids[0]))[1]

def parse(text):
    """The last <action>...</action> of the model's whole output: (action, None) or (None, why not)."""
    low = text.lower()
    end = low.rfind("</action>")
    start = low.rfind("<action>", 0, max(end, 0))
    if end < 0 or start < 0: return None, "missing <action>...</action>"
    action = " ".join(low[start + len("<action>"):end].split())
    return (action, None) if action else (None, "empty <action>")
def step_reply(game, reward=0.0, action=None, reason=None):
    obs, won = game.observation(), game.won
    info = {"won": won, "score": float(won), "family": NAME, "valid": reason is None, "action": action}
    info.update({} if reason is None else {"reason": reason})
    return {"observation": obs, "state": obs, "reward": reward, "done": game.done, "info": info}

# ---- the routes: each takes the JSON body (POST) or the parsed query (GET) and returns the reply's JSON
def create(body):
    if len(EPISODES) >= MAX_OPEN: raise Bad(429, f"{MAX_OPEN} episodes open; close finished ones with /close")
    game, new_id = Game(*task_of(body, "train", 0)), next(NEXT_ID)
    EPISODES[new_id] = game  # created already reset to its task
    return {"id": new_id}
def reset(body):
    ep_id, old = episode(body.get("id"))  # without split/seed/data_idx: restarts the task /create named
    EPISODES[ep_id] = game = Game(*task_of(body, old.split, old.seed))
    return step_reply(game)
def step(body):
    ep_id, game = episode(body.get("id"))
    if not isinstance(body.get("action"), str): raise Bad(400, "action must be a string: the model's whole output")
    if game.done: raise Bad(409, f"episode {ep_id} has ended after {game.steps} steps")
    action, reason = parse(body["action"])
    if action is not None and action not in game.actions():
        action, reason = None, f"{action[:40]!r} is not admissible now; admissible: {', '.join(game.actions())}"
    # an unusable output is a step like any other (play(None)): counted, no reward, the episode goes on
    return step_reply(game, game.play(action), action, reason)
def expert_action(query):  # optional route: the expert's demonstrations for the warm start
    game = query_episode(query)
    if game.done: raise Bad(409, "the episode has ended")
    action, thought = game.expert()
    return {"action": action, "thought": thought}
def close(body):
    del EPISODES[episode(body.get("id"))[0]]
    return {"closed": True}

ROUTES = {
    ("GET", "/info"): lambda q: {"name": NAME, "version": VERSION, "max_steps": MAX_STEPS,
                                 "routes": ["expert_action", "oracle"]},  # the optional routes served here
    ("POST", "/create"): create, ("POST", "/reset"): reset, ("POST", "/step"): step, ("POST", "/close"): close,
    ("GET", "/observation"): lambda q: {"observation": query_episode(q).observation()},
    ("GET", "/available_actions"): lambda q: {"available_actions": query_episode(q).actions()},
    ("GET", "/expert_action"): expert_action,
    ("POST", "/oracle"): lambda b: oracle(b["trajectory"] if isinstance(b.get("trajectory"), dict) else {}),
}

class Handler(BaseHTTPRequestHandler):
    """One request per connection (HTTP/1.0, the default): simple, and fast enough on loopback."""
    do_GET, do_POST = (lambda self: self.answer("GET")), (lambda self: self.answer("POST"))
    log_message = lambda self, *args: None  # quiet: a line per request would drown the output
    def body(self):
        try:
            size = int(self.headers.get("Content-Length") or 0)
            if not 0 <= size <= MAX_BODY: raise Bad(413, f"Content-Length {size}: at most {MAX_BODY} bytes")
            value = json.loads(self.rfile.read(size) or b"{}")
        except ValueError as e:  # a Content-Length that is no number, or a body that is not JSON
            raise Bad(400, f"bad request body: {e}")
        if not isinstance(value, dict): raise Bad(400, "body is not a JSON object")
        return value

    def answer(self, method):
        url = urlsplit(self.path)
        try:
            arg = self.body() if method == "POST" else parse_qs(url.query, keep_blank_values=True)
            if (method, url.path) not in ROUTES: raise Bad(404, f"no route {method} {url.path}")
            with LOCK:  # one request at a time touches the episodes
                status, reply = 200, ROUTES[method, url.path](arg)
        except Bad as e:
            status, reply = e.args[0], {"error": e.args[1]}
        except Exception as e:  # a bug in the game: say so rather than drop the connection
            status, reply = 500, {"error": f"server error: {e!r}"}
        data = json.dumps(reply).encode()
        self.send_response(status)
        for header, value in (("Content-Type", "application/json"), ("Content-Length", str(len(data)))):
            self.send_header(header, value)
        self.end_headers()
        self.wfile.write(data)

if __name__ == "__main__":
    cli = argparse.ArgumentParser(description="text-game over the AgentGym-style HTTP protocol")
    cli.add_argument("--port", type=int, required=True)
    cli.add_argument("--host", default="127.0.0.1")
    args = cli.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try: server.serve_forever()
    except KeyboardInterrupt: pass  # Ctrl-C; SIGTERM ends the process outright, which is fine too
