//! Retrieval quality (issue 26): a CodeSearchNet-style set from CPython's standard library
//! (benches/retrieval_eval.rs), recall@1/5/10 and MRR@10 of every ranking for every model
//! installed, with each model's indexing time, peak memory and query p50, in one run.
//!
//! Each model is measured in a child process of this binary (`retrieval-one`), so its peak
//! memory is its own, on a fresh copy of the corpus, so nothing comes from a cache.

use std::path::{Path, PathBuf};
use std::time::Instant;

use code_intel_codebase::config::Config;
use code_intel_codebase::repo::Repo;
use code_intel_semantic::Bm25;
use code_intel_semantic::Chunk;
use code_intel_semantic::embed::named_model_dir;
use code_intel_semantic::forest::{DEFAULT_FUSION, ForestHit, Fusion};
use code_intel_semantic::service::Semantic;
use std::collections::HashMap;

use super::retrieval_eval::{BENCH_MODULES, Measures, Query, build_set, measures, rank_of};
use super::semantic::peak_rss_mb;
use super::{ms, pct};

const SEED: u32 = 26;
const QUERIES: usize = 400;
/// How deep the dense and lexical rankings are read when measured alone (the served search
/// reads `max(5n, 50)` of each for its fusion).
const DEPTH: usize = 100;

/// Models measured when installed (scripts/model.sh installs the first two);
/// `CODE_INTEL_BENCH_MODELS=a,b` names others (`model.sh --with all-mpnet-base-v2` or
/// `--with nomic-embed-text-v1.5` installs the other candidates, each as fp32 and `-int8`).
const MODELS: &[&str] = &["all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2"];

#[derive(serde::Serialize, serde::Deserialize)]
struct Outcome {
    model: String,
    chunks: usize,
    index_s: f64,
    peak_mb: f64,
    query_p50_ms: f64,
    rankings: Vec<(String, Measures)>,
}

pub fn run(bench: &Path) {
    println!("\n## retrieval quality: CodeSearchNet-style queries from CPython's standard library");
    let dir = std::env::temp_dir().join("code-intel-retrieval");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let queries = build_set(&dir, SEED, QUERIES, BENCH_MODULES).unwrap();
    println!("{} queries (seed {SEED}), {} modules", queries.len(), BENCH_MODULES.len());
    let mut outcomes = Vec::new();
    let chosen = std::env::var("CODE_INTEL_BENCH_MODELS").ok();
    let models: Vec<&str> = match &chosen {
        Some(list) => list.split(',').map(str::trim).filter(|m| !m.is_empty()).collect(),
        None => MODELS.to_vec(),
    };
    for model in models {
        if !named_model_dir(model).is_some_and(|d| d.join("model.onnx").is_file()) {
            println!("{model}: not installed, skipped");
            continue;
        }
        let out = std::process::Command::new(bench)
            .args(["-", "-", "retrieval-one"])
            .arg(&dir)
            .arg(model)
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        match text.lines().last().and_then(|l| serde_json::from_str::<Outcome>(l).ok()) {
            Some(o) => outcomes.push(o),
            None => println!("{model}: failed ({})", out.status),
        }
    }
    println!("\n| model | ranking | R@1 | R@5 | R@10 | MRR@10 |");
    println!("|---|---|---|---|---|---|");
    for o in &outcomes {
        for (name, m) in &o.rankings {
            println!("| {} | {name} | {:.3} | {:.3} | {:.3} | {:.3} |", o.model, m.r1, m.r5, m.r10, m.mrr10);
        }
    }
    println!("\n| model | chunks | index s | ms/chunk | peak MB | query p50 ms |");
    println!("|---|---|---|---|---|---|");
    for o in &outcomes {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.0} | {:.1} |",
            o.model,
            o.chunks,
            o.index_s,
            o.index_s * 1000.0 / o.chunks.max(1) as f64,
            o.peak_mb,
            o.query_p50_ms
        );
    }
}

