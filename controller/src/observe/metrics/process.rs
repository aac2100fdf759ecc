//! The standard `process_*` metrics of the controller itself, read from
//! `/proc/self` at scrape time (the names and meanings of the Prometheus
//! clients' process collectors): CPU seconds, resident and virtual memory,
//! open and maximum file descriptors, start time.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What `/proc/self/stat` says, in units.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    cpu_seconds: f64,
    virtual_bytes: u64,
    resident_bytes: u64,
    /// Seconds since boot.
    started_after_boot: f64,
}

/// Parse `/proc/<pid>/stat` (the command may hold spaces and parentheses:
/// the fields start after the last `)`).
fn parse_stat(text: &str, ticks_per_second: f64, page_size: u64) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // Fields from the 3rd (state) on: utime is the 14th, so index 11 here.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let number = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(Stat {
        cpu_seconds: (number(11)? + number(12)?) as f64 / ticks_per_second,
        started_after_boot: number(19)? as f64 / ticks_per_second,
        virtual_bytes: number(20)?,
        resident_bytes: number(21)? * page_size,
    })
}

/// The boot time (`btime` of `/proc/stat`), in seconds since the epoch.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of open files (`/proc/self/limits`).
fn parse_max_fds(text: &str) -> Option<u64> {
    text.lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
}

#[allow(unsafe_code)]
fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let value = unsafe { libc::sysconf(name) };
    u64::try_from(value).ok().filter(|v| *v > 0)
}

#[derive(Debug)]
pub(super) struct ProcessCollector {
    ticks_per_second: f64,
    page_size: u64,
    /// The start time, in seconds since the epoch (it does not change).
    start_time: Option<f64>,
}

impl ProcessCollector {
    pub(super) fn new() -> Self {
        let ticks_per_second = sysconf(libc::_SC_CLK_TCK).unwrap_or(100) as f64;
        let page_size = sysconf(libc::_SC_PAGESIZE).unwrap_or(4096);
        let start_time = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_boot_time(&t))
            .zip(
                std::fs::read_to_string("/proc/self/stat")
                    .ok()
                    .and_then(|t| parse_stat(&t, ticks_per_second, page_size)),
            )
            .map(|(boot, stat)| boot as f64 + stat.started_after_boot);
        ProcessCollector {
            ticks_per_second,
            page_size,
            start_time,
        }
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(family)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(stat) = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|t| parse_stat(&t, self.ticks_per_second, self.page_size))
        {
            let family = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(stat.cpu_seconds).encode(family)?;
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stat.resident_bytes as f64,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.virtual_bytes as f64,
            )?;
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            // The directory being read holds a descriptor of its own.
            let open = fds.count().saturating_sub(1);
            gauge(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors.",
                open as f64,
            )?;
        }
        if let Some(max) = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|t| parse_max_fds(&t))
        {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max as f64,
            )?;
        }
        if let Some(start) = self.start_time {
            gauge(
                &mut encoder,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                start,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_come_after_the_last_parenthesis() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime cutime cstime priority nice threads
        // itrealvalue starttime vsize rss ...
        let text = "42 (a) b) c) S 1 42 42 0 -1 4194560 10 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 300 18446744073709551615";
        let stat = parse_stat(text, 100.0, 4096).unwrap();
        assert_eq!(
            stat,
            Stat {
                cpu_seconds: 3.0,
                virtual_bytes: 123_456_789,
                resident_bytes: 300 * 4096,
                started_after_boot: 10.0,
            }
        );
        assert_eq!(parse_stat("garbage", 100.0, 4096), None);
    }

    #[test]
    fn limits_and_boot_time_parse() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn this_process_is_described() {
        let c = ProcessCollector::new();
        let start = c.start_time.expect("a start time on Linux");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start}"
        );
    }
}
