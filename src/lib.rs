//! wip: mount a Worldspace — hosts (an issue tracker, files, …) projected as one tree.
//!
//! Data flows one way: kernel → `fuse` (or an NFS client → `nfs`) → `world` (router,
//! guards, validation, journal) → a host in `hosts` → its backend.

pub mod cache;
pub mod calendar;
pub mod children;
pub mod control;
pub mod daemon;
pub mod fuse;
pub mod fuzz;
pub mod host;
pub mod hosts;
pub mod launch;
pub mod manifest;
pub mod nfs;
pub mod proc;
pub mod secrets;
pub mod sqlite;
pub mod state;
pub mod world;
