//! The shared state's PostgreSQL database: one connection pool per daemon, the words a
//! failure is reported with, and the listener that hears other mounts' changes.
//!
//! The world runs on plain threads (fuser's workers, the call pool), so it uses the
//! synchronous `postgres` client pooled by r2d2: a query blocks its thread exactly as a
//! rusqlite one does, with no async runtime to hand work to and back. A connection that
//! broke is dropped by the pool when it comes back, and the next `get` connects again,
//! retrying with backoff for up to `CONNECT_TIMEOUT`; meanwhile a call fails with EIO and
//! these words.

use std::time::Duration;

use postgres::{Client, NoTls};
use r2d2::{Pool, PooledConnection};
use r2d2_postgres::PostgresConnectionManager;

use super::error::{WorldError, WorldResult};

/// How long `get` keeps trying to (re)connect before a call fails with EIO.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections one daemon keeps at most (FUSE workers and call threads share them).
const POOL_SIZE: u32 = 16;
/// The listener's reconnection backoff, doubling from the first to the last.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How often the listener checks that its connection and the world are still there.
const LISTEN_TICK: Duration = Duration::from_secs(1);

/// The channel every change-feed write notifies; the payload is the writer's origin.
pub const EVENTS_CHANNEL: &str = "wip_events";

/// What the listener heard.
pub enum Heard<'a> {
    /// (Re)connected: notifications may have been missed, catch up.
    Connected,
    /// Nothing for a while (a chance to see whether the listener is still wanted).
    Quiet,
    /// A change-feed write by the mount with this origin.
    From(&'a str),
}

pub type PgClient = PooledConnection<PostgresConnectionManager<NoTls>>;

/// A pool of connections to the shared state database.
pub struct SharedDb {
    pool: Pool<PostgresConnectionManager<NoTls>>,
    config: postgres::Config,
    /// The URL without its password, for messages.
    shown: String,
    /// What the database is to the mount, for messages ("shared state database").
    name: &'static str,
}

/// Whether a state URL names PostgreSQL (anything else is refused with words).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgresql://") || url.starts_with("postgres://")
}

/// The URL with any password replaced, fit for logs and `result` files.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:<redacted>@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

impl SharedDb {
    /// Connect (once, to fail early with words) and keep a pool.
    pub fn connect(url: &str) -> WorldResult<SharedDb> {
        Self::connect_as(url, "shared state database")
    }

    /// `connect`, for a database that messages call `name` (a host's own database).
    pub fn connect_as(url: &str, name: &'static str) -> WorldResult<SharedDb> {
        let shown = redact_url(url);
        if !is_postgres_url(url) {
            return Err(WorldError::backend(format!(
                "state url {shown}: only postgresql://… URLs are supported (the default, \
                 without a url, is SQLite in the state directory)"
            )));
        }
        let config: postgres::Config = url
            .parse()
            .map_err(|e| WorldError::backend(format!("state url {shown}: {e}")))?;
        let manager = PostgresConnectionManager::new(config.clone(), NoTls);
        let pool = Pool::builder()
            .max_size(POOL_SIZE)
            .min_idle(Some(1))
            .connection_timeout(CONNECT_TIMEOUT)
            // A round trip per checkout would double a call's cost; a broken connection
            // shows itself on use and is dropped then.
            .test_on_check_out(false)
            .build(manager)
            .map_err(|e| {
                WorldError::backend(format!(
                    "cannot reach the {name} {shown}: {e} \
                     (is PostgreSQL running and does the role exist?)"
                ))
            })?;
        Ok(SharedDb {
            pool,
            config,
            shown,
            name,
        })
    }

    /// The URL as messages show it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A pooled connection, reconnecting if need be.
    pub fn client(&self) -> WorldResult<PgClient> {
        self.pool.get().map_err(|e| {
            WorldError::backend(format!(
                "the {} {} is unreachable: {e}; the mount reconnects on the next call",
                self.name, self.shown
            ))
        })
    }

