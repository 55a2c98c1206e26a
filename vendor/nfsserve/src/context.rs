use std::fmt;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::transaction_tracker::TransactionTracker;
use crate::vfs::NFSFileSystem;

#[derive(Clone)]
pub struct RPCContext {
    pub local_port: u16,
    pub client_addr: String,
    pub auth: crate::rpc::auth_unix,
    /// The request's credential flavor (see `Client::flavor`).
    pub flavor: u32,
    /// The connection's number (see `NFSFileSystem::connected`).
    pub connection: u64,
    pub vfs: Arc<dyn NFSFileSystem + Send + Sync>,
    pub mount_signal: Option<mpsc::Sender<bool>>,
    pub export_name: Arc<String>,
    pub transaction_tracker: Arc<TransactionTracker>,
}

impl fmt::Debug for RPCContext {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_struct("RPCContext")
            .field("local_port", &self.local_port)
            .field("client_addr", &self.client_addr)
            .field("auth", &self.auth)
            .finish()
    }
}

/// The client of the request being served, for file systems whose answers depend on who
/// asks (the patch this copy carries: see README.wip.md).
#[derive(Clone, Debug, Default)]
pub struct Client {
    /// The client's address, `IP:PORT` of its connection.
    pub addr: String,
    /// The credential's uid and gid: AUTH_SYS's, or nobody's (65534) for a request that
    /// carries none.
    pub uid: u32,
    pub gid: u32,
    /// The credential's flavor (RFC 5531): `AUTH_NONE` or `AUTH_SYS`.
    pub flavor: u32,
    /// The connection the request came on, as `NFSFileSystem::connected` numbered it.
    pub connection: u64,
}

/// RFC 5531's credential flavors a request may carry here.
pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;
/// The uid and gid of a request with no credential (knfsd's default anonuid).
pub const NOBODY: u32 = 65534;

impl Client {
    pub(crate) fn of(context: &RPCContext) -> Client {
        Client {
            addr: context.client_addr.clone(),
            uid: context.auth.uid,
            gid: context.auth.gid,
            flavor: context.flavor,
            connection: context.connection,
        }
    }
}

tokio::task_local! {
    static CLIENT: Client;
}

/// The client of the request this task serves, when called from a request's handler.
pub fn current_client() -> Option<Client> {
    CLIENT.try_with(Client::clone).ok()
}

pub(crate) async fn serving<F: std::future::Future>(client: Client, f: F) -> F::Output {
    CLIENT.scope(client, f).await
}
