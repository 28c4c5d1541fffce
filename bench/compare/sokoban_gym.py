"""Replays our Sokoban rooms and action sequences in gym-sokoban and compares rewards, done flags and states.

Not part of CI. Needs `pip install gym-sokoban numpy` (gym-sokoban 0.0.6 pulls gym 0.26).
    node --import tsx bench/compare/sokoban-cases.ts > /tmp/sokoban-cases.json
    python bench/compare/sokoban_gym.py /tmp/sokoban-cases.json
"""

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
from gym_sokoban.envs.sokoban_env import SokobanEnv  # noqa: E402


def replay(case):
    env = SokobanEnv(dim_room=(6, 6), max_steps=15, num_boxes=1, reset=False)
    env.room_fixed = np.array(case["fixed"])
    env.room_state = np.array(case["initial"])
    env.player_position = np.argwhere(env.room_state == 5)[0]
    env.num_env_steps = 0
    env.reward_last = 0
    env.boxes_on_target = int((env.room_state == 3).sum())
    mismatches = []
    for k, step in enumerate(case["steps"]):
        _, reward, done, _ = env.step(step["action"], observation_mode="tiny_rgb_array")
        state = env.room_state.tolist()
        if abs(reward - step["reward"]) > 1e-9:
            mismatches.append(f"step {k}: reward gym {reward} ours {step['reward']}")
        if state != step["state"]:
            mismatches.append(f"step {k}: state differs")
        # Ours ends only when solved here; the step cap is the episode's, checked separately.
        solved = bool(env._check_if_all_boxes_on_target())
        if solved != step["done"]:
            mismatches.append(f"step {k}: solved gym {solved} ours {step['done']}")
    return mismatches


def main():
    cases = json.load(open(sys.argv[1]))
    steps = sum(len(c["steps"]) for c in cases)
    bad = [(c["seed"], m) for c in cases for m in replay(c)]
    print(f"gym-sokoban comparison: {len(cases)} rooms, {steps} steps, {len(bad)} mismatches")
    for seed, m in bad[:20]:
        print(f"  seed {seed}: {m}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
