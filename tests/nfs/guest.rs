//! A small Linux guest under qemu whose kernel NFS client mounts the host's `wip
//! serve-nfs`: the machine running the tests may have no NFS client in its own kernel
//! (and mounting NFS needs one), so the kernel that mounts is Debian's
//! linux-image-cloud-amd64, booted with busybox and its NFS modules (tests/nfs/guest-init.sh).
//! Its console is the test's view: lines starting with `@@` are the script's reports.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The modules the NFS client needs, in load order (dependencies first).
const MODULES: &[&str] = &[
    "drivers/virtio/virtio_ring",
    "drivers/virtio/virtio",
    "drivers/virtio/virtio_pci_legacy_dev",
    "drivers/virtio/virtio_pci_modern_dev",
    "drivers/virtio/virtio_pci",
    "net/core/failover",
    "drivers/net/net_failover",
    "drivers/net/virtio_net",
    "fs/netfs/netfs",
    "fs/fscache/fscache",
    "net/sunrpc/sunrpc",
    "fs/nfs_common/grace",
    "fs/lockd/lockd",
    "fs/nfs_common/nfs_acl",
    "fs/nfs/nfs",
    "fs/nfs/nfsv3",
];

struct Image {
    kernel: PathBuf,
    /// The initramfs without the test's script (a cpio archive; the script's own is
    /// appended per boot, as the kernel reads concatenated archives).
    base: PathBuf,
    _dir: tempfile::TempDir,
}

fn sh(script: &str) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kernel with the NFS client as modules, and the initramfs around it: built once per
/// test binary. .ci/run installs qemu-system-x86, linux-image-cloud-amd64 and
/// busybox-static.
fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let (kernel, modules) = std::fs::read_dir("/boot")
            .expect("/boot")
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let version = name.strip_prefix("vmlinuz-")?.to_string();
                let modules = Path::new("/lib/modules").join(&version).join("kernel");
                modules
                    .join("fs/nfs/nfsv3.ko")
                    .exists()
                    .then(|| (e.path(), modules))
            })
            .next()
            .expect(
                "a kernel with NFS modules in /boot (Debian's linux-image-cloud-amd64; .ci/run installs it)",
            );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        for d in ["bin", "m", "proc", "sys", "dev", "mnt", "tmp"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::copy("/bin/busybox", root.join("bin/busybox"))
            .expect("/bin/busybox (Debian's busybox-static)");
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nfs");
        sh(&format!(
            "gcc -static -O2 -o '{}' '{}'",
            root.join("bin/nfsmount").display(),
            here.join("nfsmount.c").display()
        ));
        let mut order = String::new();
        for m in MODULES {
            let name = Path::new(m).file_name().unwrap().to_string_lossy().into_owned();
            std::fs::copy(modules.join(format!("{m}.ko")), root.join(format!("m/{name}.ko")))
                .unwrap_or_else(|e| panic!("module {m}: {e}"));
            order.push_str(&name);
            order.push('\n');
        }
        std::fs::write(root.join("m/order"), order).unwrap();
        std::fs::copy(here.join("guest-init.sh"), root.join("init")).unwrap();
        sh(&format!("chmod +x '{}/init'", root.display()));
        let base = dir.path().join("base.cpio");
        sh(&format!(
            "cd '{}' && find . | cpio -o -H newc --quiet > '{}'",
            root.display(),
            base.display()
        ));
        Image {
            kernel,
            base,
            _dir: dir,
        }
    })
}

/// A booted guest running `script` (busybox sh, in /mnt) against the server on `port`.
pub struct Guest {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Guest {
    pub fn boot(port: u16, script: &str) -> Guest {
        Self::boot_with(port, script, false)
    }

    /// With `wip` itself in the guest (stripped, with the libraries it links), for
    /// scripts that run `wip call` through the mount.
    pub fn boot_with(port: u16, script: &str, with_wip: bool) -> Guest {
        let image = image();
        let dir = tempfile::tempdir().unwrap();
        let extra = dir.path().join("extra");
        std::fs::create_dir_all(&extra).unwrap();
        std::fs::write(extra.join("test.sh"), script).unwrap();
        let mut files = String::from("test.sh");
        if with_wip {
            std::fs::create_dir_all(extra.join("bin")).unwrap();
            sh(&format!(
                "strip -o '{}/bin/wip' '{}'",
                extra.display(),
                env!("CARGO_BIN_EXE_wip")
            ));
            sh(&format!(
                "cd '{e}' && ldd bin/wip | grep -o '/[^ ]*' | while read -r l; do mkdir -p \".$(dirname \"$l\")\" && cp -L \"$l\" \".$l\"; done",
                e = extra.display()
            ));
            files = "$(find . -mindepth 1)".into();
        }
        let initrd = dir.path().join("initrd.cpio");
        sh(&format!(
            "cd '{}' && {{ cat '{}'; printf '%s\\n' {files} | cpio -o -H newc --quiet; }} > '{}'",
            extra.display(),
            image.base.display(),
            initrd.display()
        ));
        let mut child = Command::new("qemu-system-x86_64")
            .args([
                "-machine",
                "accel=tcg",
                "-m",
                "512",
                "-nographic",
                "-no-reboot",
            ])
            .arg("-kernel")
            .arg(&image.kernel)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(format!("console=ttyS0 quiet panic=-1 nfsport={port}"))
            .args([
                "-netdev",
                "user,id=n",
                "-device",
                "virtio-net-pci,netdev=n,romfile=",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64 (Debian's qemu-system-x86; .ci/run installs it)");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line.trim_end_matches('\r').to_string()).is_err() {
                    break;
                }
            }
        });
        Guest {
            child,
            lines: rx,
            seen: Vec::new(),
            _dir: dir,
        }
    }

    /// Console lines up to one that starts with `@@ MARKER`: that line's rest.
    pub fn wait_for(&mut self, marker: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        let want = format!("@@ {marker}");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if let Some(rest) = line.strip_prefix(&want) {
                        return rest.trim().to_string();
                    }
                    if line.starts_with("@@ end") {
                        panic!("the guest ended before {marker}:\n{}", self.console());
                    }
                }
                Err(_) => panic!(
                    "no `{want}` from the guest within {limit:?}:\n{}",
                    self.console()
                ),
            }
        }
    }

    /// Everything the guest printed until it powered off.
    pub fn finish(mut self, limit: Duration) -> String {
        self.wait_for("end", limit);
        self.console()
    }

    pub fn console(&self) -> String {
        self.seen.join("\n")
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the guest's script reported as `@@ KEY rest`: the rest (panics naming the key and
/// the console when it is missing).
pub fn report(console: &str, key: &str) -> String {
    console
        .lines()
        .find_map(|l| l.strip_prefix(&format!("@@ {key} ")))
        .unwrap_or_else(|| panic!("no {key} in:\n{console}"))
        .to_string()
}
