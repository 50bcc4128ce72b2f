//! The `mcp:caller` channel's one write besides answering: that the calling client replied to its
//! elicitation (so its task reads `working` again, not `input_required`, and no replica asks it again).

use super::QuestionStore;
use crate::db::StoreResult;

impl QuestionStore {
    /// Notes that the client asked through `mcp:caller` replied to question `id`'s elicitation; false when
    /// the question does not ask its caller or already heard back. Not a change of the question (no new
    /// version, no watch event): the answer or decline it carried is one, written by the answering path.
    #[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
    pub async fn caller_replied(&self, id: &str) -> StoreResult<bool> {
        let noted = sqlx::query!(
            "update questions set caller_replied_at = now()
             where id = $1 and caller_elicitation is not null and caller_replied_at is null",
            id,
        )
        .execute(self.pool())
        .await?;
        Ok(noted.rows_affected() == 1)
    }
}
