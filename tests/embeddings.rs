//! Embeddings from the real all-MiniLM-L6-v2 model (prepared by `scripts/model.sh` from PyPI)
//! through fastembed and ONNX Runtime: the model card's example must come out the same.

use git_code_intel::semantic::embed::{EmbedError, Embedder, cosine, default_model_dir};

fn model() -> Embedder {
    let dir = default_model_dir().expect("HOME or CODE_INTEL_MODEL_DIR");
    Embedder::load(&dir, 1).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn reproduces_the_model_card_similarities() {
    let m = model();
    assert_eq!(m.dimension, 384);
    let v = m.embed(&["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]).unwrap();
    let sunny = cosine(&v[0], &v[1]);
    let stadium = cosine(&v[0], &v[2]);
    assert!((sunny - 0.666).abs() < 0.01, "sunny {sunny}");
    assert!((stadium - 0.105).abs() < 0.01, "stadium {stadium}");
    // Unit length, so inner product is cosine.
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{norm}");
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
