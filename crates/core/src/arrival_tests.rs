use super::*;

/// A deterministic jitter in [0, 1).
fn jitter(seed: u64) -> f64 {
    let x = crate::verify::mix(seed);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// `n` ranks, `iters` iterations of an operation of `op_us` that ends on
/// every rank together; each rank enters `jitter_us` at most after the
/// previous end, rank `late` `late_us` more (before entering) and rank
/// `slow` spends `slow_us` more inside (after the others have left).
struct Job {
    n: usize,
    iters: usize,
    op_us: f64,
    jitter_us: f64,
    late: Option<(usize, f64)>,
    slow: Option<(usize, f64)>,
}

impl Job {
    fn timelines(&self) -> Vec<RankTimeline> {
        let mut t: Vec<RankTimeline> = (0..self.n)
            .map(|r| RankTimeline {
                rank: r as u64,
                host: format!("h{r}"),
                ..RankTimeline::default()
            })
            .collect();
        let mut left = vec![0.0; self.n];
        for i in 0..self.iters {
            let mut entries = Vec::new();
            for (r, l) in left.iter().enumerate() {
                let mut e = l + self.jitter_us * jitter((i * 1000 + r) as u64);
                if let Some((_, d)) = self.late.filter(|l| l.0 == r) {
                    e += d;
                }
                entries.push(e);
            }
            let all_in = entries.iter().copied().fold(0.0, f64::max);
            for r in 0..self.n {
                let mut end = all_in + self.op_us;
                if let Some((_, d)) = self.slow.filter(|s| s.0 == r) {
                    end += d;
                }
                t[r].entry_us.push(entries[r]);
                t[r].start_us.push(entries[r]);
                t[r].end_us.push(end);
                left[r] = end;
            }
        }
        t
    }
}

fn scale() -> Scale {
    Scale {
        clock_error_us: 0.0,
        agg_iters: 1,
        busbw_gbps_at_1us: 1000.0,
    }
}

#[test]
fn a_late_rank_is_named_with_its_lateness_and_host() {
    let job = Job {
        n: 4,
        iters: 20,
        op_us: 300.0,
        jitter_us: 2.0,
        late: Some((2, 1000.0)),
        slow: None,
    };
    let a = analyze(&job.timelines(), scale()).unwrap();
    assert!((a.skew_us - 1000.0).abs() < 3.0, "{a:?}");
    assert_eq!((a.last_rank, a.last_rank_iterations), (2, 20));
    let s = a.straggler.clone().expect("rank 2 is named");
    assert_eq!(
        (s.rank, s.host.as_str(), s.kind),
        (2, "h2", StragglerKind::LateRank)
    );
    assert_eq!((s.late_iterations, s.iterations), (19, 20));
    assert!((s.lateness_us - 1000.0).abs() < 3.0);
    assert!(
        (s.before_us - 1000.0).abs() < 3.0 && s.inside_us.abs() < 1e-9,
        "{s:?}"
    );
    assert!(a.lateness_us[2] > 990.0 && a.lateness_us[0] < 3.0, "{a:?}");
    // The late rank waits for nobody: the shortest time inside is the
    // operation's own, and the device busbw is that of 300 us.
    assert!((a.device_time_us - 300.0).abs() < 3.0, "{a:?}");
    assert!((a.device_busbw_gbps - 1000.0 / a.device_time_us).abs() < 1e-9);
    assert!(a.inside_max_us > 1200.0 && a.inside_min_us < 305.0, "{a:?}");
}

#[test]
fn a_rank_slow_inside_is_told_apart_from_a_late_one() {
    let job = Job {
        n: 3,
        iters: 30,
        op_us: 100.0,
        jitter_us: 1.0,
        late: None,
        slow: Some((1, 500.0)),
    };
    let s = analyze(&job.timelines(), scale())
        .unwrap()
        .straggler
        .unwrap();
    assert_eq!((s.rank, s.kind), (1, StragglerKind::SlowLink));
    assert!(
        (s.inside_us - 500.0).abs() < 1e-9 && s.before_us.abs() < 1.0,
        "{s:?}"
    );
}

#[test]
fn quiet_jobs_name_nobody_even_with_noisy_entries() {
    for (n, jitter_us) in [(2, 1.0), (2, 200.0), (4, 3.0), (8, 500.0)] {
        let job = Job {
            n,
            iters: 50,
            op_us: 100.0,
            jitter_us,
            late: None,
            slow: None,
        };
        let a = analyze(&job.timelines(), scale()).unwrap();
        assert_eq!(a.straggler, None, "{n} ranks, jitter {jitter_us}: {a:?}");
    }
}

#[test]
fn lateness_within_the_clock_error_or_the_noise_names_nobody() {
    let job = Job {
        n: 4,
        iters: 20,
        op_us: 100.0,
        jitter_us: 1.0,
        late: Some((3, 50.0)),
        slow: None,
    };
    let t = job.timelines();
    assert!(analyze(&t, scale()).unwrap().straggler.is_some());
    let loose = Scale {
        clock_error_us: 80.0,
        ..scale()
    };
    let a = analyze(&t, loose).unwrap();
    assert_eq!((a.straggler, a.noise_us), (None, 80.0));
    // Too few iterations to say.
    let short = Job { iters: 4, ..job };
    assert_eq!(
        analyze(&short.timelines(), scale()).unwrap().straggler,
        None
    );
}

#[test]
fn nothing_to_analyse_is_none() {
    assert_eq!(analyze(&[], scale()), None);
    assert_eq!(analyze(&[RankTimeline::default()], scale()), None);
    let one = Job {
        n: 1,
        iters: 10,
        op_us: 1.0,
        jitter_us: 0.0,
        late: None,
        slow: None,
    };
    let a = analyze(&one.timelines(), scale()).unwrap();
    assert_eq!((a.skew_us, a.straggler), (0.0, None));
}

#[test]
fn on_a_gpu_the_kernels_start_is_the_arrival_not_the_queued_launch() {
    // A pipelined GPU loop: every host queues its launches far ahead of
    // its stream (entries 0, 1, 2 ... us), so host entries say nothing of
    // arrival; rank 1's stream reaches the collective 100 us after the
    // others' (a late GPU), which the kernel starts show.
    let mut t = Job {
        n: 3,
        iters: 20,
        op_us: 50.0,
        jitter_us: 1.0,
        late: Some((1, 100.0)),
        slow: None,
    }
    .timelines();
    for (r, rank) in t.iter_mut().enumerate() {
        rank.entry_us = (0..20).map(|i| (i * 3 + r) as f64).collect();
    }
    let a = analyze(&t, scale()).unwrap();
    assert!((a.skew_us - 100.0).abs() < 2.0, "{a:?}");
    let s = a.straggler.expect("rank 1 is named");
    assert_eq!((s.rank, s.kind), (1, StragglerKind::LateRank));
    assert!((s.before_us - 100.0).abs() < 2.0, "{s:?}");
}

/// 4 ranks whose collective ends 150-300 µs later on rank 0 or rank 1 in
/// turn (the collective's own order, as over TCP at 4 MiB), each entering
/// a few µs after its end; rank 3, if `late_us`, that much later still.
fn ordered_job(late_us: f64) -> Vec<RankTimeline> {
    ordered_job_every(late_us, 2)
}

/// As [`ordered_job`], with rank 0 or 1 behind in two of every `period`
/// iterations only.
fn ordered_job_every(late_us: f64, period: usize) -> Vec<RankTimeline> {
    let mut t: Vec<RankTimeline> = (0..4)
        .map(|r| RankTimeline {
            rank: r as u64,
            host: format!("h{r}"),
            ..RankTimeline::default()
        })
        .collect();
    let mut left = [0.0f64; 4];
    for i in 0..40usize {
        let starts: Vec<f64> = (0..4)
            .map(|r| {
                let held = if r == 3 { late_us } else { 0.0 };
                left[r] + 3.0 * jitter((i * 1000 + r) as u64) + held
            })
            .collect();
        let all_in = starts.iter().copied().fold(0.0, f64::max);
        for r in 0..4 {
            let behind = if i % period < 2 && r == i % period {
                150.0 + 150.0 * jitter((i * 7919 + r) as u64)
            } else {
                0.0
            };
            let end = all_in + 2000.0 + behind;
            t[r].entry_us.push(starts[r]);
            t[r].start_us.push(starts[r]);
            t[r].end_us.push(end);
            left[r] = end;
        }
    }
    t
}

#[test]
fn a_late_rank_hidden_behind_the_collectives_own_order_is_named() {
    let a = analyze(&ordered_job(100.0), scale()).unwrap();
    assert_ne!(a.last_rank, 3, "others arrive after it: {a:?}");
    let s = a.straggler.expect("rank 3 is named");
    assert_eq!((s.rank, s.kind), (3, StragglerKind::LateRank), "{s:?}");
    assert!((s.before_us - 100.0).abs() < 10.0, "{s:?}");
    let quiet = analyze(&ordered_job(0.0), scale()).unwrap();
    assert_eq!(quiet.straggler, None, "{quiet:?}");
}

#[test]
fn a_late_rank_last_most_often_but_in_too_few_iterations_is_named() {
    // Rank 0 or 1 is behind in half the iterations: rank 3, held 100 µs,
    // is last in the other half only (not more than 60%).
    let a = analyze(&ordered_job_every(100.0, 4), scale()).unwrap();
    assert_eq!(a.last_rank, 3, "{a:?}");
    assert!(a.last_rank_iterations <= 24, "{a:?}");
    let s = a.straggler.expect("rank 3 is named");
    assert_eq!((s.rank, s.kind), (3, StragglerKind::LateRank), "{s:?}");
    assert!((s.before_us - 100.0).abs() < 10.0, "{s:?}");
    let quiet = analyze(&ordered_job_every(0.0, 4), scale()).unwrap();
    assert_eq!(quiet.straggler, None, "{quiet:?}");
}

#[test]
fn with_two_ranks_time_lost_inside_names_nobody() {
    // Rank 1 leaves 98 µs after rank 0 every iteration: with two ranks
    // that is the collective's own order as much as a slow link.
    let job = Job {
        n: 2,
        iters: 40,
        op_us: 500.0,
        jitter_us: 2.0,
        late: None,
        slow: Some((1, 98.0)),
    };
    let a = analyze(&job.timelines(), scale()).unwrap();
    assert_eq!(a.straggler, None, "{a:?}");
    // A late rank (time lost before) is still named with two ranks.
    let job = Job {
        late: Some((1, 100.0)),
        slow: None,
        ..job
    };
    let s = analyze(&job.timelines(), scale()).unwrap().straggler;
    assert_eq!(
        s.map(|s| (s.rank, s.kind)),
        Some((1, StragglerKind::LateRank))
    );
}
