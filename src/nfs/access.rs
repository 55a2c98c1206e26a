//! Who an NFS server serves. NFSv3's AUTH_SYS believes whatever uid a client claims, so
//! the claim alone lets anyone act as anyone. The server therefore looks at who holds the
//! other end of each connection: for a client on this machine the kernel knows the
//! owner of its socket (the uid column of /proc/net/tcp and tcp6, which list the sockets
//! of the reader's network namespace, where every loopback client is). Unless the world
//! allows others (`allow_other`, as a FUSE mount does):
//!
//! - a connection is served only if its socket is the owner's or root's (the kernel's
//!   own NFS client is root's socket, whichever user's process made the request);
//! - a request only if its AUTH_SYS uid is the owner's (root's claim, too, only when the
//!   owner is root); a request with no uid (AUTH_NONE) is not served.
//!
//! Whatever the setting, a socket that is not root's serves only its owner's own uid
//! (another claim on it is forged), and a client from beyond this machine is served only
//! from a privileged port (below 1024: its root's, as knfsd's `secure` export option
//! asks; the kernel's NFS client uses one), since anyone there may open any other.

use std::net::{IpAddr, SocketAddr};

use nfsserve::context::{Client, AUTH_NONE, AUTH_SYS};

/// The uid and whether others may enter.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub owner: u32,
    pub allow_other: bool,
}

/// What is known of a connection's other end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A socket of this machine, owned by `uid`.
    Local { uid: u32 },
    /// A socket elsewhere (another machine, or another network namespace).
    Remote { port: u16 },
}

/// How other users are let in, for the refusals that would let them.
const LET_IN: &str = "`allow_other = true` in the manifest's [world] (or `wip serve-nfs --allow-other`, `wip mount --nfs -o allow_other`) lets other users in, each as itself";

/// Why a connection or a request is not served, in the words the log shows.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Refused {
    /// Whose socket it is could not be told.
    #[error("{0}")]
    Unknown(#[from] Unknown),
    #[error("its socket belongs to uid {uid}, not to this server's owner (uid {owner}) nor to root; {LET_IN}")]
    OthersSocket { uid: u32, owner: u32 },
    #[error("it comes from beyond this machine on port {0}: any user there may open such a port, so nobody there is believed about who they are; only a privileged port (below 1024, its root's, as the kernel's NFS client uses) is served from elsewhere")]
    Unprivileged(u16),
    #[error("it carries no uid (AUTH_NONE), and only the owner's (uid {0}) requests are served; {LET_IN}")]
    NoUid(u32),
    #[error("its credential (flavor {0}) is not AUTH_SYS")]
    Flavor(u32),
    #[error(
        "it claims uid {claimed} on a socket of uid {uid}: a process speaks for its own uid only"
    )]
    Forged { claimed: u32, uid: u32 },
    #[error("it is uid {uid}'s, and only the owner's (uid {owner}) requests are served; {LET_IN}")]
    NotOwner { uid: u32, owner: u32 },
}

impl Access {
    /// Whether a connection whose other end is `peer` (or could not be told: the words)
    /// is served at all; why not otherwise.
    pub fn connection(&self, peer: &Result<Peer, Unknown>) -> Result<(), Refused> {
        match peer {
            Err(why) => Err(Refused::Unknown(why.clone())),
            Ok(Peer::Local { uid }) => {
                if self.allow_other || *uid == self.owner || *uid == 0 {
                    Ok(())
                } else {
                    Err(Refused::OthersSocket {
                        uid: *uid,
                        owner: self.owner,
                    })
                }
            }
            Ok(Peer::Remote { port }) if *port >= 1024 => Err(Refused::Unprivileged(*port)),
            Ok(Peer::Remote { .. }) => Ok(()),
        }
    }

    /// Whether a request of `client` on a connection whose other end is `peer` is
    /// served; why not otherwise.
    pub fn request(&self, peer: &Peer, client: &Client) -> Result<(), Refused> {
        if client.flavor != AUTH_SYS {
            return if client.flavor == AUTH_NONE && self.allow_other {
                // Served as nobody (Client's uid), as knfsd serves anonymous requests.
                Ok(())
            } else if client.flavor == AUTH_NONE {
                Err(Refused::NoUid(self.owner))
            } else {
                Err(Refused::Flavor(client.flavor))
            };
        }
        if let Peer::Local { uid } = peer {
            if *uid != 0 && client.uid != *uid {
                return Err(Refused::Forged {
                    claimed: client.uid,
                    uid: *uid,
                });
            }
        }
        if !self.allow_other && client.uid != self.owner {
            return Err(Refused::NotOwner {
                uid: client.uid,
                owner: self.owner,
            });
        }
        Ok(())
    }

