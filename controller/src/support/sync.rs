//! Locks that outlive a panic: a task that panicked while holding a mutex
//! leaves data that is still consistent for our uses (every critical
//! section is a plain replace or insert), so poisoning is ignored.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, ignoring poisoning.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
