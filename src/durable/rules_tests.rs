//! The append and create rules' unit tests ([`super::rules`]), beside the rules in a file of their own.

use super::*;

fn stream() -> Stream {
    Stream {
        id: 1,
        content_type: "text/plain".into(),
        json_mode: false,
        expiry: Expiry::Never,
        tail: 10,
        closed: false,
        deleted: false,
        expired: false,
        fork: None,
        last_stream_seq: None,
        closed_by: None,
    }
}

fn request(body: &'static [u8]) -> Append {
    Append {
        content_type: Some("text/plain".into()),
        close: false,
        stream_seq: None,
        producer: None,
        body: Bytes::from_static(body),
    }
}

fn producer(epoch: i64, seq: i64) -> Option<Producer> {
    Some(Producer { id: "p".into(), epoch, seq })
}

#[test]
fn a_closed_stream_takes_nothing_but_its_closers_retry_and_a_close() {
    let closed = Stream { closed: true, closed_by: producer(0, 3), ..stream() };
    assert_eq!(append(&closed, &request(b"x"), None), AppendDecision::Refuse(AppendRefusal::Closed));
    let retry = Append { producer: producer(0, 3), close: true, ..request(b"x") };
    assert_eq!(append(&closed, &retry, None), AppendDecision::Duplicate { last_seq: Some(3) });
    let close_only = Append { close: true, ..request(b"") };
    assert_eq!(append(&closed, &close_only, None), AppendDecision::Duplicate { last_seq: None });
    // Closure comes before a content type mismatch.
    let other_type = Append { content_type: Some("application/json".into()), ..request(b"x") };
    assert_eq!(append(&closed, &other_type, None), AppendDecision::Refuse(AppendRefusal::Closed));
}

#[test]
fn producers_are_fenced_deduplicated_and_kept_in_order() {
    let state = Some(ProducerState { epoch: 2, last_seq: 4 });
    let decide = |epoch, seq| append(&stream(), &Append { producer: producer(epoch, seq), ..request(b"x") }, state);
    assert_eq!(decide(1, 0), AppendDecision::Refuse(AppendRefusal::StaleEpoch(2)));
    assert_eq!(decide(2, 3), AppendDecision::Duplicate { last_seq: Some(4) });
    assert_eq!(decide(2, 4), AppendDecision::Duplicate { last_seq: Some(4) });
    assert!(matches!(decide(2, 5), AppendDecision::Take { .. }));
    assert_eq!(decide(2, 7), AppendDecision::Refuse(AppendRefusal::SeqGap { expected: 5, received: 7 }));
    assert!(matches!(decide(3, 0), AppendDecision::Take { .. }));
    assert!(matches!(decide(3, 1), AppendDecision::Refuse(AppendRefusal::Invalid(_))));
}

#[test]
fn stream_seq_must_rise_bytewise() {
    let seen = Stream { last_stream_seq: Some("b".into()), ..stream() };
    let with = |seq: &str| append(&seen, &Append { stream_seq: Some(seq.into()), ..request(b"x") }, None);
    assert_eq!(with("b"), AppendDecision::Refuse(AppendRefusal::StreamSeq));
    assert_eq!(with("a"), AppendDecision::Refuse(AppendRefusal::StreamSeq));
    assert!(matches!(with("ba"), AppendDecision::Take { .. }));
}

#[test]
fn content_types_compare_by_media_type() {
    let json = Append { content_type: Some("application/json".into()), ..request(b"{}") };
    assert_eq!(append(&stream(), &json, None), AppendDecision::Refuse(AppendRefusal::ContentType));
    let with_charset = Append { content_type: Some("Text/Plain; charset=utf-8".into()), ..request(b"x") };
    assert!(matches!(append(&stream(), &with_charset, None), AppendDecision::Take { .. }));
}

#[test]
fn forks_inherit_an_expiry_only_when_they_ask_for_none() {
    assert_eq!(fork_expiry(Expiry::Ttl(5), Expiry::Never), Expiry::Ttl(5));
    assert_eq!(fork_expiry(Expiry::Ttl(5), Expiry::Ttl(9)), Expiry::Ttl(9));
    assert_eq!(fork_expiry(Expiry::Never, Expiry::Never), Expiry::Never);
}