    /// A PostgreSQL error in words, as EIO.
    pub fn error(&self, what: &str, e: &postgres::Error) -> WorldError {
        let detail = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        };
        // Connection exceptions (08…) and operator intervention (57…: a restart, a
        // terminated backend) end the connection; anything else is about the statement.
        let lost = e.is_closed()
            || e.as_db_error().is_none_or(|db| {
                let code = db.code().code();
                code.starts_with("08") || code.starts_with("57")
            });
        let hint = if lost {
            "; the connection was lost and the mount reconnects on the next call"
        } else {
            ""
        };
        WorldError::backend(format!(
            "{what}: the {} {} failed: {detail}{hint}",
            self.name, self.shown
        ))
    }

    /// Listen on `channel` on a connection of its own, telling `heard` what arrives.
    /// Reconnects with backoff; ends when `heard` returns false.
    pub fn listen(
        &self,
        channel: &'static str,
        mut heard: impl FnMut(Heard<'_>) -> bool + Send + 'static,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        let config = self.config.clone();
        let shown = self.shown.clone();
        std::thread::Builder::new()
            .name("state-listener".into())
            .spawn(move || {
                let mut backoff = BACKOFF_FIRST;
                loop {
                    match listen_once(&config, channel, &mut heard) {
                        Ok(Stop::WorldGone) => return,
                        Ok(Stop::Lost) => {
                            tracing::warn!("shared state {shown}: the listener lost its connection; reconnecting");
                            backoff = BACKOFF_FIRST;
                        }
                        Err(e) => {
                            tracing::warn!(
                                "shared state {shown}: cannot listen for other mounts' changes: {e}; retrying in {backoff:?}"
                            );
                            std::thread::sleep(backoff);
                            backoff = (backoff * 2).min(BACKOFF_MAX);
                            if !heard(Heard::Quiet) {
                                return;
                            }
                        }
                    }
                }
            })
    }
}

enum Stop {
    WorldGone,
    Lost,
}

fn listen_once(
    config: &postgres::Config,
    channel: &str,
    heard: &mut impl FnMut(Heard<'_>) -> bool,
) -> Result<Stop, postgres::Error> {
    let mut client: Client = config.connect(NoTls)?;
    client.batch_execute(&format!("LISTEN {channel}"))?;
    // Anything written while we were not listening is caught up now.
    if !heard(Heard::Connected) {
        return Ok(Stop::WorldGone);
    }
    loop {
        let mut payloads: Vec<String> = Vec::new();
        {
            use postgres::fallible_iterator::FallibleIterator;
            let mut notes = client.notifications();
            let first = notes.timeout_iter(LISTEN_TICK).next()?;
            if let Some(n) = first {
                payloads.push(n.payload().to_string());
                // Coalesce what already arrived into one catch-up.
                let mut more = notes.iter();
                while let Some(n) = more.next()? {
                    payloads.push(n.payload().to_string());
                }
            }
        }
        if client.is_closed() {
            return Ok(Stop::Lost);
        }
        if payloads.is_empty() {
            if !heard(Heard::Quiet) {
                return Ok(Stop::WorldGone);
            }
            continue;
        }
        payloads.sort();
        payloads.dedup();
        for p in &payloads {
            if !heard(Heard::From(p)) {
                return Ok(Stop::WorldGone);
            }
        }
    }
}

/// A database of its own for one test, dropped afterwards. PostgreSQL must be running
/// (`.ci/run` installs and starts it); a test that cannot reach it fails and says how.
#[cfg(test)]
pub(crate) struct TestDb {
    pub url: String,
    name: String,
}

#[cfg(test)]
impl TestDb {
    const SOCKET: &'static str = "/var/run/postgresql";

    pub fn create() -> TestDb {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "wip_unit_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = Self::admin();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create the test database");
        TestDb {
            url: format!("postgresql:///{name}?host={}", Self::SOCKET),
            name,
        }
    }

    /// Cut every connection to this database, as a server restart would.
    pub fn cut_connections(&self) {
        Self::admin()
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                &[&self.name],
            )
            .expect("terminate the test database's connections");
    }

    fn admin() -> Client {
        let url = format!("postgresql:///postgres?host={}", Self::SOCKET);
        Client::connect(&url, NoTls).unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at {}: {e}. Start it as root with \
                 `apt-get install -y postgresql && pg_ctlcluster 15 main start && \
                 su postgres -c 'createuser -s root'` (.ci/run does this)",
                Self::SOCKET
            )
        })
    }
}

#[cfg(test)]
impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = Self::admin().batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact_url("postgresql://wip:s3cret@db.example:5432/wip"),
            "postgresql://wip:<redacted>@db.example:5432/wip"
        );
        assert_eq!(
            redact_url("postgresql:///wip?host=/var/run/postgresql"),
            "postgresql:///wip?host=/var/run/postgresql"
        );
        assert!(!is_postgres_url("sqlite:///tmp/x"));
        assert!(SharedDb::connect("mysql://x/y").is_err());
    }
}
