//! The languages git-code-intel understands: file detection, tree-sitter grammars, and the
//! definition queries in `queries/*.scm`.

use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tree_sitter::{Language, Query};

macro_rules! languages {
    ($( $variant:ident => $name:literal, [$($ext:literal),*], $grammar:expr, $query:literal; )*) => {
        /// A language with a tree-sitter grammar compiled into the binary.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum Lang { $($variant),* }

        impl Lang {
            pub const ALL: &'static [Lang] = &[$(Lang::$variant),*];

            /// The name used in tool arguments and outputs.
            pub fn name(self) -> &'static str {
                match self { $(Lang::$variant => $name),* }
            }

            pub fn extensions(self) -> &'static [&'static str] {
                match self { $(Lang::$variant => &[$($ext),*]),* }
            }

            pub fn grammar(self) -> Language {
                match self { $(Lang::$variant => $grammar.into()),* }
            }

            fn query_source(self) -> &'static str {
                match self { $(Lang::$variant => include_str!(concat!("queries/", $query))),* }
            }
        }
    };
}

languages! {
    Rust => "rust", ["rs"], tree_sitter_rust::LANGUAGE, "rust.scm";
    Python => "python", ["py", "pyi", "pyw"], tree_sitter_python::LANGUAGE, "python.scm";
    JavaScript => "javascript", ["js", "mjs", "cjs", "jsx"], tree_sitter_javascript::LANGUAGE, "javascript.scm";
    TypeScript => "typescript", ["ts", "mts", "cts"], tree_sitter_typescript::LANGUAGE_TYPESCRIPT, "typescript.scm";
    Tsx => "tsx", ["tsx"], tree_sitter_typescript::LANGUAGE_TSX, "tsx.scm";
    Go => "go", ["go"], tree_sitter_go::LANGUAGE, "go.scm";
    Java => "java", ["java"], tree_sitter_java::LANGUAGE, "java.scm";
    C => "c", ["c", "h"], tree_sitter_c::LANGUAGE, "c.scm";
    Cpp => "cpp", ["cc", "cpp", "cxx", "c++", "hpp", "hh", "hxx", "h++", "ipp", "inl"], tree_sitter_cpp::LANGUAGE, "cpp.scm";
    CSharp => "csharp", ["cs"], tree_sitter_c_sharp::LANGUAGE, "csharp.scm";
    Ruby => "ruby", ["rb", "rake", "gemspec"], tree_sitter_ruby::LANGUAGE, "ruby.scm";
    Php => "php", ["php", "phtml"], tree_sitter_php::LANGUAGE_PHP, "php.scm";
}

impl Lang {
    /// The language of a file, from its extension (or a few well-known names).
    pub fn detect(path: &Path) -> Option<Lang> {
        let name = path.file_name()?.to_str()?;
        match name {
            "Rakefile" | "Gemfile" => return Some(Lang::Ruby),
            _ => {}
        }
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Lang::ALL.iter().copied().find(|l| l.extensions().contains(&ext.as_str()))
    }

    /// Parses a user-supplied language name; accepts common aliases.
    pub fn from_name(name: &str) -> Option<Lang> {
        let lower = name.trim().to_ascii_lowercase();
        let canonical = match lower.as_str() {
            "rs" => "rust",
            "py" | "python3" => "python",
            "js" | "jsx" | "node" => "javascript",
            "ts" => "typescript",
            "golang" => "go",
            "h" => "c",
            "c++" | "cxx" | "cc" | "hpp" => "cpp",
            "c#" | "cs" | "c_sharp" => "csharp",
            "rb" => "ruby",
            other => other,
        };
        Lang::ALL.iter().copied().find(|l| l.name() == canonical)
    }

    /// A comma-separated list of the supported language names, for error messages.
    pub fn supported_list() -> String {
        Lang::ALL.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ")
    }

