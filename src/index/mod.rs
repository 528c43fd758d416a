//! The persistent symbol index: every parsed file's definitions, imports and identifier
//! occurrences, keyed by blake3 content fingerprints and refreshed incrementally.
//!
//! - [`store`] reads and writes it under `.code-intel/index/` (git-ignored).
//! - [`refresh`] brings it up to date with the work tree, re-parsing only changed files.
//! - This module holds the in-memory form and its lookups.

pub mod refresh;
pub mod store;

use std::collections::HashMap;

type FoldHashMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use serde::{Deserialize, Serialize};

use crate::lang::Lang;
use crate::syntax::{FileSyntax, Symbol};

/// One indexed source file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexedFile {
    /// Repository-relative, `/`-separated.
    pub rel: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub hash: [u8; 32],
    pub lang: Lang,
    pub syntax: FileSyntax,
}

/// (file index, symbol index within the file)
pub type SymbolRef = (u32, u32);

#[derive(Debug, Default)]
pub struct SymbolIndex {
    /// Sorted by `rel`.
    files: Vec<IndexedFile>,
    by_path: FoldHashMap<String, u32>,
    defs_by_name: FoldHashMap<String, Vec<SymbolRef>>,
    /// name -> files whose occurrences include it (file index, local name id)
    refs_by_name: FoldHashMap<String, Vec<(u32, u32)>>,
}

impl SymbolIndex {
    pub fn from_files(mut files: Vec<IndexedFile>) -> SymbolIndex {
        files.sort_by(|a, b| a.rel.cmp(&b.rel));
        let mut index = SymbolIndex { files, ..SymbolIndex::default() };
        index.rebuild_lookups();
        index
    }

    fn rebuild_lookups(&mut self) {
        self.by_path = self.files.iter().enumerate().map(|(i, f)| (f.rel.clone(), i as u32)).collect();
        let mut defs: FoldHashMap<String, Vec<SymbolRef>> = FoldHashMap::default();
        let mut refs: FoldHashMap<String, Vec<(u32, u32)>> = FoldHashMap::default();
        for (fi, file) in self.files.iter().enumerate() {
            for (si, sym) in file.syntax.symbols.iter().enumerate() {
                match defs.get_mut(sym.name.as_str()) {
                    Some(list) => list.push((fi as u32, si as u32)),
                    None => {
                        defs.insert(sym.name.clone(), vec![(fi as u32, si as u32)]);
                    }
                }
            }
            for (ni, name) in file.syntax.names.iter().enumerate() {
                match refs.get_mut(name.as_str()) {
                    Some(list) => list.push((fi as u32, ni as u32)),
                    None => {
                        refs.insert(name.clone(), vec![(fi as u32, ni as u32)]);
                    }
                }
            }
        }
        self.defs_by_name = defs;
        self.refs_by_name = refs;
    }

    pub fn files(&self) -> &[IndexedFile] {
        &self.files
    }

    pub fn into_files(self) -> Vec<IndexedFile> {
        self.files
    }

    pub fn file(&self, rel: &str) -> Option<&IndexedFile> {
        self.by_path.get(rel).map(|&i| &self.files[i as usize])
    }

    pub fn file_at(&self, index: u32) -> &IndexedFile {
        &self.files[index as usize]
    }

    pub fn symbol(&self, r: SymbolRef) -> (&IndexedFile, &Symbol) {
        let file = &self.files[r.0 as usize];
        (file, &file.syntax.symbols[r.1 as usize])
    }

    pub fn symbol_count(&self) -> usize {
        self.files.iter().map(|f| f.syntax.symbols.len()).sum()
    }

    /// Definitions named exactly `name`.
    pub fn definitions_named(&self, name: &str) -> &[SymbolRef] {
        self.defs_by_name.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Definitions whose name contains `needle`, ignoring case.
    pub fn definitions_containing(&self, needle: &str) -> Vec<SymbolRef> {
        let needle = needle.to_lowercase();
        let mut out: Vec<SymbolRef> = self
            .defs_by_name
            .iter()
            .filter(|(name, _)| name.to_lowercase().contains(&needle))
            .flat_map(|(_, refs)| refs.iter().copied())
            .collect();
        out.sort_unstable();
        out
    }

    /// Files with occurrences of `name`: (file index, local name id), in path order.
    pub fn files_referencing(&self, name: &str) -> &[(u32, u32)] {
        self.refs_by_name.get(name).map(Vec::as_slice).unwrap_or(&[])
    }
}