    /// What the server says of itself as it starts.
    pub fn describe(&self) -> String {
        if self.allow_other {
            "served to every user (allow_other): a local socket speaks for the uid that owns it, root's (the kernel's NFS client) for the uids it names; from beyond this machine only from a privileged port".to_string()
        } else {
            format!(
                "served to uid {} alone (the user running this server): another user's socket, a request as another uid or with none (AUTH_NONE) is refused (NFS3ERR_ACCES); `allow_other = true` in the manifest's [world] (or --allow-other) lets other users in",
                self.owner
            )
        }
    }
}

/// Who holds the other end of the connection from `peer` to `local`: its owner's uid if
/// it is a socket of this machine, else a remote one (`Err`: a local socket whose owner
/// cannot be told, one its process already closed).
pub fn peer_of(peer: SocketAddr, local: SocketAddr) -> Result<Peer, Unknown> {
    let (peer, local) = (unmapped(peer), unmapped(local));
    // The client's socket: its own address is `peer`, the one it reaches is `local`.
    let (table, me, them) = match (peer, local) {
        (SocketAddr::V4(p), SocketAddr::V4(l)) => (
            "/proc/self/net/tcp",
            hex_v4(p.ip().octets(), p.port()),
            hex_v4(l.ip().octets(), l.port()),
        ),
        (p, l) => (
            "/proc/self/net/tcp6",
            hex_v6(v6(p.ip()), p.port()),
            hex_v6(v6(l.ip()), l.port()),
        ),
    };
    let text = std::fs::read_to_string(table).map_err(|e| Unknown::Unreadable {
        table,
        source: std::sync::Arc::new(e),
    })?;
    match owner_in(&text, &me, &them) {
        Some((uid, inode)) if inode != 0 => Ok(Peer::Local { uid }),
        // Closed by its process already (a timewait socket lists uid 0): unknown.
        Some(_) => Err(Unknown::Closed),
        None if peer.ip().is_loopback() => Err(Unknown::NotListed),
        None => Ok(Peer::Remote { port: peer.port() }),
    }
}

/// Why whose socket a connection is could not be told.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Unknown {
    #[error("cannot read {table} to tell whose socket it is: {source}")]
    Unreadable {
        table: &'static str,
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    #[error("its socket was closed before its owner could be told")]
    Closed,
    #[error("its socket is not among this machine's, so its owner cannot be told")]
    NotListed,
}

/// An IPv4 address an IPv6 socket shows as `::ffff:a.b.c.d`, as the IPv4 socket its
/// client has.
fn unmapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v) => match v.ip().to_ipv4_mapped() {
            Some(ip) => SocketAddr::new(IpAddr::V4(ip), v.port()),
            None => a,
        },
        v4 => v4,
    }
}

fn v6(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(ip) => ip.to_ipv6_mapped().octets(),
        IpAddr::V6(ip) => ip.octets(),
    }
}

/// An address as /proc/net/tcp prints it: the address's bytes as one host-order word.
fn hex_v4(octets: [u8; 4], port: u16) -> String {
    format!("{:08X}:{port:04X}", u32::from_ne_bytes(octets))
}

/// As /proc/net/tcp6 prints it: four host-order words.
fn hex_v6(octets: [u8; 16], port: u16) -> String {
    let mut s = String::with_capacity(37);
    for w in octets.chunks_exact(4) {
        let word = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
        s.push_str(&format!("{word:08X}"));
    }
    s.push_str(&format!(":{port:04X}"));
    s
}

