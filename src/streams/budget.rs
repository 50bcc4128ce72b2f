//! One byte budget for the partly received NDJSON lines of all open chunk POSTs of a replica. A line is
//! buffered until its newline arrives (up to `--max-chunk-bytes`), so without a shared budget a few dozen
//! stalled writers each holding a long half-line could hold gigabytes. Once the lines held reach the budget,
//! new chunk POSTs are refused (503 with `Retry-After`) before anything of them is read. Open ones go on, so
//! a line is never cut; what they add beyond the budget is bounded by `--max-chunk-bytes` each.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use crate::error::ApiError;

/// The replica's budget; cheap to clone.
#[derive(Debug, Clone)]
pub struct NdjsonBudget {
    held: Arc<AtomicUsize>,
    limit: usize,
}

impl NdjsonBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        NdjsonBudget { held: Arc::default(), limit }
    }

    /// A share for a new chunk POST; 503 while the budget is used up.
    pub fn admit(&self) -> Result<BudgetShare, ApiError> {
        if self.held() >= self.limit {
            return Err(ApiError::AtCapacity(
                "this replica holds as many partly received NDJSON lines as it may \
                 (--ndjson-buffer-budget-bytes); retry, here or on another replica"
                    .into(),
            ));
        }
        Ok(BudgetShare { held: self.held.clone(), mine: 0 })
    }

    /// Bytes held by all open chunk POSTs.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// What one chunk POST holds of the budget; dropped with the request (answered, failed or cut off), it
/// gives everything back.
#[derive(Debug)]
pub struct BudgetShare {
    held: Arc<AtomicUsize>,
    mine: usize,
}

impl BudgetShare {
    /// Records that the request now holds `bytes`.
    pub fn set(&mut self, bytes: usize) {
        if bytes > self.mine {
            self.held.fetch_add(bytes - self.mine, Ordering::Relaxed);
        } else {
            self.held.fetch_sub(self.mine - bytes, Ordering::Relaxed);
        }
        self.mine = bytes;
    }
}

impl Drop for BudgetShare {
    fn drop(&mut self) {
        self.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_give_everything_back_when_dropped() {
        let budget = NdjsonBudget::new(100);
        let mut a = budget.admit().unwrap();
        let mut b = budget.admit().unwrap();
        a.set(60);
        b.set(30);
        assert_eq!(budget.held(), 90);
        a.set(10);
        assert_eq!(budget.held(), 40);
        b.set(95);
        assert_eq!(budget.held(), 105, "an open request may pass the budget");
        assert!(budget.admit().is_err(), "but no new one is let in");
        drop(b);
        assert_eq!(budget.held(), 10);
        assert!(budget.admit().is_ok());
        drop(a);
        assert_eq!(budget.held(), 0);
    }
}
