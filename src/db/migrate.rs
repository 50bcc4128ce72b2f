//! Applying the schema (`migrations/`, embedded at compile time), with the checksums sqlx records for the
//! migrations amended after their release, so a database that applied the first text still starts.

use std::borrow::Cow;

use sqlx::{
    Connection, PgConnection,
    migrate::{MigrateError, Migrator},
};

use super::Database;

/// Migrations whose files were amended after release, with the SHA-384 of the text first released (what sqlx
/// recorded in `_sqlx_migrations` of every database that applied them). The amendments change nothing for such
/// a database: 0004, 0010, 0011 and 0013 create the reporting role only where the user may create roles, and
/// grant to it only where it exists (a database owner without CREATEROLE, as CloudNativePG's app user, could
/// not migrate before).
const FIRST_CHECKSUMS: &[(i64, &str)] = &[
    (4, "e533a4f7ac5f39dbb10f54b8208fddc5977f9920d1eadbe20d10995ac67439c4cce9537fff98641f3ee40e26b6c7601e"),
    (10, "51356c19e62a5f80fdb838f2b9c31cac26283787662746c4879d82d51da85da2f48e9f3ab1fa9b31c1d5e042bc05813d"),
    (11, "762897d8d06606b2b2933200a8534e22969bef88489bdc27ef27362034f093ee0963685bcfab0ca3d68761b7d95a61cd"),
    (13, "4e8c57c9296bf4c33ce0d526d8a8e1194fde71dec37f4994db08f691bba0a493751bc62d2229501f4c529a94f0fda1e5"),
];

/// The embedded migrations, each under the checksum sqlx records for it.
fn migrator() -> Migrator {
    let migrations = sqlx::migrate!("./migrations")
        .iter()
        .cloned()
        .map(|mut migration| {
            if let Some((_, first)) = FIRST_CHECKSUMS.iter().find(|(version, _)| *version == migration.version) {
                migration.checksum = Cow::Owned(hex::decode(first).expect("a hex checksum"));
            }
            migration
        })
        .collect();
    let mut migrator = Migrator::with_migrations(migrations);
    // Migrations are expand-only, so a binary older than the schema (a pod restarting mid-rollout, a rollback)
    // starts on it instead of refusing.
    migrator.set_ignore_missing(true);
    migrator
}

/// Applies pending migrations to the database at `url`, on a connection of its own.
pub async fn migrate(url: &str) -> Result<(), MigrateError> {
    let connection = Database::new(url).connect_one("ark-broker-migrate").await?;
    migrate_on(connection).await
}

/// Applies pending migrations on `connection` (the broker's own, made by [`Database::connect_one`]), then
/// closes it. sqlx holds a Postgres advisory lock meanwhile, so replicas that start at the same moment apply
/// them once and all come up.
pub async fn migrate_on(mut connection: PgConnection) -> Result<(), MigrateError> {
    migrator().run(&mut connection).await?;
    connection.close().await?;
    Ok(())
}

/// Applies the migrations up to `last` only, on `connection`, then closes it: the schema an older release
/// left, for tests of an upgrade from it.
pub async fn migrate_until(mut connection: PgConnection, last: i64) -> Result<(), MigrateError> {
    let older: Vec<_> = migrator().iter().filter(|migration| migration.version <= last).cloned().collect();
    Migrator::with_migrations(older).run(&mut connection).await?;
    connection.close().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amended_migrations_keep_their_first_checksums_and_the_others_their_own() {
        let embedded = sqlx::migrate!("./migrations");
        let used = migrator();
        for (ours, theirs) in used.iter().zip(embedded.iter()) {
            let first = FIRST_CHECKSUMS.iter().find(|(version, _)| *version == ours.version);
            match first {
                Some((_, hex)) => {
                    assert_eq!(ours.checksum.as_ref(), hex::decode(hex).unwrap(), "{}", ours.version);
                    assert_ne!(ours.checksum, theirs.checksum, "{} is amended", ours.version);
                }
                None => assert_eq!(ours.checksum, theirs.checksum, "{}", ours.version),
            }
        }
        assert_eq!(used.iter().count(), embedded.iter().count());
    }
}
