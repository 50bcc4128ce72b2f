//! The protocol's decisions on a write, given the stream as stored: whether an append, a close or a create is
//! taken, refused, or answered as a duplicate (PROTOCOL.md §5.1, §5.2, §5.2.1). No I/O: the store runs them
//! inside the transaction that holds the stream's row.

use bytes::Bytes;

use super::model::{self, Append, Expiry, Producer, Refusal};

/// A stream as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// Its incarnation (ETags name it).
    pub id: i64,
    /// `Content-Type` as created.
    pub content_type: String,
    /// JSON mode.
    pub json_mode: bool,
    /// How it expires.
    pub expiry: Expiry,
    /// Its tail position.
    pub tail: i64,
    /// Closed for good.
    pub closed: bool,
    /// Deleted while forks still read it: every request on its path gets 410.
    pub deleted: bool,
    /// Past its TTL or expiry time: as good as gone.
    pub expired: bool,
    /// The source it was forked from, and where.
    pub fork: Option<(i64, i64)>,
    /// The last `Stream-Seq` taken.
    pub last_stream_seq: Option<String>,
    /// The producer request that closed it.
    pub closed_by: Option<Producer>,
}

/// A producer's state on one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    /// Its current epoch.
    pub epoch: i64,
    /// The highest sequence number taken in it.
    pub last_seq: i64,
}

/// What an append comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendDecision {
    /// Store `messages` (none for a close-only request) and close when `close` says so.
    Take {
        /// The rows to insert: one per JSON message, one for a byte append.
        messages: Vec<Bytes>,
        /// Close the stream with it.
        close: bool,
    },
    /// Already stored (a producer's retry, or a close of a closed stream): answer success, change nothing.
    Duplicate {
        /// The highest sequence number the producer has had taken in this epoch.
        last_seq: Option<i64>,
    },
    /// Refused.
    Refuse(AppendRefusal),
}

/// Why an append is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendRefusal {
    /// 400.
    Invalid(Refusal),
    /// 409 with `Stream-Closed: true`.
    Closed,
    /// 409: `Content-Type` is not the stream's.
    ContentType,
    /// 409: `Stream-Seq` is not above the last one.
    StreamSeq,
    /// 403 with the producer's current epoch.
    StaleEpoch(i64),
    /// 409 with the expected and the received sequence number.
    SeqGap { expected: i64, received: i64 },
}

/// Decides an append to `stream` (neither deleted nor expired), with the producer's state when it sent
/// producer headers. Checked in the protocol's order: closure, content type, producer, `Stream-Seq`, body.
pub fn append(stream: &Stream, request: &Append, producer: Option<ProducerState>) -> AppendDecision {
    use AppendDecision::{Duplicate, Refuse, Take};
    if stream.closed {
        let same_closer = request.producer.is_some() && request.producer == stream.closed_by;
        if same_closer || (request.close && request.body.is_empty()) {
            return Duplicate { last_seq: request.producer.as_ref().map(|p| p.seq) };
        }
        return Refuse(AppendRefusal::Closed);
    }
    if !request.body.is_empty() {
        match &request.content_type {
            None => return Refuse(AppendRefusal::Invalid(Refusal("Content-Type: required with a body".into()))),
            Some(sent) if model::media_type(sent) != model::media_type(&stream.content_type) => {
                return Refuse(AppendRefusal::ContentType);
            }
            Some(_) => {}
        }
    }
    if let Some(sent) = &request.producer {
        match producer {
            Some(state) if sent.epoch < state.epoch => return Refuse(AppendRefusal::StaleEpoch(state.epoch)),
            Some(state) if sent.epoch == state.epoch => {
                if sent.seq <= state.last_seq {
                    return Duplicate { last_seq: Some(state.last_seq) };
                }
                if sent.seq > state.last_seq + 1 {
                    return Refuse(AppendRefusal::SeqGap { expected: state.last_seq + 1, received: sent.seq });
                }
            }
            // A new producer, or a new epoch of one: it starts at 0.
            _ if sent.seq != 0 => {
                return Refuse(AppendRefusal::Invalid(Refusal("Producer-Seq: a new epoch starts at 0".into())));
            }
            _ => {}
        }
    }
    if let (Some(sent), Some(last)) = (&request.stream_seq, &stream.last_stream_seq)
        && sent.as_bytes() <= last.as_bytes()
    {
        return Refuse(AppendRefusal::StreamSeq);
    }
    match messages(stream.json_mode, &request.body, false) {
        Ok(messages) => Take { messages, close: request.close },
        Err(refusal) => Refuse(AppendRefusal::Invalid(refusal)),
    }
}

/// The rows a body becomes: JSON messages, or the bytes as one row (none when empty).
pub fn messages(json_mode: bool, body: &Bytes, allow_empty_array: bool) -> Result<Vec<Bytes>, Refusal> {
    if body.is_empty() {
        Ok(Vec::new())
    } else if json_mode {
        model::json_messages(body, allow_empty_array)
    } else {
        Ok(vec![body.clone()])
    }
}

/// What a `PUT` asks for once its defaults are filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The content type.
    pub content_type: String,
    /// How it expires.
    pub expiry: Expiry,
    /// Created closed.
    pub closed: bool,
    /// The source's id, the fork position, and whether the request named the position.
    pub fork: Option<(i64, i64, bool)>,
}

/// Whether an existing stream is what a repeated `PUT` asks for (200), or not (409).
pub fn same_stream(existing: &Stream, wanted: &Wanted) -> bool {
    model::media_type(&existing.content_type) == model::media_type(&wanted.content_type)
        && existing.expiry == wanted.expiry
        && existing.closed == wanted.closed
        && match (existing.fork, wanted.fork) {
            (None, None) => true,
            (Some((source, position)), Some((wanted_source, wanted_position, named))) => {
                source == wanted_source && (!named || position == wanted_position)
            }
            _ => false,
        }
}

/// The expiry a fork gets (PROTOCOL.md §4.2's table): its own when it asks for one, else its source's.
pub fn fork_expiry(source: Expiry, requested: Expiry) -> Expiry {
    if requested == Expiry::Never { source } else { requested }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
