//! One byte budget for the partly received NDJSON lines of all open chunk POSTs of a replica. A line is
//! buffered until its newline arrives (up to `--max-chunk-bytes`), so without a shared budget a few dozen
//! stalled writers each holding a long half-line could hold gigabytes. Once the lines held reach the budget,
//! new chunk POSTs are refused (503 with `Retry-After`) before anything of them is read. Each open request
//! may hold a line of up to 64 KiB ([`OWN_ALLOWANCE`] of buffer) whatever the budget (every ordinary LLM chunk fits, so a working
//! executor is never cut); a request whose partial line grows beyond that while the budget is used up is ended
//! with 503 and `chunks_stored`, and its writer sends the rest again. Lines held are thus at most the budget
//! plus [`OWN_ALLOWANCE`] per open chunk POST.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use crate::error::ApiError;

/// Bytes of buffer each chunk POST may hold for its partial line even while the budget is used up: a line of
/// 64 KiB, in a buffer that may have grown to twice its length.
pub const OWN_ALLOWANCE: usize = 128 * 1024;

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
        Ok(BudgetShare { held: self.held.clone(), limit: self.limit, mine: 0 })
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
    limit: usize,
    mine: usize,
}

impl BudgetShare {
    /// Records that the request now holds `bytes`; 503 when it grew beyond its own allowance while the budget
    /// is used up (the request must then end: it cannot read on without holding more).
    pub fn hold(&mut self, bytes: usize) -> Result<(), ApiError> {
        let growing = bytes > self.mine;
        self.set(bytes);
        if growing && bytes > OWN_ALLOWANCE && self.held.load(Ordering::Relaxed) > self.limit {
            return Err(ApiError::AtCapacity(
                "this replica holds as many partly received NDJSON lines as it may \
                 (--ndjson-buffer-budget-bytes): send the lines after chunks_stored again"
                    .into(),
            ));
        }
        Ok(())
    }

    fn set(&mut self, bytes: usize) {
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
        assert_eq!(budget.held(), 105, "an open request may pass the budget within its own allowance");
        assert!(budget.admit().is_err(), "but no new one is let in");
        drop(b);
        assert_eq!(budget.held(), 10);
        assert!(budget.admit().is_ok());
        drop(a);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_line_growing_beyond_its_allowance_while_the_budget_is_used_up_ends_its_request() {
        let budget = NdjsonBudget::new(2 * OWN_ALLOWANCE);
        let (mut a, mut b) = (budget.admit().unwrap(), budget.admit().unwrap());
        assert!(a.hold(OWN_ALLOWANCE + 10).is_ok(), "within the budget a line may grow");
        assert!(b.hold(OWN_ALLOWANCE).is_ok(), "its own allowance is always granted");
        assert!(b.hold(OWN_ALLOWANCE + 1).is_err(), "beyond it, with the budget used up, it is not");
        assert!(a.hold(10).is_ok(), "shrinking always is");
        assert!(b.hold(OWN_ALLOWANCE + 2).is_ok(), "and frees room for others");
    }
}
