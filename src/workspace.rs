//! One repository opened for exploration: its root, config, contract, and the symbol index with
//! the means to keep it fresh.
//!
//! Freshness: a long-running server watches the work tree ([`crate::watch`]) and
//! refreshes the index on the next lookup after something changed. A one-shot command, or a
//! server whose watcher could not start, checks the work tree on every lookup instead.

use std::path::Path;
use std::sync::Mutex;

use crate::config::Config;
use crate::contract::{Contract, ContractMessage};
use crate::index::refresh::{self, RefreshReport};
use crate::index::{SymbolIndex, store};
use crate::repo::Repo;
use crate::watch::TreeWatcher;

pub struct Workspace {
    pub repo: Repo,
    pub config: Config,
    pub contract: Contract,
    index: Mutex<IndexState>,
    watch: bool,
    /// Semantic search: the model, the Forest and the Map's vectors.
    pub semantic: std::sync::Arc<crate::semantic::service::Semantic>,
}

#[derive(Default)]
struct IndexState {
    index: Option<SymbolIndex>,
    report: RefreshReport,
    watcher: Option<TreeWatcher>,
    /// Counts the refreshes that changed the index (the Forest syncs when it moved).
    generation: u64,
}

impl Workspace {
    /// Opens the repository at `root`. With `watch`, index freshness comes from a file watcher.
    pub fn open(root: &Path, watch: bool) -> std::io::Result<Workspace> {
        let repo = Repo::discover(root)?;
        let (config, config_warning) = Config::load(repo.root());
        let (contract, contract_warning) = Contract::load(repo.root());
        for warning in [config_warning, contract_warning].into_iter().flatten() {
            tracing::warn!("{warning}");
        }
        let semantic = std::sync::Arc::new(crate::semantic::service::Semantic::new(repo.root(), &config));
        Ok(Workspace { repo, config, contract, index: Mutex::new(IndexState::default()), watch, semantic })
    }

    /// The `{error, message}` of `tool_errors.query.<key>`.
    pub fn tool_error(&self, key: &crate::contract::Msg, vars: &[(&str, &str)]) -> ContractMessage {
        self.contract.error(key, vars)
    }

    /// Runs `f` on an up-to-date symbol index, building it on first use.
    pub fn with_index<R>(&self, f: impl FnOnce(&SymbolIndex, &RefreshReport) -> R) -> R {
        let mut state = self.index.lock().unwrap_or_else(|p| p.into_inner());
        let first_use = state.index.is_none();
        if first_use && self.watch {
            state.watcher = TreeWatcher::start();
        }
        let needs_refresh = first_use
            || match &state.watcher {
                Some(w) if w.complete() => w.take_dirty(),
                _ => true,
            };
        if needs_refresh {
            let previous = match state.index.take() {
                Some(index) => index,
                None => store::load(self.repo.root()).map(SymbolIndex::from_files).unwrap_or_default(),
            };
            self.refresh_into(&mut state, previous, false);
        }
        let state = &*state;
        match &state.index {
            Some(index) => f(index, &state.report),
            None => f(&SymbolIndex::default(), &state.report),
        }
    }
}

impl Workspace {
    /// Refreshes the symbol index and returns its generation, which moves whenever a refresh
    /// changed it: the Forest's cue that files changed.
    pub fn index_generation(&self) -> u64 {
        self.with_index(|_, _| ());
        self.index.lock().unwrap_or_else(|p| p.into_inner()).generation
    }

    /// Brings the index up to date now (`rebuild`: from nothing, re-parsing every file) and
    /// reports what it holds. Backs `git code-intel index`.
    pub fn index_now(&self, rebuild: bool) -> IndexStats {
        let mut state = self.index.lock().unwrap_or_else(|p| p.into_inner());
        let previous = if rebuild {
            SymbolIndex::default()
        } else {
            state
                .index
                .take()
                .or_else(|| store::load(self.repo.root()).map(SymbolIndex::from_files))
                .unwrap_or_default()
        };
        self.refresh_into(&mut state, previous, rebuild);
        let index = state.index.as_ref();
        IndexStats {
            files: index.map_or(0, |i| i.files().len()),
            symbols: index.map_or(0, SymbolIndex::symbol_count),
            parsed: state.report.parsed,
            removed: state.report.removed,
            too_large: state.report.too_large.len(),
            binary: state.report.binary.len(),
        }
    }

    fn refresh_into(&self, state: &mut IndexState, previous: SymbolIndex, force_save: bool) {
        let (index, report) = refresh::refresh(&self.repo, &self.config, previous);
        if report.changed || force_save {
            let started = std::time::Instant::now();
            match store::save(self.repo.root(), index.files()) {
                Ok(()) => tracing::debug!("index saved in {:?}", started.elapsed()),
                Err(e) => tracing::warn!("could not save the symbol index: {e}"),
            }
        }
        if let Some(watch) = state.watcher.as_mut() {
            watch.sync_dirs(&report.dirs);
        }
        if report.changed || state.index.is_none() {
            state.generation += 1;
        }
        state.index = Some(index);
        state.report = report;
    }
}

/// What `git code-intel index` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexStats {
    pub files: usize,
    pub symbols: usize,
    pub parsed: usize,
    pub removed: usize,
    pub too_large: usize,
    pub binary: usize,
}
