//! Threads for running host calls, so the caller can stop waiting after `call_timeout`.
//! Every job gets a thread at once (an idle one, or a new one): a call that hangs never
//! delays another call queued behind it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

type Job = Box<dyn FnOnce() + Send>;

pub struct Pool {
    tx: Mutex<mpsc::Sender<Job>>,
    rx: Arc<Mutex<mpsc::Receiver<Job>>>,
    /// Workers waiting for a job and not yet claimed by a submitter.
    idle: Arc<AtomicUsize>,
}

impl Default for Pool {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        Pool {
            tx: Mutex::new(tx),
            rx: Arc::new(Mutex::new(rx)),
            idle: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Pool {
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let claimed = self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !claimed {
            let (rx, idle) = (Arc::clone(&self.rx), Arc::clone(&self.idle));
            std::thread::Builder::new()
                .name("call".into())
                .spawn(move || worker(rx, idle))?;
        }
        let tx = self
            .tx
            .lock()
            .map_err(|_| std::io::Error::other("pool poisoned"))?;
        tx.send(Box::new(job))
            .map_err(|_| std::io::Error::other("pool closed"))
    }
}

fn worker(rx: Arc<Mutex<mpsc::Receiver<Job>>>, idle: Arc<AtomicUsize>) {
    loop {
        // The lock is held only while waiting; the job runs without it.
        let job = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
        idle.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_hung_job_does_not_delay_the_next() {
        let pool = Pool::default();
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        pool.run(move || {
            let _ = hold_rx.recv();
        })
        .unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        pool.run(move || done_tx.send(()).unwrap()).unwrap();
        done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        hold_tx.send(()).unwrap();
        // Workers are reused once idle.
        for _ in 0..50 {
            let (tx, rx) = mpsc::channel();
            pool.run(move || tx.send(()).unwrap()).unwrap();
            rx.recv_timeout(Duration::from_secs(5)).unwrap();
        }
    }
}
