//! Keeping responses under the 256 KB limit, with an `offset` to continue from.

use serde::Serialize;

/// The most a tool response may hold, in bytes of JSON.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024;

/// Room kept for the fields around the item list.
const ENVELOPE_BYTES: usize = 8 * 1024;

/// The part of a list that fits.
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Where the next call should start, when the list was cut.
    pub next_offset: Option<usize>,
    /// Cut because of the byte budget (as opposed to a count limit).
    pub truncated: bool,
}

/// Takes items (already positioned at `offset`) until `max_items` or the byte budget is reached.
/// `total_remaining` tells whether anything follows the taken items.
pub fn take_page<T: Serialize>(
    items: impl IntoIterator<Item = T>,
    offset: usize,
    max_items: usize,
    budget: usize,
) -> Page<T> {
    let budget = budget.saturating_sub(ENVELOPE_BYTES);
    let mut used = 0;
    let mut out = Vec::new();
    let mut iter = items.into_iter();
    let mut truncated = false;
    let mut more = false;
    for item in iter.by_ref() {
        if out.len() >= max_items {
            more = true;
            break;
        }
        let size = serde_json::to_vec(&item).map(|v| v.len() + 1).unwrap_or(0);
        if used + size > budget && !out.is_empty() {
            truncated = true;
            more = true;
            break;
        }
        used += size;
        out.push(item);
    }
    let next_offset = more.then_some(offset + out.len());
    Page { items: out, next_offset, truncated }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_limit_sets_next_offset_without_truncation() {
        let p = take_page(0..10, 5, 3, MAX_RESPONSE_BYTES);
        assert_eq!(p.items, vec![0, 1, 2]);
        assert_eq!(p.next_offset, Some(8));
        assert!(!p.truncated);
    }

    #[test]
    fn byte_budget_truncates() {
        let big = "x".repeat(1000);
        let p = take_page(std::iter::repeat_n(big, 1000), 0, usize::MAX, MAX_RESPONSE_BYTES);
        assert!(p.truncated);
        let n = p.items.len();
        assert!(n > 100 && n < 300, "{n}");
        assert_eq!(p.next_offset, Some(n));
    }

    #[test]
    fn everything_fits() {
        let p = take_page(0..3, 0, 10, MAX_RESPONSE_BYTES);
        assert_eq!(p.items.len(), 3);
        assert_eq!(p.next_offset, None);
    }
}
