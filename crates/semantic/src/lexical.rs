//! The Forest's lexical side: BM25 over chunk text, with identifiers split the way people
//! write queries (`parse_config`, `parseConfig` → `parse`, `config`, and the whole word), and
//! the chunk's own symbol name counted extra, so an exact identifier finds its definition.

use foldhash::HashMap as FoldHashMap;
use rust_stemmers::{Algorithm, Stemmer};

const K1: f32 = 1.2;
const B: f32 = 0.75;
/// How many times a chunk's symbol name counts, on top of its occurrences in the text.
const SYMBOL_WEIGHT: u32 = 3;

/// Lower-cased terms of `text`: each identifier whole, plus its parts when it has several.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let word = word.trim_matches('_');
        if word.is_empty() || word.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let parts = split_identifier(word);
        out.push(word.to_lowercase());
        if parts.len() > 1 {
            out.extend(parts.into_iter().filter(|p| p.len() > 1));
        }
    }
    out
}

/// `parseHTTPConfig_v2` → `parse`, `http`, `config`, `v2`.
fn split_identifier(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<char> = piece.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, cur) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (prev.is_lowercase() && cur.is_uppercase())
                || (prev.is_uppercase() && cur.is_uppercase() && next_lower);
            if boundary {
                parts.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        parts.push(chars[start..].iter().collect::<String>().to_lowercase());
    }
    parts
}

/// The words of every identifier in `text`, lower-cased and space-separated
/// (`JSONEncoder.iterencode` → `json encoder iterencode`).
pub(crate) fn identifier_words(text: &str) -> String {
    let mut out = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let word = word.trim_matches('_');
        if word.is_empty() || word.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        out.extend(split_identifier(word));
    }
    out.join(" ")
}

#[derive(Default)]
pub struct Bm25 {
    postings: FoldHashMap<String, Vec<(u64, u32)>>,
    /// doc → (length in terms, its distinct terms)
    docs: FoldHashMap<u64, (u32, Vec<String>)>,
    total_len: u64,
    /// English stemming of every term, in documents and queries alike.
    stemmer: Option<Stemmer>,
}

impl Bm25 {
    /// An empty index; `stem` stems every term (`returns`, `returned` → `return`).
    pub fn new(stem: bool) -> Bm25 {
        Bm25 { stemmer: stem.then(|| Stemmer::create(Algorithm::English)), ..Bm25::default() }
    }

    fn terms(&self, text: &str) -> Vec<String> {
        let mut out = terms(text);
        if let Some(stemmer) = &self.stemmer {
            for t in &mut out {
                if let std::borrow::Cow::Owned(stemmed) = stemmer.stem(t) {
                    *t = stemmed;
                }
            }
        }
        out
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Indexes `text` as document `id`; `symbol` is the chunk's symbol path.
    pub fn add(&mut self, id: u64, symbol: &str, text: &str) {
        self.remove(id);
        let mut counts: FoldHashMap<String, u32> = FoldHashMap::default();
        let mut len = 0u32;
        for t in self.terms(text) {
            *counts.entry(t).or_default() += 1;
            len += 1;
        }
        if let Some(name) = symbol.rsplit(['.', ':']).next().filter(|n| !n.starts_with('<')) {
            for t in self.terms(name) {
                *counts.entry(t).or_default() += SYMBOL_WEIGHT;
                len += SYMBOL_WEIGHT;
            }
        }
        let mut distinct = Vec::with_capacity(counts.len());
        for (term, tf) in counts {
            self.postings.entry(term.clone()).or_default().push((id, tf));
            distinct.push(term);
        }
        self.total_len += u64::from(len);
        self.docs.insert(id, (len, distinct));
    }

    pub fn remove(&mut self, id: u64) {
        let Some((len, distinct)) = self.docs.remove(&id) else { return };
        self.total_len -= u64::from(len);
        for term in distinct {
            if let Some(list) = self.postings.get_mut(&term) {
                list.retain(|(d, _)| *d != id);
                if list.is_empty() {
                    self.postings.remove(&term);
                }
            }
        }
    }

    /// The `k` best documents for `query`, best first, with their BM25 scores.
    pub fn search(&self, query: &str, k: usize) -> Vec<(u64, f32)> {
        if self.docs.is_empty() {
            return Vec::new();
        }
        let n = self.docs.len() as f32;
        let avg = (self.total_len as f32 / n).max(1.0);
        let mut query_terms = self.terms(query);
        query_terms.sort();
        query_terms.dedup();
        let mut scores: FoldHashMap<u64, f32> = FoldHashMap::default();
        for term in &query_terms {
            let Some(list) = self.postings.get(term) else { continue };
            let df = list.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, tf) in list {
                let len = self.docs.get(&doc).map_or(avg, |d| d.0 as f32);
                let tf = tf as f32;
                let s = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg));
                *scores.entry(doc).or_default() += s;
            }
        }
        let mut ranked: Vec<(u64, f32)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(k);
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_query_words() {
        assert_eq!(terms("parseHTTPConfig"), vec!["parsehttpconfig", "parse", "http", "config"]);
        assert_eq!(terms("load_index(x)"), vec!["load_index", "load", "index", "x"]);
    }

    #[test]
    fn exact_identifier_ranks_its_definition_first() {
        let mut bm = Bm25::default();
        bm.add(1, "caller", "fn caller() { let c = load_config(); load_config(); }");
        bm.add(2, "load_config", "fn load_config() -> Config { Config::default() }");
        bm.add(3, "other", "fn other() { println!(\"config\") }");
        assert_eq!(bm.search("load_config", 3)[0].0, 2);
        bm.remove(2);
        assert!(bm.search("load_config", 3).iter().all(|(d, _)| *d != 2));
    }
}
