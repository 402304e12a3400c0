//! How much a query in another order than the id order may read: `max_scan` items and
//! 64 MiB of document data.

/// The document data a query reads at most, in bytes.
pub(crate) const MAX_SCAN_BYTES: usize = 64 * 1024 * 1024;

/// What a query has read so far against its bounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanBudget {
    max_items: usize,
    max_bytes: usize,
    items: usize,
    bytes: usize,
}

impl ScanBudget {
    /// A budget of `max_items` items and `max_bytes` bytes of `data`.
    pub(crate) fn new(max_items: usize, max_bytes: usize) -> Self {
        ScanBudget {
            max_items,
            max_bytes,
            items: 0,
            bytes: 0,
        }
    }

    /// The `Limit` for the next DynamoDB Query page: the items still allowed.
    pub(crate) fn page_limit(&self) -> i32 {
        i32::try_from(self.max_items.saturating_sub(self.items)).unwrap_or(i32::MAX)
    }

    /// Counts one item read with `bytes` of document data.
    pub(crate) fn record(&mut self, bytes: usize) {
        self.items += 1;
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Whether the query must stop reading.
    pub(crate) fn spent(&self) -> bool {
        self.items >= self.max_items || self.bytes >= self.max_bytes
    }

    /// Items read so far.
    pub(crate) fn items(&self) -> usize {
        self.items
    }

    /// Bytes of document data read so far.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_bound_the_page_size_and_the_scan() {
        let mut budget = ScanBudget::new(3, MAX_SCAN_BYTES);
        assert_eq!(budget.page_limit(), 3);
        budget.record(10);
        assert_eq!(budget.page_limit(), 2);
        assert!(!budget.spent());
        budget.record(10);
        budget.record(10);
        assert!(budget.spent());
        assert_eq!(budget.page_limit(), 0);
        assert_eq!((budget.items(), budget.bytes()), (3, 30));
    }

    #[test]
    fn bytes_stop_the_scan_at_64_mib() {
        let mut budget = ScanBudget::new(10_000, MAX_SCAN_BYTES);
        for _ in 0..170 {
            budget.record(390_000);
        }
        assert!(
            !budget.spent(),
            "66 300 000 bytes is below 64 MiB (67 108 864)"
        );
        for _ in 0..3 {
            budget.record(390_000);
        }
        assert!(budget.spent());
        assert!(budget.page_limit() > 0, "stopped by bytes, not items");
    }
}
