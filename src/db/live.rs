//! Feeds as a replica serves them: [`LiveFeed`] (a feed's store and its readers' fan-out, what its routes
//! and watches take) and [`Feeds`], where each feed is registered once at start-up — its tail starts and is
//! handed to the listener, its task joins the replica's background tasks.

use std::ops::Deref;

use tokio::task::JoinHandle;

use super::{
    fanout::Fanout,
    feed::Feed,
    listener::Tails,
    tail::{self, FeedSource, TailEvent},
};

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

/// The feeds registered so far: their tails, for the listener, and the tails' tasks.
#[derive(Debug, Default)]
pub struct Feeds {
    tails: Tails,
    tasks: Vec<JoinHandle<()>>,
}

impl Feeds {
    /// Registers `feed`, read from `store`: starts its tail, which hands each committed row to the feed's
    /// readers on this replica.
    pub fn register<S: FeedSource + Clone>(&mut self, feed: Feed, store: S) -> LiveFeed<S> {
        let fanout = Fanout::default();
        self.add_tail(feed, tail::spawn(feed, store.clone(), fanout.clone()));
        LiveFeed { store, fanout }
    }

    /// Registers a feed whose tail is its own (questions wake their readers instead of handing rows out).
    pub fn add_tail(
        &mut self,
        feed: Feed,
        (sender, task): (tokio::sync::mpsc::UnboundedSender<TailEvent>, JoinHandle<()>),
    ) {
        assert!(self.tails.insert(feed, sender).is_none(), "feed {} is registered once", feed.name());
        self.tasks.push(task);
    }

    /// The tails (for the listener, which holds their senders: they end when it ends) and their tasks.
    pub fn into_parts(self) -> (Tails, Vec<JoinHandle<()>>) {
        (self.tails, self.tasks)
    }
}
