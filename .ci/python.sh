#!/usr/bin/env bash
# The Python package (python/) against the dev build of `aware serve-env`:
# a fresh venv with gymnasium, grpcio, numpy and the package, then its unittest suite.
# Prints "N passed, N failed" last; exits non-zero when a test fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# The binary `cargo test --workspace` builds, with the same features: a no-op after the tests
# (`cargo build -p aware-cli` would resolve features for one package and rebuild half the tree).
cargo test --workspace --no-run --quiet
venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check \
    "gymnasium==1.4.0" "grpcio==1.85.1" "protobuf==7.36.2" "numpy>=1.26,<3"
"$venv/bin/pip" install --quiet --disable-pip-version-check ./python
cd "$root/python/tests"   # import the installed package, not the source tree
AWARE_BIN="$root/target/debug/aware" "$venv/bin/python" - <<'PY'
import sys
import unittest

suite = unittest.defaultTestLoader.discover(".", pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
failed = len(result.failures) + len(result.errors)
passed = result.testsRun - failed - len(result.skipped)
print(f"python: {passed} passed, {failed} failed, {len(result.skipped)} skipped")
sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
PY
