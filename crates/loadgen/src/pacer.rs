//! The open-loop pacer's clock: a `timerfd` watched by the core's runtime, so waiting for the
//! next send time costs no CPU and lets responses be processed meanwhile, yet wakes within
//! tens of microseconds (monoio's own timer has millisecond ticks, far too coarse for
//! thousands of sends per second). The last `SPIN_WINDOW` before a deadline is spent spinning
//! in place, which absorbs the wake-up latency.

use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

/// Wake this long before a deadline and spin the rest: covers the epoll wake-up latency.
const SPIN_WINDOW: Duration = Duration::from_micros(30);

pub struct Pacer {
    /// The timerfd, wrapped only to be watched for readability by the runtime.
    watcher: monoio::net::UnixStream,
}

impl Pacer {
    /// Must be called on the runtime's thread.
    pub fn new() -> std::io::Result<Pacer> {
        // SAFETY: plain syscalls; the descriptor is checked and then owned by the watcher.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Wake-ups of this thread's waits need not be coalesced (the default slack is 50 us).
        // SAFETY: prctl with a plain integer argument.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        // SAFETY: `fd` is a fresh descriptor we own; the stream is never read through monoio.
        let std_stream = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
        Ok(Pacer { watcher: monoio::net::UnixStream::from_std(std_stream)? })
    }

    /// Returns at `deadline` (at once if it has passed).
    pub async fn wait_until(&self, deadline: Instant) {
        loop {
            let now = Instant::now();
            let Some(left) = deadline.checked_duration_since(now).filter(|d| !d.is_zero()) else { return };
            if left <= SPIN_WINDOW {
                while Instant::now() < deadline {
                    std::hint::spin_loop();
                }
                return;
            }
            if self.arm(left - SPIN_WINDOW).is_err() || self.watcher.readable(false).await.is_err() {
                // Without a timer, spinning still keeps the schedule.
                while Instant::now() < deadline {
                    std::hint::spin_loop();
                }
                return;
            }
            self.drain();
        }
    }

    fn arm(&self, after: Duration) -> std::io::Result<()> {
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let value = libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(after.subsec_nanos().max(1)),
        };
        let spec = libc::itimerspec { it_interval: zero, it_value: value };
        // SAFETY: a valid timerfd and a fully initialised itimerspec.
        if unsafe { libc::timerfd_settime(self.watcher.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Consumes the expiration count so the descriptor stops being readable.
    fn drain(&self) {
        let mut expirations = 0u64;
        // SAFETY: reads at most 8 bytes into a local u64; EAGAIN is fine.
        let _ = unsafe { libc::read(self.watcher.as_raw_fd(), (&mut expirations as *mut u64).cast(), 8) };
    }
}
