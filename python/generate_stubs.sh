#!/usr/bin/env bash
# Regenerates src/aware_gym/_proto from crates/rpc/proto (run after changing env.proto, with
# grpcio-tools of the grpcio version pyproject.toml requires: 1.85.1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
python3 -m grpc_tools.protoc -Iaware_gym/_proto=../crates/rpc/proto/aware/env/v1 \
    --python_out=src --grpc_python_out=src --pyi_out=src ../crates/rpc/proto/aware/env/v1/env.proto
