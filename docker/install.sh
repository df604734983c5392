#!/bin/sh
# Install aigw into a virtual environment. The one install path: `make install` runs it with
# `-e .[dev]`, the Dockerfile with `.` (tests/test_image.py runs it as the image build does).
# usage: docker/install.sh VENV [PIP ARGUMENTS...]    (default: install `.`, the package itself)
set -eu
venv=$1
shift
[ $# -gt 0 ] || set -- .
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "$@"
