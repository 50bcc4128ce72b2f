//! A hook that holds a real broker's write transaction open: inserts whose row contains `"hold"` wait, inside
//! the writer's transaction (after it drew its positions), for an advisory lock the test holds.

use sqlx::{Connection, Executor, PgConnection};

use super::within;

const HOLD_LOCK: i64 = 4242;

/// Makes inserts whose JSON contains `"hold"` wait for the test's advisory lock, inside the writer's
/// transaction.
pub async fn install_hold(url: &str) -> PgConnection {
    let mut connection = PgConnection::connect(url).await.unwrap();
    connection
        .execute(
            r#"create function test_hold() returns trigger language plpgsql as $$
               begin
                 if to_jsonb(new)::text like '%"hold"%' then perform pg_advisory_xact_lock(4242); end if;
                 return new;
               end $$;
               create trigger test_hold before insert on chunks for each row execute function test_hold();
               create trigger test_hold before insert on messages for each row execute function test_hold();
               create trigger test_hold before insert on events for each row execute function test_hold();"#,
        )
        .await
        .unwrap();
    sqlx::query("select pg_advisory_lock($1)").bind(HOLD_LOCK).execute(&mut connection).await.unwrap();
    connection
}

/// Waits until a broker transaction is blocked on the hold lock.
pub async fn wait_until_held(connection: &mut PgConnection) {
    within("a writer to reach the hold", async {
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from pg_locks where locktype = 'advisory' and objid = $1 and not granted",
            )
            .bind(HOLD_LOCK)
            .fetch_one(&mut *connection)
            .await
            .unwrap();
            if waiting > 0 {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// Lets held writers go on.
pub async fn release_hold(connection: &mut PgConnection) {
    sqlx::query("select pg_advisory_unlock($1)").bind(HOLD_LOCK).execute(connection).await.unwrap();
}
