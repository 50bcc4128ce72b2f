// Rebuilds when a migration changes: the migrations are embedded at compile time (`sqlx::migrate!`).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
