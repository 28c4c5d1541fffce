"""TensorBoard's own event-file writer and reader, to check exports/tensorboard/ against.

Not part of CI. Needs the venv of bench/compare/make-tensorboard-venv.sh (tensorboard 2.21.0).
    PY=$HOME/.cache/seedflow/venv-tensorboard/bin/python
    $PY bench/compare/tensorboard_fixture.py          # writes test/fixtures/tensorboard/scalars.{tfevents,json}
    $PY bench/compare/tensorboard_fixture.py --read DIR   # prints every scalar of the event files in DIR

The fixture is written with tensorboard's RecordWriter and its Event/Summary protos. EventFileWriter is not used:
it stamps time.time() on the file-version event and names the file after the pid; here every byte is fixed.
"""

import argparse
import json
import os
import sys

import tensorboard
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

FIXTURE_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "test", "fixtures", "tensorboard"))
FILE_VERSION_WALL_TIME = 1767225600.375

# (tag, values for steps 0..3): negatives, small fractions, a zero (a set oneof member is written even when 0),
# values float32 cannot hold exactly.
SERIES = [
    ("rollout/success_rate", [0.0, 0.125, 0.3333333333333333, 0.8]),
    ("update/pg_loss", [-0.0123, 0.0456789, -1.5e-07, -2.75]),
    ("eval/test-seen", [0.1, 0.2, 0.30000000000000004, 1.0]),
    ("timing/update_s", [12.5, 1234.0625, 3.0e-05, 98765.4321]),
]


def fixture_scalars():
    """Step-major order, as a training loop logs them; each point 0.25 s after the last, steps 37.5 s apart."""
    scalars = []
    for step in range(4):
        for k, (tag, values) in enumerate(SERIES):
            wall_time = FILE_VERSION_WALL_TIME + 1.5 + 37.5 * step + 0.25 * k + 0.001 * step
            scalars.append({"tag": tag, "step": step, "wallTime": wall_time, "value": values[step]})
    return scalars


def write_fixture():
    os.makedirs(FIXTURE_DIR, exist_ok=True)
    scalars = fixture_scalars()
    events = [Event(wall_time=FILE_VERSION_WALL_TIME, step=0, file_version="brain.Event:2")]
    for p in scalars:
        value = Summary.Value(tag=p["tag"], simple_value=p["value"])
        events.append(Event(wall_time=p["wallTime"], step=p["step"], summary=Summary(value=[value])))
    path = os.path.join(FIXTURE_DIR, "scalars.tfevents")
    writer = RecordWriter(open(path, "wb"))
    for event in events:
        writer.write(event.SerializeToString())
    writer.close()
    meta = {
        "writer": f"bench/compare/tensorboard_fixture.py, tensorboard {tensorboard.__version__}",
        "fileVersionWallTime": FILE_VERSION_WALL_TIME,
        "scalars": scalars,
    }
    with open(os.path.join(FIXTURE_DIR, "scalars.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(events)} events)")


def read_dir(logdir):
    """Reads DIR as TensorBoard does (EventAccumulator, orphan purge on), keeping every scalar instead of sampling."""
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()[event_accumulator.SCALARS]
    files = sorted(f for f in os.listdir(logdir) if "tfevents" in f)
    print(f"tensorboard {tensorboard.__version__}: {len(files)} event file(s) in {logdir}: {', '.join(files) or '-'}")
    print(f"file_version {acc.file_version!r}")
    count = 0
    for tag in sorted(tags):
        for s in acc.Scalars(tag):
            print(f"{tag}\tstep {s.step}\twall_time {s.wall_time!r}\tvalue {s.value!r}")
            count += 1
    print(f"{len(tags)} tags, {count} scalars")
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--read", metavar="DIR", help="print the scalars of the event files in DIR")
    args = parser.parse_args()
    if args.read is None:
        write_fixture()
    elif read_dir(args.read) == 0:
        print(f"no scalars read from {args.read}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
