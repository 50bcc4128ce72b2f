//! A feed as a replica serves it: [`LiveFeed`], the feed's store and its readers' fan-out, which its routes
//! and watches take (built once per feed at start-up, by the state's registry).

use std::ops::Deref;

use super::{fanout::Fanout, tail::FeedSource};

/// A feed's store and this replica's fan-out of its rows. It is used as its store (`Deref`); watches take it
/// whole ([`super::watch`]).
#[derive(Debug)]
pub struct LiveFeed<S: FeedSource> {
    /// Where the feed's rows are written and read.
    pub store: S,
    /// This replica's readers of the feed.
    pub fanout: Fanout<S::Row>,
}

impl<S: FeedSource + Clone> Clone for LiveFeed<S> {
    fn clone(&self) -> Self {
        LiveFeed { store: self.store.clone(), fanout: self.fanout.clone() }
    }
}

impl<S: FeedSource> Deref for LiveFeed<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.store
    }
}
