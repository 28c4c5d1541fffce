#!/usr/bin/env bash
# Makes the Python environment of bench/compare/tensorboard_fixture.py from PyPI, outside the clone: TensorBoard's
# own event-file writer (for test/fixtures/tensorboard/) and reader (to read back what exports/tensorboard/ writes).
# Not used in CI: the unit tests compare against the committed fixture.
set -euo pipefail
VENV="${1:-$HOME/.cache/seedflow/venv-tensorboard}"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --upgrade pip
# pinned: the versions the committed fixture was written with (tensorboard pulls numpy, grpcio, werkzeug … itself)
"$VENV/bin/pip" install tensorboard==2.21.0 protobuf==7.36.2
"$VENV/bin/python" -c 'import tensorboard, google.protobuf as pb
print("tensorboard", tensorboard.__version__, "protobuf", pb.__version__)'
echo "made $VENV (run bench/compare/tensorboard_fixture.py with its python)"
