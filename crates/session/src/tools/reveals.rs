//! Which files a tool's answer showed the content or symbols of. Those files join the session's
//! explored set (only explored files may be written in READY); a file listing, an impact
//! report's dependents or a Map entry's remembered files do not count.

use super::definitions::FindDefinitionsOutput;
use super::function_at_line::GetFunctionAtLineOutput;
use super::impact::AnalyzeImpactOutput;
use super::references::FindReferencesOutput;
use super::search_files::SearchFilesOutput;
use super::search_text::SearchTextOutput;
use super::semantic::{ChunkDetail, RecordOutcomeOutput, SemanticSearchOutput};
use super::structure::AnalyzeStructureOutput;
use super::symbols::GetSymbolsOutput;
use code_intel_semantic::sync::SyncReport;

/// The files an answer showed the content or symbols of.
pub trait Reveals {
    fn revealed_files(&self) -> Vec<String>;
}

impl Reveals for SearchTextOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.matches.iter().map(|m| m.file.clone()).collect()
    }
}

impl Reveals for SearchFilesOutput {
    fn revealed_files(&self) -> Vec<String> {
        Vec::new()
    }
}

impl Reveals for FindDefinitionsOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.definitions.iter().map(|d| d.file.clone()).collect()
    }
}

impl Reveals for FindReferencesOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.references.iter().map(|r| r.file.clone()).collect()
    }
}

impl Reveals for GetSymbolsOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.symbols.iter().map(|s| s.file.clone()).collect()
    }
}

impl Reveals for AnalyzeStructureOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.file.iter().cloned().collect()
    }
}

impl Reveals for GetFunctionAtLineOutput {
    fn revealed_files(&self) -> Vec<String> {
        vec![self.file.clone()]
    }
}

/// The targets' symbols are shown; the files that depend on them are only named.
impl Reveals for AnalyzeImpactOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.file.clone()).collect()
    }
}

/// Forest hits carry a snippet of their chunk; Map hits only name past sessions' files.
impl Reveals for SemanticSearchOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.forest_hits.iter().map(|h| h.file.clone()).collect()
    }
}

impl Reveals for ChunkDetail {
    fn revealed_files(&self) -> Vec<String> {
        vec![self.file.clone()]
    }
}

impl Reveals for SyncReport {
    fn revealed_files(&self) -> Vec<String> {
        Vec::new()
    }
}

impl Reveals for RecordOutcomeOutput {
    fn revealed_files(&self) -> Vec<String> {
        Vec::new()
    }
}

impl Reveals for super::context::UpdateContextOutput {
    fn revealed_files(&self) -> Vec<String> {
        Vec::new()
    }
}
