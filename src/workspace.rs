//! One repository opened for exploration: its root, config, contract, and the symbol index with
//! the means to keep it fresh.
//!
//! Freshness: a long-running server watches the work tree (inotify and friends, via `notify`) and
//! refreshes the index on the next lookup after something changed. A one-shot command, or a
//! server whose watcher could not start, checks the work tree on every lookup instead.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use notify::{EventKind, RecursiveMode, Watcher};

use crate::config::Config;
use crate::contract::{Contract, ContractMessage};
use crate::index::refresh::{self, RefreshReport};
use crate::index::{SymbolIndex, store};
use crate::repo::Repo;

pub struct Workspace {
    pub repo: Repo,
    pub config: Config,
    pub contract: Contract,
    index: Mutex<IndexState>,
    watch: bool,
}

#[derive(Default)]
struct IndexState {
    index: Option<SymbolIndex>,
    report: RefreshReport,
    watcher: Option<Watch>,
}

struct Watch {
    dirty: Arc<AtomicBool>,
    watcher: notify::RecommendedWatcher,
    watched: HashSet<PathBuf>,
}

impl Watch {
    /// Watches exactly the directories the (gitignore-aware) walk entered, so ignored trees such
    /// as `target/` or `node_modules/` cost no watches. New directories show up as events in
    /// their parent, and the refresh that follows adds them here.
    fn sync_dirs(&mut self, dirs: &[PathBuf]) {
        let wanted: HashSet<&PathBuf> = dirs.iter().collect();
        let stale: Vec<PathBuf> = self.watched.iter().filter(|d| !wanted.contains(d)).cloned().collect();
        for dir in stale {
            let _ = self.watcher.unwatch(&dir);
            self.watched.remove(&dir);
        }
        for dir in dirs {
            if !self.watched.contains(dir) {
                match self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.watched.insert(dir.clone());
                    }
                    Err(e) => {
                        // Without a watch on every directory, events could be missed: fall back
                        // to checking on every lookup.
                        tracing::warn!("cannot watch {} ({e}); checking the work tree on every lookup", dir.display());
                        self.dirty.store(true, Ordering::Release);
                        self.watched.clear();
                        return;
                    }
                }
            }
        }
    }

    fn complete(&self) -> bool {
        !self.watched.is_empty()
    }
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
        Ok(Workspace { repo, config, contract, index: Mutex::new(IndexState::default()), watch })
    }

    /// The `{error, message}` of `tool_errors.query.<key>`.
    pub fn tool_error(&self, key: &str, vars: &[(&str, &str)]) -> ContractMessage {
        self.contract.error(&["tool_errors", "query", key], vars)
    }

    /// Runs `f` on an up-to-date symbol index, building it on first use.
    pub fn with_index<R>(&self, f: impl FnOnce(&SymbolIndex, &RefreshReport) -> R) -> R {
        let mut state = self.index.lock().unwrap_or_else(|p| p.into_inner());
        let first_use = state.index.is_none();
        if first_use && self.watch {
            state.watcher = start_watcher(self.repo.root());
        }
        let needs_refresh = first_use
            || match &state.watcher {
                Some(w) if w.complete() => w.dirty.swap(false, Ordering::AcqRel),
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
        if (report.changed || force_save)
            && let Err(e) = store::save(self.repo.root(), index.files())
        {
            tracing::warn!("could not save the symbol index: {e}");
        }
        if let Some(watch) = state.watcher.as_mut() {
            watch.sync_dirs(&report.dirs);
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

fn start_watcher(root: &Path) -> Option<Watch> {
    // The watcher is created before the first walk, so nothing that changes during it is lost.
    let dirty = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&dirty);
    let ignored = [root.join(".git"), root.join(".code-intel")];
    let handler = move |res: notify::Result<notify::Event>| match res {
        Ok(event) => {
            let relevant = match event.kind {
                EventKind::Access(notify::event::AccessKind::Close(notify::event::AccessMode::Write)) => true,
                EventKind::Access(_) => false,
                _ => true,
            };
            if relevant && event.paths.iter().any(|p| !ignored.iter().any(|i| p.starts_with(i))) {
                flag.store(true, Ordering::Release);
            }
        }
        // A lost event must not leave the index stale.
        Err(_) => flag.store(true, Ordering::Release),
    };
    match notify::recommended_watcher(handler) {
        Ok(watcher) => Some(Watch { dirty, watcher, watched: HashSet::new() }),
        Err(e) => {
            tracing::warn!("file watcher unavailable ({e}); checking the work tree on every lookup");
            None
        }
    }
}
