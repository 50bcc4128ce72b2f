//! SQL for a stream's runs: where each `[DONE]` stands, so a reader of one run (a Query resumed after an
//! approval writes its stream again after `/complete`) knows where it starts and ends.

use super::ChunkStore;
use crate::db::StoreResult;

/// Where a stream's runs begin and end, as committed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunMarks {
    /// The positions of its completion markers, in order: run `n` ends at the `n`th.
    pub ends: Vec<i64>,
    /// The position of the last row its writers wrote (an OpenAI chunk or an abort frame); 0 if none.
    pub last_written: i64,
    /// The stream's last position (the broker's own events included).
    pub last: i64,
}

impl ChunkStore {
    /// The marks of stream `stream_id`; `None` when there is no such stream.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn run_marks(&self, stream_id: &str) -> StoreResult<Option<RunMarks>> {
        let row = sqlx::query!(
            r#"select s.last_position as "last!",
                      array(select c.position from chunks c
                            where c.stream_id = s.stream_id and c.is_done order by c.position) as "ends!",
                      coalesce((select max(c.position) from chunks c
                                where c.stream_id = s.stream_id and not c.is_done
                                  and (c.event_type is null or c.event_type = 'stream_aborted')), 0)
                          as "last_written!"
               from streams s where s.stream_id = $1"#,
            stream_id
        )
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(|row| RunMarks { ends: row.ends, last_written: row.last_written, last: row.last }))
    }
}
