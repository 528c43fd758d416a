//! Embeddings from the real all-MiniLM-L6-v2 model (prepared by `scripts/model.sh` from PyPI)
//! through fastembed and ONNX Runtime: the model card's example must come out the same.

use code_intel_semantic::Error as EmbedError;
use code_intel_semantic::embed::{DEFAULT_MODEL, Embedder, FP32_MODEL, cosine, named_model_dir};

fn model(name: &str) -> Embedder {
    let dir = named_model_dir(name).expect("HOME or CODE_INTEL_MODEL_CACHE");
    Embedder::load(&dir, 1).unwrap_or_else(|e| panic!("{e}"))
}

/// The model card's example (sentence-transformers' all-MiniLM-L6-v2): 0.666 between the two
/// sunny sentences, 0.105 with the stadium. `tolerance` is how far a model may be from it.
fn check_model_card(m: &Embedder, tolerance: f32) {
    assert_eq!(m.dimension, 384);
    let v = m.embed(&["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]).unwrap();
    let sunny = cosine(&v[0], &v[1]);
    let stadium = cosine(&v[0], &v[2]);
    assert!((sunny - 0.666).abs() < tolerance, "sunny {sunny}");
    assert!((stadium - 0.105).abs() < tolerance, "stadium {stadium}");
    assert!(sunny - stadium > 0.45, "sunny {sunny} stadium {stadium}");
    // Unit length, so inner product is cosine.
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{norm}");
}

#[test]
fn the_fp32_model_reproduces_the_model_card_similarities() {
    check_model_card(&model(FP32_MODEL), 0.01);
}

#[test]
fn the_int8_default_model_stays_close_to_the_model_card() {
    // Quantization moves similarities a little (measured: the stadium pair 0.143 instead of
    // 0.105); the ranking and a wide margin must stay.
    check_model_card(&model(DEFAULT_MODEL), 0.05);
}

#[test]
fn a_missing_model_or_runtime_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Embedder::load(dir.path(), 1).err().expect("no model there");
    match &err {
        EmbedError::ModelMissing(m) => assert!(m.contains("model.onnx"), "{m}"),
        EmbedError::RuntimeMissing(_) => {}
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("scripts/model.sh"), "{err}");
}

/// scripts/model.sh picks ONNX Runtime's wheel for the machine it runs on; a platform PyPI has
/// no usable wheel for is named, and the script then leaves semantic search off (test.sh also
/// runs `--check-platforms`, which downloads each wheel and checks the library is in it).
#[test]
fn the_model_script_picks_the_wheel_of_each_platform() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/model.sh");
    let pick = |os: &str, arch: &str| {
        let out = std::process::Command::new("bash").arg(&script).args(["--platform-for", os, arch]).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        )
    };
    for (os, arch, want) in [
        ("Linux", "x86_64", "manylinux_2_28_x86_64 libonnxruntime.so.1.31.1"),
        ("Linux", "aarch64", "manylinux_2_28_aarch64 libonnxruntime.so.1.31.1"),
        ("Linux", "arm64", "manylinux_2_28_aarch64 libonnxruntime.so.1.31.1"),
        ("Darwin", "arm64", "macosx_14_0_arm64 libonnxruntime.1.31.1.dylib"),
    ] {
        assert_eq!(pick(os, arch), (true, want.to_owned(), String::new()), "{os} {arch}");
    }
    for (os, arch) in [("Darwin", "x86_64"), ("FreeBSD", "amd64")] {
        let (ok, out, err) = pick(os, arch);
        assert!(!ok && out.is_empty() && err.contains(&format!("{os} {arch}")), "{os} {arch}: {err}");
    }
}

/// `model.sh --with` installs only the candidates it knows, and says which when given another
/// (before it downloads anything).
#[test]
fn the_model_script_names_the_models_it_can_add() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/model.sh");
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(["--with", "bge-small-en-v1.5"])
        .env("CODE_INTEL_MODEL_CACHE", cache.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    assert!(err.contains("all-mpnet-base-v2") && err.contains("nomic-embed-text-v1.5"), "{err}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0, "nothing is fetched");
}
