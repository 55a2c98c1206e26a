//! Worker threads for host calls. The pool grows with demand up to `max` threads (idle
//! workers leave after a minute); beyond that, jobs wait in a queue, and the call's
//! timeout, which counts from submission, still bounds its caller's wait.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

/// How long an idle worker waits for a job before it leaves.
const IDLE_EXIT: Duration = Duration::from_secs(60);

pub struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    max: usize,
    state: Mutex<State>,
    work: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    started: usize,
}

/// What the pool is doing now, for `.wip/stats` and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub threads: usize,
    pub idle: usize,
    pub queued: usize,
    /// Threads started since the pool was made.
    pub started: usize,
}

impl Pool {
    pub fn new(max: usize) -> Pool {
        Pool {
            shared: Arc::new(Shared {
                max: max.max(1),
                state: Mutex::new(State::default()),
                work: Condvar::new(),
            }),
        }
    }

    pub fn max(&self) -> usize {
        self.shared.max
    }

    /// Queue `job`; it starts at once when a worker is idle or the pool may grow.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let mut st = self.shared.lock();
        st.queue.push_back(Box::new(job));
        if st.idle >= st.queue.len() {
            self.shared.work.notify_one();
            return Ok(());
        }
        if st.threads < self.shared.max {
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new()
                .name("call".into())
                .spawn(move || worker(shared))?;
            st.threads += 1;
            st.started += 1;
        }
        Ok(())
    }

    pub fn stats(&self) -> PoolStats {
        let st = self.shared.lock();
        PoolStats {
            threads: st.threads,
            idle: st.idle,
            queued: st.queue.len(),
            started: st.started,
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A job never runs under the lock, so a poisoned lock holds a consistent queue.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn worker(shared: Arc<Shared>) {
    let mut st = shared.lock();
    loop {
        if let Some(job) = st.queue.pop_front() {
            drop(st);
            job();
            st = shared.lock();
            continue;
        }
        st.idle += 1;
        let (next, timeout) = shared
            .work
            .wait_timeout(st, IDLE_EXIT)
            .unwrap_or_else(|p| p.into_inner());
        st = next;
        st.idle -= 1;
        if timeout.timed_out() && st.queue.is_empty() {
            st.threads -= 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_hung_job_does_not_delay_the_next_and_idle_workers_are_reused() {
        let pool = Pool::new(8);
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        pool.run(move || {
            let _ = hold_rx.recv();
        })
        .unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        pool.run(move || done_tx.send(()).unwrap()).unwrap();
        done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        hold_tx.send(()).unwrap();
        // Wait (bounded) until both workers are idle, then run 50 jobs one after another:
        // they reuse the two idle workers and start no thread.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pool.stats().idle < 2 {
            assert!(std::time::Instant::now() < deadline, "{:?}", pool.stats());
            std::thread::yield_now();
        }
        let threads = pool.stats().threads;
        assert_eq!(threads, 2);
        for _ in 0..50 {
            let (tx, rx) = mpsc::channel();
            pool.run(move || tx.send(()).unwrap()).unwrap();
            rx.recv_timeout(Duration::from_secs(5)).unwrap();
            // The job has answered; its worker marks itself idle right after.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while pool.stats().idle < 2 {
                assert!(std::time::Instant::now() < deadline, "{:?}", pool.stats());
                std::thread::yield_now();
            }
            assert_eq!(pool.stats().threads, 2, "a job started a new thread");
        }
    }

    #[test]
    fn the_pool_stops_growing_at_its_maximum_and_queues() {
        let pool = Pool::new(2);
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        let hold_rx = Arc::new(Mutex::new(hold_rx));
        let (ran_tx, ran_rx) = mpsc::channel();
        for i in 0..3 {
            let (hold, ran) = (Arc::clone(&hold_rx), ran_tx.clone());
            pool.run(move || {
                ran.send(i).unwrap();
                let _ = hold.lock().unwrap().recv();
            })
            .unwrap();
        }
        // Two start; the third waits for a free worker.
        let mut started = vec![
            ran_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
            ran_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        ];
        assert_eq!(pool.stats().threads, 2);
        assert_eq!(pool.stats().queued, 1);
        hold_tx.send(()).unwrap();
        started.push(ran_rx.recv_timeout(Duration::from_secs(5)).unwrap());
        started.sort();
        assert_eq!(started, vec![0, 1, 2]);
        hold_tx.send(()).unwrap();
        hold_tx.send(()).unwrap();
    }
}
