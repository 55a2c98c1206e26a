use super::*;

#[test]
fn every_errno_the_world_answers_has_its_nfs_status_or_eio() {
    use crate::world::error::ErrorKind;
    for kind in ErrorKind::ALL {
        let st = status_of_errno(kind.errno());
        let expected = match kind.errno() {
            libc::EPERM => nfsstat3::NFS3ERR_PERM,
            libc::EACCES => nfsstat3::NFS3ERR_ACCES,
            libc::ENOENT => nfsstat3::NFS3ERR_NOENT,
            libc::EINVAL => nfsstat3::NFS3ERR_INVAL,
            libc::EFBIG => nfsstat3::NFS3ERR_FBIG,
            libc::ENOSPC => nfsstat3::NFS3ERR_NOSPC,
            libc::ENAMETOOLONG => nfsstat3::NFS3ERR_NAMETOOLONG,
            libc::ENOTSUP => nfsstat3::NFS3ERR_NOTSUPP,
            // ETIMEDOUT, EINTR, EINPROGRESS, ECANCELED: NFSv3 has no such status.
            _ => nfsstat3::NFS3ERR_IO,
        };
        assert_eq!(st as u32, expected as u32, "{kind:?}");
    }
}

#[test]
fn a_client_is_one_session_apart_from_the_kernels() {
    let a = Client {
        addr: "127.0.0.1:801".into(),
        uid: 1000,
        gid: 1000,
        ..Client::default()
    };
    let b = Client {
        uid: 0,
        ..a.clone()
    };
    assert_eq!(session_of(&a), session_of(&a.clone()));
    assert_ne!(session_of(&a), session_of(&b));
    assert!(session_of(&a).number & 0x8000_0000 != 0);
}
