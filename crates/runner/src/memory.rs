//! How much host memory this process may still take: the smaller of the
//! kernel's `MemAvailable` and what every enclosing cgroup (v2
//! `memory.max`, v1 `memory.limit_in_bytes`) has left. Backends size their
//! largest case against it before allocating, so that a sweep too big for
//! the host is refused with a line instead of being killed by the kernel.
//!
//! Test hook (hidden, not for users): `COLLBENCH_MEM_LIMIT_BYTES=N` makes
//! the probe answer N bytes, so tests can stand in for a small host.

use std::path::{Path, PathBuf};

/// Environment variable overriding the probe (tests only).
pub const LIMIT_ENV: &str = "COLLBENCH_MEM_LIMIT_BYTES";

/// Bytes this process can still allocate, or `None` when nothing can be
/// read (then callers do not refuse anything).
pub fn available_bytes() -> Option<u64> {
    if let Some(v) = std::env::var(LIMIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return Some(v);
    }
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| meminfo_available(&s));
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")
        .map(|s| cgroup_dirs(&s, Path::new("/sys/fs/cgroup")))
        .unwrap_or_default();
    let limits = cgroups.iter().filter_map(|d| cgroup_headroom(d));
    mem.into_iter().chain(limits).min()
}

/// `MemAvailable` from /proc/meminfo, in bytes.
pub fn meminfo_available(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
}

/// Memory cgroup directories of this process, innermost first, with all
/// their ancestors (a parent's limit binds too), from /proc/self/cgroup.
pub fn cgroup_dirs(proc_cgroup: &str, root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let base = if id == "0" && controllers.is_empty() {
            root.to_path_buf()
        } else if controllers.split(',').any(|c| c == "memory") {
            root.join("memory")
        } else {
            continue;
        };
        let mut rel = PathBuf::from(path.trim_start_matches('/'));
        loop {
            dirs.push(base.join(&rel));
            if !rel.pop() {
                break;
            }
        }
    }
    dirs
}

/// What the cgroup in `dir` has left: its limit minus its usage, not
/// counting inactive page cache (the kernel reclaims it before killing).
/// `None` for no limit or no cgroup files there.
pub fn cgroup_headroom(dir: &Path) -> Option<u64> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let num = |s: Option<String>| s.and_then(|s| s.trim().parse::<u64>().ok());
    let (limit, usage, inactive) = if let Some(max) = read("memory.max") {
        (
            num(Some(max))?,
            num(read("memory.current"))?,
            read("memory.stat").and_then(|s| stat_field(&s, "inactive_file")),
        )
    } else {
        (
            num(read("memory.limit_in_bytes"))?,
            num(read("memory.usage_in_bytes"))?,
            read("memory.stat").and_then(|s| stat_field(&s, "total_inactive_file")),
        )
    };
    // v1 writes "no limit" as a number near 2^63.
    if limit >= 1 << 60 {
        return None;
    }
    Some(limit.saturating_sub(usage.saturating_sub(inactive.unwrap_or(0))))
}

fn stat_field(stat: &str, name: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok())?
    })
}

/// Bytes as GiB with one decimal, as the refusal prints them.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_meminfo() {
        let s = "MemTotal:       24000000 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(meminfo_available(s), Some(22_000_000 * 1024));
        assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn cgroup_limits_v1_and_v2_with_ancestors() {
        let root = std::env::temp_dir().join(format!("collbench-cg-{}", std::process::id()));
        let v2 = root.join("a/b");
        let v1 = root.join("memory/job");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        std::fs::write(v2.join("memory.current"), "100\n").unwrap();
        std::fs::write(root.join("a/memory.max"), "4096\n").unwrap();
        std::fs::write(root.join("a/memory.current"), "1500\n").unwrap();
        std::fs::write(root.join("a/memory.stat"), "anon 1\ninactive_file 500\n").unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "8192\n").unwrap();
        std::fs::write(v1.join("memory.usage_in_bytes"), "192\n").unwrap();

        let dirs = cgroup_dirs("4:memory:/job\n1:cpu:/x\n0::/a/b\n", &root);
        assert_eq!(
            dirs,
            vec![
                root.join("memory/job"),
                root.join("memory"),
                root.join("a/b"),
                root.join("a"),
                root.clone()
            ]
        );
        let found: Vec<u64> = dirs.iter().filter_map(|d| cgroup_headroom(d)).collect();
        // v1 job: 8192 - 192; v2 parent a: 4096 - (1500 - 500); b has no limit.
        assert_eq!(found, vec![8000, 3096]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