/// One model on a fresh copy of the set in `dir`: prints its [`Outcome`] as the last line.
pub fn run_one(dir: &Path, model: &str) {
    let queries: Vec<Query> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("queries.json")).unwrap()).unwrap();
    let root = dir.join(format!("repo-{}", model.to_lowercase()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    copy_tree(&dir.join("src"), &root.join("src"));
    let _ = std::process::Command::new("git").args(["init", "-q"]).current_dir(&root).status();
    let config = Config { embedding_model: model.into(), ..Config::default() };
    let repo = Repo::at(&root).unwrap();
    let semantic = Semantic::new(&root, &config);
    let loaded = semantic.loaded().expect("model");
    let t = Instant::now();
    let report = semantic.sync_now(&repo, &config, false, 0, &|_, _| {}).unwrap();
    let index_s = t.elapsed().as_secs_f64();
    let peak_mb = peak_rss_mb();
    let forest = loaded.forest.read().unwrap();
    let mut ranks: Vec<(String, Vec<Option<usize>>)> = Vec::new();
    let mut push = |name: &str, rank: Option<usize>| match ranks.iter_mut().find(|(n, _)| n == name) {
        Some((_, v)) => v.push(rank),
        None => ranks.push((name.to_owned(), vec![rank])),
    };
    let mut times = Vec::new();
    let mut query_vectors = Vec::new();
    let mut lexical_rankings = Vec::new();
    for q in &queries {
        let t = Instant::now();
        let vector = semantic.embed_one(&q.query).unwrap();
        std::hint::black_box(forest.search(&vector, &q.query, 10, DEFAULT_FUSION).unwrap());
        times.push(t.elapsed());
        let lexical = forest.search_lexical(&q.query, DEPTH);
        push("BM25 (the lexical half)", rank_of(&lexical, q, 10));
        push("dense", rank_of(&forest.search_dense(&vector, DEPTH).unwrap(), q, 10));
        push(
            "hybrid, reciprocal rank (k=60)",
            rank_of(&forest.search(&vector, &q.query, 10, Fusion::ReciprocalRank).unwrap(), q, 10),
        );
        for w in [0.5f32, 0.6, 0.7, 0.8] {
            let fusion = Fusion::Weighted { dense_weight: w };
            let name = if fusion == DEFAULT_FUSION {
                format!("hybrid, weighted {w} (default)")
            } else {
                format!("hybrid, weighted {w}")
            };
            push(&name, rank_of(&forest.search(&vector, &q.query, 10, fusion).unwrap(), q, 10));
        }
        query_vectors.push(vector);
        lexical_rankings.push(lexical);
    }
    // What the previous version did: BM25 without stemming, the chunk embedded as its header
    // and code (`embedding_text` before version 2), fused by reciprocal rank.
    if model == MODELS[0] {
        let chunks: Vec<&Chunk> = forest.chunks().map(|c| &c.chunk).collect();
        let mut plain = Bm25::new(false);
        for (i, c) in chunks.iter().enumerate() {
            plain.add(i as u64, &c.symbol, &c.text);
        }
        let mut order: Vec<usize> = (0..chunks.len()).collect();
        order.sort_by_key(|&i| chunks[i].header.len() + chunks[i].text.len());
        let texts: Vec<String> = order.iter().map(|&i| format!("{}\n{}", chunks[i].header, chunks[i].text)).collect();
        let mut vectors = vec![Vec::new(); chunks.len()];
        for (i, v) in order.iter().zip(loaded.embedder.embed(&texts).unwrap()) {
            vectors[*i] = v;
        }
        for (q, qv) in queries.iter().zip(&query_vectors) {
            let lexical: Vec<(usize, f32)> =
                plain.search(&q.query, DEPTH).into_iter().map(|(i, s)| (i as usize, s)).collect();
            let mut dense: Vec<(usize, f32)> =
                vectors.iter().enumerate().map(|(i, v)| (i, v.iter().zip(qv).map(|(a, b)| a * b).sum())).collect();
            dense.sort_by(|a, b| b.1.total_cmp(&a.1));
            dense.truncate(DEPTH);
            let as_hits =
                |list: &[(usize, f32)]| -> Vec<ForestHit> { list.iter().map(|&(i, _)| hit(chunks[i])).collect() };
            push("previous: BM25 unstemmed", rank_of(&as_hits(&lexical), q, 10));
            push("previous: dense, header+code embedded", rank_of(&as_hits(&dense), q, 10));
            push(
                "previous: hybrid, reciprocal rank (shipped before)",
                rank_of(&as_hits(&rrf(&dense[..50.min(dense.len())], &lexical[..50.min(lexical.len())])), q, 10),
            );
        }
    }
    let outcome = Outcome {
        model: model.to_owned(),
        chunks: report.chunks,
        index_s,
        peak_mb,
        query_p50_ms: ms(pct(&mut times, 50)),
        rankings: ranks.into_iter().map(|(n, r)| (n, measures(&r))).collect(),
    };
    println!("{}", serde_json::to_string(&outcome).unwrap());
}

/// A chunk as a hit, for ranking measures (the scores are not looked at).
fn hit(c: &Chunk) -> ForestHit {
    ForestHit::of(c, (0.0, None, None))
}

/// Reciprocal rank fusion (k = 60) of two rankings of chunk positions.
fn rrf(dense: &[(usize, f32)], lexical: &[(usize, f32)]) -> Vec<(usize, f32)> {
    let mut fused: HashMap<usize, f32> = HashMap::new();
    for list in [dense, lexical] {
        for (rank, (i, _)) in list.iter().enumerate() {
            *fused.entry(*i).or_default() += 1.0 / (60.0 + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<(usize, f32)> = fused.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target: PathBuf = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