/// The uid and inode of the socket whose local address is `local` and remote `remote`
/// in a /proc/net/tcp table.
fn owner_in(table: &str, local: &str, remote: &str) -> Option<(u32, u64)> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (l, r, uid, inode) = (f.get(1)?, f.get(2)?, f.get(7)?, f.get(9)?);
        (l.eq_ignore_ascii_case(local) && r.eq_ignore_ascii_case(remote))
            .then(|| Some((uid.parse().ok()?, inode.parse().ok()?)))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(uid: u32, flavor: u32) -> Client {
        Client {
            addr: "127.0.0.1:40000".into(),
            uid,
            gid: uid,
            flavor,
            connection: 1,
        }
    }

    #[test]
    fn without_allow_other_only_the_owners_and_roots_sockets_and_the_owners_uid() {
        let root = Access {
            owner: 0,
            allow_other: false,
        };
        let alex = Access {
            owner: 1000,
            allow_other: false,
        };
        for a in [root, alex] {
            assert!(a.connection(&Ok(Peer::Local { uid: 0 })).is_ok());
            assert!(a.connection(&Ok(Peer::Local { uid: a.owner })).is_ok());
            let e = a
                .connection(&Ok(Peer::Local { uid: 1001 }))
                .unwrap_err()
                .to_string();
            assert!(e.contains("uid 1001") && e.contains("allow_other"), "{e}");
            assert!(a.connection(&Err(Unknown::Closed)).is_err());
            assert!(a.connection(&Ok(Peer::Remote { port: 40000 })).is_err());
            assert!(a.connection(&Ok(Peer::Remote { port: 800 })).is_ok());
        }
        let roots_socket = Peer::Local { uid: 0 };
        assert!(root.request(&roots_socket, &client(0, AUTH_SYS)).is_ok());
        assert!(root
            .request(&roots_socket, &client(1001, AUTH_SYS))
            .is_err());
        assert!(root.request(&roots_socket, &client(0, AUTH_NONE)).is_err());
        // Root's claim is the owner's only when the owner is root.
        assert!(alex.request(&roots_socket, &client(1000, AUTH_SYS)).is_ok());
        assert!(alex.request(&roots_socket, &client(0, AUTH_SYS)).is_err());
        let own = Peer::Local { uid: 1000 };
        assert!(alex.request(&own, &client(1000, AUTH_SYS)).is_ok());
        let e = alex
            .request(&own, &client(0, AUTH_SYS))
            .unwrap_err()
            .to_string();
        assert!(e.contains("claims uid 0 on a socket of uid 1000"), "{e}");
        assert!(root.request(&roots_socket, &client(0, 3)).is_err());
    }

    #[test]
    fn allow_other_lets_everyone_in_as_the_uid_its_socket_belongs_to() {
        let a = Access {
            owner: 0,
            allow_other: true,
        };
        assert!(a.connection(&Ok(Peer::Local { uid: 1001 })).is_ok());
        assert!(a.connection(&Ok(Peer::Remote { port: 40000 })).is_err());
        let theirs = Peer::Local { uid: 1001 };
        assert!(a.request(&theirs, &client(1001, AUTH_SYS)).is_ok());
        assert!(a.request(&theirs, &client(0, AUTH_SYS)).is_err());
        assert!(a.request(&theirs, &client(65534, AUTH_NONE)).is_ok());
        let roots = Peer::Local { uid: 0 };
        assert!(a.request(&roots, &client(1001, AUTH_SYS)).is_ok());
        assert!(a.describe().contains("every user"));
    }

    #[test]
    fn a_table_row_is_found_by_both_ends() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000   101        0 30061 1 0 100 0 0 10 0\n\
            1: 0100007F:9C40 0100007F:1538 01 00000000:00000000 00:00000000 00000000  1001        0 4242 1 0 20 4 30 10 -1\n";
        let me = hex_v4([127, 0, 0, 1], 40000);
        let them = hex_v4([127, 0, 0, 1], 0x1538);
        if cfg!(target_endian = "little") {
            assert_eq!(me, "0100007F:9C40");
        }
        assert_eq!(owner_in(table, &me, &them), Some((1001, 4242)));
        assert_eq!(owner_in(table, &them, &me), None);
        assert_eq!(
            hex_v6(std::net::Ipv6Addr::LOCALHOST.octets(), 1)[24..],
            hex_v4([0, 0, 0, 1], 1)
        );
    }

    #[test]
    fn the_owner_of_a_loopback_socket_is_the_kernels_word() {
        for host in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = std::net::TcpListener::bind(host) else {
                continue; // no IPv6 here
            };
            let local = listener.local_addr().unwrap();
            let client = std::net::TcpStream::connect(local).unwrap();
            let (_server, peer) = listener.accept().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            // SAFETY: geteuid cannot fail.
            let me = unsafe { libc::geteuid() };
            assert!(
                matches!(peer_of(peer, local), Ok(Peer::Local { uid }) if uid == me),
                "{host}"
            );
            drop(client);
        }
    }
}
