//! The record of a question's changes, as data: what kind of change it was ([`ChangeKind`], the watch
//! event's name) and the steps of its decision ([`Step`], [`Entry`], [`HistoryItem`]). Writing them is the
//! store's (`store::record`, the one writer).

mod change_kind;
mod steps;

pub use change_kind::ChangeKind;
pub use steps::{Entry, HistoryItem, Step};
