#!/usr/bin/env bash
# The GPU run that trained assets/smollm2-135m-instruct-dflash (assets/train/gpu_train.md says how
# each phase was called). Run from the repo root on the device machine, phases back to back
# while it stays warm (/tmp survives between calls only then).
#   part1  carry .dtrain/a .dtrain/g1   MLX CUDA part 1, GGUF part 1, SmolLM2 config+tokenizer
#   part2  carry .dtrain/b .dtrain/g2   install MLX; GGUF part 2; smoke run on a random SmolLM2
#   part3  carry .dtrain/g3             GGUF part 3 -> convert -> generate data -> train
#   part4                               resume training (optional), ship the drafter
set -uo pipefail
phase=$1
shift
OUT=${OUT:-/tmp/out}
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf

env_on() {
  export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 DFLASH_CACHE=/tmp/cache
  export LD_LIBRARY_PATH=$(python3 -c "import nvidia,os;print(':'.join(os.path.join(p,d,'lib') for p in nvidia.__path__ for d in os.listdir(p) if os.path.isdir(os.path.join(p,d,'lib'))))"):${LD_LIBRARY_PATH:-}
}

ship() {  # the drafter (split under 16 MiB), its log and the data file, into $OUT
  local run=$1
  mkdir -p "$OUT/run"
  cp "$run"/config.json "$run"/train_log.jsonl "$OUT/run/" 2>/dev/null
  [ -f "$run/model.safetensors" ] && split -b 15000000 "$run/model.safetensors" "$OUT/run/model.safetensors.part."
  [ -f "$run/data.npz" ] && [ "$(stat -c %s "$run/data.npz")" -lt 16000000 ] && cp "$run/data.npz" "$OUT/run/"
  ls -la "$OUT/run"
}

case $phase in
part1)
  mkdir -p /tmp/parts /tmp/gguf /tmp/smolcfg
  cp .dtrain/a/* /tmp/parts/ && cp .dtrain/g1/gguf.part.1 /tmp/gguf/ &&
    tar -C /tmp/smolcfg -xJf .dtrain/g1/smolcfg.tar.xz
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
  python3 --version; ls -la /tmp/parts /tmp/gguf /tmp/smolcfg
  ;;
part2)
  cp .dtrain/g2/gguf.part.2 /tmp/gguf/
  mkdir -p /tmp/site && cat /tmp/parts/* .dtrain/b/mlx-cuda.part.* | xz -d | tar -C /tmp/site -xf - &&
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .dtrain/b/*.whl || exit 1
  env_on
  python3 -c "import mlx.core as mx; print(mx.default_device(), mx.__version__)" || exit 1
  # a random-weight model of SmolLM2's exact shapes and quantization, to time and warm up the JIT
  python3 - <<'EOF'
import json, shutil, mlx.core as mx, mlx.nn as nn
from mlx.utils import tree_flatten, tree_map_with_path
from mlx_lm.models import llama
cfg = json.load(open("/tmp/smolcfg/config.json"))
mx.random.seed(0)
m = llama.Model(llama.ModelArgs.from_dict(cfg))
m.set_dtype(mx.float16)
nn.quantize(m, group_size=32, bits=4, class_predicate=lambda p, mod: {"group_size": 32, "bits": 8}
            if p.endswith("embed_tokens") else hasattr(mod, "to_quantized"))
m.update(tree_map_with_path(lambda p, v: v.astype(mx.float32) if "norm" in p else v, m.parameters()))
shutil.copytree("/tmp/smolcfg", "/tmp/randsmol", dirs_exist_ok=True)
mx.save_safetensors("/tmp/randsmol/model.safetensors", dict(tree_flatten(m.parameters())))
print("random SmolLM2 written")
EOF
  timeout "${SMOKE_S:-200}" python3 -m dflash.train --target /tmp/randsmol --out /tmp/smoke "$@" 2>&1 |
    tr '\r' '\n' | grep -v '^\(training\|generating\|features\):'
  tail -n 3 /tmp/smoke/train_log.jsonl | cut -c1-300
  ;;
part3)
  env_on
  mkdir -p /tmp/cache
  cat /tmp/gguf/gguf.part.1 /tmp/gguf/gguf.part.2 .dtrain/g3/gguf.part.3 > /tmp/cache/$GGUF
  sha256sum /tmp/cache/$GGUF
  python3 -m dflash.builtin || exit 1
  python3 -m dflash.train --target builtin:smollm2-135m-instruct --out /tmp/run "$@" 2>&1 |
    tr '\r' '\n' | grep -v '^\(training\|generating\|features\):'
  ship /tmp/run
  ;;
part4)
  env_on
  python3 -m dflash.train --target builtin:smollm2-135m-instruct --out /tmp/run --resume "$@" 2>&1 |
    tr '\r' '\n' | grep -v '^\(training\|generating\|features\):'
  ship /tmp/run
  ;;
esac
