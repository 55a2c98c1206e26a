//! What every SQLite connection of the daemon shares (the journal, the known world, the
//! tracker), whichever layer opens it.

/// Wait for another connection's write lock in short steps, at most `limit` in all.
/// SQLite's own `busy_timeout` sleeps a millisecond at once, while the lock holder (the
/// known world's writer on the same file, a snapshot reader) usually lets go within tens
/// of microseconds: that first millisecond was most of a contended call's time.
pub fn wait_when_busy(
    conn: &mut rusqlite::Connection,
    limit: std::time::Duration,
) -> rusqlite::Result<()> {
    let mut since = std::time::Instant::now();
    conn.busy_handler(Some(move |n: i32| {
        if n == 0 {
            since = std::time::Instant::now();
        }
        let step = if n < 100 {
            std::time::Duration::from_micros(20)
        } else {
            std::time::Duration::from_millis(2)
        };
        std::thread::sleep(step);
        since.elapsed() < limit
    }))
}