    /// The compiled definition query, built once per process.
    /// The language's tag query, compiled on first use of that language only (compiling all
    /// twelve takes about 180 ms: a one-shot command on a Rust repository pays for Rust's).
    pub fn query(self) -> &'static Query {
        static QUERIES: [OnceLock<Query>; Lang::ALL.len()] = [const { OnceLock::new() }; Lang::ALL.len()];
        QUERIES[self as usize].get_or_init(|| {
            let started = std::time::Instant::now();
            // The queries ship inside the binary and are checked by the tests.
            let query = Query::new(&self.grammar(), self.query_source())
                .unwrap_or_else(|e| panic!("queries/{}.scm is invalid: {e}", self.name()));
            tracing::debug!("{} tag query compiled in {:?}", self.name(), started.elapsed());
            query
        })
    }

    /// Starts compiling [`Lang::query`] on a thread of its own, unless it was started already
    /// (a large query takes about 10 ms: a refresh starts it as soon as it knows a file of this
    /// language changed, and reads the file meanwhile).
    pub fn compile_query_ahead(self) {
        static STARTED: [std::sync::atomic::AtomicBool; Lang::ALL.len()] =
            [const { std::sync::atomic::AtomicBool::new(false) }; Lang::ALL.len()];
        if STARTED[self as usize].swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let spawned = std::thread::Builder::new().name("query-compile".into()).spawn(move || {
            self.pattern_roots();
        });
        if let Err(e) = spawned {
            tracing::debug!("compiling the {} query ahead: {e}", self.name());
        }
    }

    /// For every node kind id of the grammar: whether a pattern of [`Lang::query`] can match
    /// starting at a node of that kind. The extractor runs the query only at those nodes, so it
    /// never walks a function body twice. A pattern whose root is not a plain node name (a
    /// wildcard, an alternation) makes every kind a root.
    pub fn pattern_roots(self) -> &'static [bool] {
        static ROOTS: [OnceLock<Vec<bool>>; Lang::ALL.len()] = [const { OnceLock::new() }; Lang::ALL.len()];
        ROOTS[self as usize].get_or_init(|| self.compute_pattern_roots())
    }

    fn compute_pattern_roots(self) -> Vec<bool> {
        let grammar = self.grammar();
        let query = self.query();
        let source = self.query_source();
        let mut roots = vec![false; grammar.node_kind_count()];
        for pattern in 0..query.pattern_count() {
            let text = source.get(query.start_byte_for_pattern(pattern)..).unwrap_or("");
            // `(kind …)`, or a group around one: `((kind …) (#predicate …))`.
            let inner = text.trim_start();
            let name: String = if inner.starts_with('(') {
                inner
                    .trim_start_matches(|c: char| c == '(' || c.is_whitespace())
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            } else {
                String::new()
            };
            if name.is_empty() || name == "_" {
                return vec![true; grammar.node_kind_count()];
            }
            for id in 0..grammar.node_kind_count() as u16 {
                if grammar.node_kind_is_named(id) && grammar.node_kind_for_id(id) == Some(name.as_str()) {
                    roots[id as usize] = true;
                }
            }
        }
        roots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_compiles_against_its_grammar() {
        for lang in Lang::ALL {
            let query = Query::new(&lang.grammar(), lang.query_source());
            assert!(query.is_ok(), "{}: {:?}", lang.name(), query.err());
        }
    }

    #[test]
    fn detection_and_aliases() {
        assert_eq!(Lang::detect(Path::new("src/main.rs")), Some(Lang::Rust));
        assert_eq!(Lang::detect(Path::new("a/b.TSX")), Some(Lang::Tsx));
        assert_eq!(Lang::detect(Path::new("x.hpp")), Some(Lang::Cpp));
        assert_eq!(Lang::detect(Path::new("README.md")), None);
        assert_eq!(Lang::from_name("C#"), Some(Lang::CSharp));
        assert_eq!(Lang::from_name("py"), Some(Lang::Python));
        assert_eq!(Lang::from_name("cobol"), None);
        assert_eq!(Lang::ALL.len(), 12);
    }

    #[test]
    fn pattern_roots_name_the_kinds_patterns_start_at() {
        let grammar = Lang::Rust.grammar();
        let roots = Lang::Rust.pattern_roots();
        let is_root = |kind: &str| roots[grammar.id_for_node_kind(kind, true) as usize];
        assert!(is_root("function_item"));
        assert!(is_root("use_declaration"));
        assert!(!is_root("identifier"));
        assert!(!is_root("block"));
        let go = Lang::Go.grammar();
        assert!(Lang::Go.pattern_roots()[go.id_for_node_kind("source_file", true) as usize]);
        for lang in Lang::ALL {
            assert!(lang.pattern_roots().iter().any(|r| *r), "{}", lang.name());
            assert!(!lang.pattern_roots().iter().all(|r| *r), "{}: a pattern root was not understood", lang.name());
        }
    }
}
