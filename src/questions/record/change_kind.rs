//! What happened to a question ([`ChangeKind`]): the watch event's name, kept as text in the watch log; what
//! each change does to the asking Query's status.

use sqlx::{
    Postgres,
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef},
};

/// What happened to a question: the watch event's name (`question_created`, …), kept as that text in the
/// watch log (read and written as `text`, so no type lookup is needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Asked.
    QuestionCreated,
    /// Answered.
    QuestionAnswered,
    /// Cancelled by its asker.
    QuestionCancelled,
    /// Closed by its timeout, unanswered.
    QuestionExpired,
    /// The person refused to answer.
    QuestionDeclined,
    /// A channel delivery moved on; the question itself is unchanged (watchers and waiters only).
    QuestionUpdated,
}

impl ChangeKind {
    const ALL: [ChangeKind; 6] = [
        ChangeKind::QuestionCreated,
        ChangeKind::QuestionAnswered,
        ChangeKind::QuestionCancelled,
        ChangeKind::QuestionExpired,
        ChangeKind::QuestionDeclined,
        ChangeKind::QuestionUpdated,
    ];

    /// Reads a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        ChangeKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The name watchers see (the SSE `event:`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::QuestionCreated => "question_created",
            ChangeKind::QuestionAnswered => "question_answered",
            ChangeKind::QuestionCancelled => "question_cancelled",
            ChangeKind::QuestionExpired => "question_expired",
            ChangeKind::QuestionDeclined => "question_declined",
            ChangeKind::QuestionUpdated => "question_updated",
        }
    }

    /// What the asking Query's status does: wait on a new question, resume when one closes.
    pub fn status_action(self) -> Option<&'static str> {
        match self {
            ChangeKind::QuestionCreated => Some("wait"),
            ChangeKind::QuestionAnswered
            | ChangeKind::QuestionCancelled
            | ChangeKind::QuestionExpired
            | ChangeKind::QuestionDeclined => Some("resume"),
            ChangeKind::QuestionUpdated => None,
        }
    }
}

impl sqlx::Type<Postgres> for ChangeKind {
    fn type_info() -> PgTypeInfo {
        <&str as sqlx::Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <&str as sqlx::Type<Postgres>>::compatible(ty)
    }
}

impl sqlx::Encode<'_, Postgres> for ChangeKind {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&str as sqlx::Encode<Postgres>>::encode(self.as_str(), buf)
    }
}

impl sqlx::Decode<'_, Postgres> for ChangeKind {
    fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
        let name = <&str as sqlx::Decode<Postgres>>::decode(value)?;
        ChangeKind::parse(name).ok_or_else(|| format!("not a question change: {name}").into())
    }
}

#[cfg(test)]
mod tests {
    use super::ChangeKind;

    #[test]
    fn every_change_kind_reads_back_from_its_name() {
        for kind in ChangeKind::ALL {
            assert_eq!(ChangeKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ChangeKind::parse("question_exploded"), None);
    }
}
